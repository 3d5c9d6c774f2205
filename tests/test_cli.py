"""`python -m labkit`: a bad path is one line on stderr naming it, exit 2, nothing written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.__main__ import main

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "exercises" / "solutions"


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def fails(argv: list[str], capsys: pytest.CaptureFixture, path: Path, problem: str) -> None:
    """`main(argv)` exits 2 with exactly one stderr line naming `path` and `problem`."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f": {path}: " in err and problem in err, err


@pytest.fixture
def solutions(tmp_path: Path) -> Path:
    src = tmp_path / "solutions"
    shutil.copytree(SOLUTIONS, src)
    return src


@pytest.mark.parametrize("out", [".", "./", "../solutions"])
def test_exercises_refuses_to_write_over_the_solutions(
    solutions: Path, out: str, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(solutions)
    before = snapshot(solutions)
    fails(["exercises", "--src", ".", "--out", out], capsys, Path(out), "overwrite them")
    assert snapshot(solutions) == before


def test_exercises_refuses_a_missing_or_empty_src(tmp_path: Path, capsys) -> None:
    out = tmp_path / "student"
    fails(
        ["exercises", "--src", str(tmp_path / "nope"), "--out", str(out)],
        capsys,
        tmp_path / "nope",
        "no such directory",
    )
    (tmp_path / "empty").mkdir()
    fails(
        ["exercises", "--src", str(tmp_path / "empty"), "--out", str(out)],
        capsys,
        tmp_path / "empty",
        "no *.ipynb",
    )
    assert not out.exists()


def test_exercises_refuses_an_out_that_is_a_file(solutions: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "student"
    out.write_text("keep me")
    fails(["exercises", "--src", str(solutions), "--out", str(out)], capsys, out, "not a directory")
    assert out.read_text() == "keep me"


def test_exercises_with_a_broken_notebook_writes_no_copy(solutions: Path, tmp_path: Path, capsys):
    broken = solutions / "zz_broken.ipynb"
    broken.write_text("{not json")
    out = tmp_path / "student"
    fails(["exercises", "--src", str(solutions), "--out", str(out)], capsys, broken, "invalid JSON")
    assert not out.exists()


def test_exercises_writes_the_copies(solutions: Path, tmp_path: Path) -> None:
    assert main(["exercises", "--src", str(solutions), "--out", str(tmp_path / "s")]) == 0
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == sorted(
        p.name for p in SOLUTIONS.glob("*.ipynb")
    )


def test_figures_refuses_an_out_that_is_a_file(tmp_path: Path, capsys) -> None:
    out = tmp_path / "figures"
    out.write_text("keep me")
    fails(["figures", "--out", str(out)], capsys, out, "exists and is not a directory")
    assert out.read_text() == "keep me"


def test_figures_refuses_an_impossible_path(tmp_path: Path, capsys) -> None:
    (tmp_path / "file").write_text("keep me")
    out = tmp_path / "file" / "figures"
    fails(["figures", "--out", str(out)], capsys, out, "cannot create the directory")
    assert (tmp_path / "file").read_text() == "keep me"


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="root writes into a read-only directory anyway; Windows has no POSIX mode bits",
)
def test_figures_refuses_a_read_only_directory(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o555)
    try:
        fails(["figures", "--out", str(out)], capsys, out, "cannot write")
        assert not list(out.iterdir())
    finally:
        out.chmod(0o755)


def test_figures_refuses_a_directory_it_cannot_write(tmp_path: Path, capsys, monkeypatch) -> None:
    """The same branch as above, reached as root too: the probe file cannot be created."""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    fails(["figures", "--out", str(tmp_path)], capsys, tmp_path, "cannot write")
    assert not list(tmp_path.iterdir())


def test_strip_refuses_missing_and_non_json_files(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "missing.ipynb"
    fails(["strip", str(missing)], capsys, missing, "no such file")
    text = tmp_path / "notes.ipynb"
    text.write_text("not json at all")
    fails(["strip", str(text)], capsys, text, "invalid JSON")
    other = tmp_path / "other.ipynb"
    other.write_text('{"a": 1}')
    fails(["strip", str(other)], capsys, other, "no 'cells' list")
    assert text.read_text() == "not json at all" and other.read_text() == '{"a": 1}'


def test_strip_changes_nothing_when_one_path_is_bad(solutions: Path, tmp_path: Path, capsys):
    nb = solutions / "ex01_max_and_orphans.ipynb"
    dirty = nb.read_text().replace(
        '"outputs": []', '"outputs": [{"output_type": "stream", "name": "stdout", "text": "hi"}]', 1
    )
    nb.write_text(dirty)
    bad = tmp_path / "missing.ipynb"
    fails(["strip", str(nb), str(bad)], capsys, bad, "no such file")
    assert nb.read_text() == dirty
    assert main(["strip", str(nb)]) == 0
    assert nb.read_text() != dirty and '"text": "hi"' not in nb.read_text()


@pytest.mark.slow
def test_the_module_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "labkit", "strip", str(tmp_path / "missing.ipynb")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert (
        proc.stderr
        == f"python -m labkit strip: {tmp_path / 'missing.ipynb'}: no such file or directory\n"
    )
