"""Files are written beside and renamed: a failed write leaves the old file exactly as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.files import UnsafeTarget, replace_file

# A child whose files may not grow past 4 kB: the write fails half way, as on a full disk.
FULL_DISK = """
import resource, signal, sys
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
target, how = Path(sys.argv[1]), sys.argv[2]
big = "x" * 100_000
if how == "replace":
    from labkit.files import replace_file
    replace_file(target, big)
else:
    target.write_text(big)
"""


def _write_on_a_full_disk(target: Path, how: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(target), how], capture_output=True, text=True
    )


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_write_that_fails_half_way_leaves_the_old_file_and_no_litter(tmp_path: Path) -> None:
    target = tmp_path / "nb.ipynb"
    target.write_text('{"cells": []}\n')
    done = _write_on_a_full_disk(target, "replace")
    assert done.returncode != 0 and "File too large" in done.stderr
    assert target.read_text() == '{"cells": []}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nb.ipynb"]


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_the_in_place_write_it_replaces_would_have_lost_the_file(tmp_path: Path) -> None:
    """The reference: truncate-then-write on the same full disk leaves a broken file."""
    target = tmp_path / "nb.ipynb"
    target.write_text('{"cells": []}\n')
    assert _write_on_a_full_disk(target, "in place").returncode != 0
    assert target.read_text() != '{"cells": []}\n'


def test_a_replace_writes_the_bytes_and_keeps_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("old")
    target.chmod(0o640)
    replace_file(target, "new\n")
    assert target.read_bytes() == b"new\n"
    if sys.platform != "win32":
        assert target.stat().st_mode & 0o777 == 0o640
    replace_file(tmp_path / "fresh.bin", b"\x00\x01")
    assert (tmp_path / "fresh.bin").read_bytes() == b"\x00\x01"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and symlinks")
@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_fifos_links_and_directories_are_refused_before_anything_is_written(
    tmp_path: Path, kind: str
) -> None:
    target = tmp_path / "out.png"
    elsewhere = tmp_path / "elsewhere.png"
    elsewhere.write_text("keep")
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        target.symlink_to(elsewhere)
    else:
        target.mkdir()
    with pytest.raises(UnsafeTarget, match=str(target)):
        replace_file(target, "x")
    assert elsewhere.read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere.png", "out.png"]
