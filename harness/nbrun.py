"""Run a notebook headless in a fresh kernel (nbclient, as it is) and read what it printed.

The tests, `python -m harness.dry_run` and the site build use it (nbclient is a dev dependency);
labkit itself never executes notebooks.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any


def execute_notebook(
    path: Path, timeout: int = 60, cwd: Path | None = None, allow_errors: bool = False
) -> Any:
    """Run a notebook top to bottom in a fresh kernel; return the executed node (not saved).

    With `allow_errors` a failing cell records an error output and the run goes on, so a test
    can assert on `cell_errors`; without it the first failing cell raises `CellExecutionError`.
    """
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    sockets = tempfile.mkdtemp(prefix="nbk-")
    client = NotebookClient(
        nb,
        config=unix_socket_kernels(sockets),  # nbclient makes the manager, so it shuts it down
        timeout=timeout,
        kernel_name="python3",
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(cwd or path.parent)}},
    )
    # A progress file is the learner's: a run on a learner's behalf records nowhere unless told.
    env = {**os.environ, "LABKIT_PROGRESS": os.environ.get("LABKIT_PROGRESS", "off")}
    try:
        client.execute(env=env)
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    return nb


def unix_socket_kernels(sockets: str) -> Any:
    """Configuration for kernels that listen on Unix sockets in `sockets` (a short path: a
    socket's is at most 107 bytes), not on TCP ports. jupyter_client picks free TCP ports and
    the kernel binds them a moment later: with four workers starting kernels, servers and
    browsers, another process took one in between ("Address already in use"), and the run
    waited out its 60 s for a kernel that had died (6 December). Given as configuration, not
    as a manager: nbclient shuts down only a kernel whose manager it made itself."""
    from traitlets.config import Config

    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = os.path.join(sockets, "kernel")
    return config


def cell_text(cell: Any) -> str:
    """The stream and text/plain outputs of one executed cell, joined."""
    return "".join(_texts(cell))


def cell_text_outputs(nb: Any) -> list[str]:
    """All stream and text/plain outputs of an executed notebook, in order."""
    return [text for cell in nb.cells for text in _texts(cell)]


def _texts(cell: Any) -> list[str]:
    texts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            texts.append(out.get("text", ""))
        elif "data" in out and "text/plain" in out["data"]:
            texts.append(out["data"]["text/plain"])
    return texts


def cell_errors(nb: Any) -> list[str]:
    """`ename: evalue` of every error output of an executed notebook, in order."""
    return [
        f"{out.get('ename')}: {out.get('evalue')}"
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]


# A notebook that asks labkit.pg for a server starts PostgreSQL in its kernel (the embedded one,
# or LABKIT_PG_DSN): the test that runs it must be marked `postgres` (conftest's guard cannot
# see into a kernel).
_ASKS_FOR_A_SERVER = re.compile(
    r"\bpg\.(?:server|shared_server|server_or_reason)\(|\bfrom labkit\.pg import\b"
)


def starts_postgres(path: Path) -> bool:
    """True if a code cell of the notebook at `path` asks `labkit.pg` for a server."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    return bool(_ASKS_FOR_A_SERVER.search(code))
