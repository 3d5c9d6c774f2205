"""labkit and the benchmarks run on the laptops a workshop brings: no POSIX-only calls.

A static scan of `labkit/`, `benchmarks/` and `harness/` (tests may use such calls behind a
skip). What it refuses exists only on Linux/macOS, or names a path only they have:
- signals Windows lacks (`signal.SIGKILL`, `SIGALRM`, ...), `os.kill`/`os.killpg`, `os.fork`,
  the `fork` start method, `os.getuid` and friends, `preexec_fn`;
- modules Windows lacks (`fcntl`, `resource`, `pwd`, ...);
- path literals such as ``"/tmp/..."`` (use `tempfile` and `pathlib`).
Code that runs only where the platform has what it uses (under `try: ... except ImportError`,
or an `if` testing `hasattr`, `sys.platform` or `os.name`) is allowed. Portable replacements:
`Popen.kill()`, `tempfile`, `pathlib`, `multiprocessing` with the platform's default start
method.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("labkit", "benchmarks", "harness")

POSIX_MODULES = {"fcntl", "resource", "pwd", "grp", "termios", "tty", "pty", "posix"}
POSIX_ATTRIBUTES = {
    "os": {
        "kill",
        "killpg",
        "fork",
        "forkpty",
        "getuid",
        "geteuid",
        "getgid",
        "getegid",
        "setsid",
        "getpgid",
        "setpgrp",
        "chown",
        "lchown",
    },
    "signal": {
        "SIGKILL",
        "SIGHUP",
        "SIGQUIT",
        "SIGALRM",
        "SIGUSR1",
        "SIGUSR2",
        "SIGCHLD",
        "SIGSTOP",
        "SIGCONT",
        "alarm",
        "setitimer",
        "pthread_kill",
    },
}
POSIX_PATHS = ("/tmp", "/usr/", "/dev/", "/var/", "/proc/", "/etc/")
# Known gaps, each with its reason and said in CONTRIBUTING.md's Platforms section: (file, what).
KNOWN_GAPS = {
    ("labkit/walls.py", "get_context('fork')"): (
        "the exercise walls fork the learner's code into a child that can be killed: a function"
        " defined in a notebook cannot be pickled for spawn; on Windows it runs in-process"
    ),
    ("labkit/pg/stress.py", "get_context('fork')"): (
        "part three's stress run forks its writers: under spawn they start about a second apart"
        " and the late commits it exists to show no longer overlap (needs a start barrier)"
    ),
}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (prose may name any path)."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                found.add(id(body[0].value))
    return found


def _guarded(tree: ast.AST) -> set[int]:
    """ids of the nodes that run only where the platform has what they use: inside a `try`
    that handles ImportError/AttributeError, or an `if` (statement or expression) that tests
    `hasattr(...)`, `sys.platform` or `os.name`."""
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            names = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
            if names & {"ImportError", "ModuleNotFoundError", "AttributeError"}:
                guarded |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
        elif isinstance(node, ast.If | ast.IfExp):
            test = ast.unparse(node.test)
            if any(probe in test for probe in ("hasattr(", "sys.platform", "os.name")):
                guarded |= {id(n) for n in ast.walk(node)}
    return guarded


def posix_only(source: str, filename: str = "<source>") -> list[str]:
    """Each POSIX-only use in `source`, as `file:line: what`."""
    tree = ast.parse(source, filename)
    docstrings, guarded = _docstrings(tree), _guarded(tree)
    found = []

    def flag(node: ast.AST, what: str) -> None:
        found.append(f"{filename}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            for module in modules:
                if module.split(".")[0] in POSIX_MODULES:
                    flag(node, f"imports {module}, which Windows lacks")
            if isinstance(node, ast.ImportFrom) and node.module in POSIX_ATTRIBUTES:
                for alias in node.names:
                    if alias.name in POSIX_ATTRIBUTES[node.module]:
                        flag(node, f"imports {node.module}.{alias.name}, which Windows lacks")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.attr in POSIX_ATTRIBUTES.get(node.value.id, ()):
                flag(node, f"uses {node.value.id}.{node.attr}, which Windows lacks")
        elif isinstance(node, ast.Call):
            name = ast.unparse(node.func).rsplit(".", 1)[-1]
            args = [a.value for a in node.args if isinstance(a, ast.Constant)]
            if name in ("get_context", "set_start_method") and "fork" in args:
                flag(node, f"{name}('fork'): Windows has no fork (use the default method)")
            if any(k.arg == "preexec_fn" for k in node.keywords):
                flag(node, "passes preexec_fn, which Windows refuses")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and node.value.startswith(POSIX_PATHS)
        ):
            flag(node, f"names the path {node.value!r} (use tempfile / pathlib)")
    return found


def _sources() -> list[Path]:
    return sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py"))


def _known(hit: str) -> bool:
    return any(hit.startswith(f"{file}:") and what in hit for file, what in KNOWN_GAPS)


def test_labkit_and_benchmarks_use_no_posix_only_calls() -> None:
    found = [
        hit
        for path in _sources()
        for hit in posix_only(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
        if not _known(hit)
    ]
    assert not found, "POSIX-only code:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("snippet", "what"),
    [
        ("import signal, os\nos.kill(pid, signal.SIGKILL)", "os.kill"),
        ("import signal\nproc.send_signal(signal.SIGKILL)", "signal.SIGKILL"),
        ("from signal import SIGKILL", "signal.SIGKILL"),
        ("import resource", "imports resource"),
        ("import multiprocessing as mp\nmp.get_context('fork')", "get_context('fork')"),
        ("import subprocess\nsubprocess.Popen(args, preexec_fn=f)", "preexec_fn"),
        ("db = '/tmp/catalog.db'", "'/tmp/catalog.db'"),
        ("import os\nuid = os.getuid()", "os.getuid"),
    ],
)
def test_the_scan_flags_posix_only_code(snippet: str, what: str) -> None:
    found = posix_only(snippet)
    assert found and what in found[0]


@pytest.mark.parametrize(
    "snippet",
    [
        "proc.kill()",
        "import signal\nproc.send_signal(signal.SIGTERM)",
        "try:\n    import resource\nexcept ImportError:\n    resource = None",
        "import multiprocessing as mp\nctx = mp.get_context('spawn')",
        "def f():\n    '''Writes nothing to /tmp.'''",
        "import tempfile\nd = tempfile.mkdtemp()",
        "import signal\ncode = -signal.SIGKILL if hasattr(signal, 'SIGKILL') else 1",
        "import os, sys\nif sys.platform != 'win32':\n    os.killpg(pgid, 9)",
    ],
)
def test_the_scan_accepts_portable_code(snippet: str) -> None:
    assert posix_only(snippet) == []


def test_the_stress_run_says_why_it_cannot_run_without_fork(monkeypatch) -> None:
    import multiprocessing

    import pytest

    from labkit.pg import stress as pg_stress

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert not pg_stress.can_run()
    with pytest.raises(RuntimeError, match="cannot fork"):
        pg_stress.run_stress("postgresql://nowhere.invalid/x", "horizon")
