"""`python -m labkit strip | exercises` never leaves a half-written notebook, never blocks on a
FIFO, never writes through a link, and writes a file named twice once (issue 20.2, 20.9)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.__main__ import main

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = next((ROOT / "notebooks").glob("00_*.ipynb"))
POSIX = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs, links and RLIMIT_FSIZE")


def _executed_copy(tmp_path: Path) -> Path:
    """A copy of a notebook with one output, so that strip has something to remove."""
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 200_000)]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    return path


@POSIX
@pytest.mark.slow
def test_strip_on_a_full_disk_leaves_the_notebook_whole(tmp_path: Path) -> None:
    path = _executed_copy(tmp_path)
    before = path.read_bytes()
    child = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "from labkit.__main__ import main\n"
        "sys.exit(main(['strip', sys.argv[1]]))\n"
    )
    done = subprocess.run([sys.executable, "-c", child, str(path)], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "cannot write" in done.stderr and "unchanged" in done.stderr
    assert done.stderr.count("\n") == 1
    assert path.read_bytes() == before  # whole, not truncated JSON
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nb.ipynb"]


@POSIX
def test_strip_refuses_a_fifo_at_once(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    fifo = tmp_path / "pipe.ipynb"
    os.mkfifo(fifo)
    assert main(["strip", str(fifo)]) == 2  # the old code blocked here forever
    err = capsys.readouterr().err
    assert "not a regular file" in err and err.count("\n") == 1


def test_a_notebook_named_twice_is_stripped_once(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = _executed_copy(tmp_path)
    assert main(["strip", str(path), str(tmp_path / "." / "nb.ipynb")]) == 0
    assert capsys.readouterr().out.count("stripped") == 1


@POSIX
def test_exercises_refuses_a_link_inside_the_output_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    src = tmp_path / "solutions"
    shutil.copytree(ROOT / "exercises" / "solutions", src)
    out = tmp_path / "student"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    first = sorted(src.glob("*.ipynb"))[0].name
    (out / first).symlink_to(victim)
    assert main(["exercises", "--src", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and err.count("\n") == 1
    assert victim.read_text() == "keep"
    assert [p.name for p in out.iterdir()] == [first]  # nothing else written either
