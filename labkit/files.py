"""Writing a file so that a crash or a full disk never leaves it half-written.

Every file the workbook writes (notebooks stripped in place, student copies, figures, their
manifest) goes through `replace_file`: the bytes are written to a temporary file beside the
target, flushed to disk, and renamed over it. Rename is atomic on one file system, so a reader
sees the old file or the new one, never a mix; on any failure the old file is untouched.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class UnsafeTarget(ValueError):
    """The path names something a replace must not write over (a FIFO, a link, a directory)."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}")


def check_target(path: Path) -> None:
    """Refuse a target that is not a regular file or a free name: a symlink (a write would
    land somewhere else), a FIFO or device (reading or writing it blocks), a directory."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeTarget(path, "is a symbolic link; refusing to write through it")
    if stat.S_ISDIR(st.st_mode):
        raise UnsafeTarget(path, "is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeTarget(path, "is not a regular file (a FIFO, socket or device)")


def replace_file(path: Path, data: bytes | str) -> None:
    """Write `data` (text as UTF-8 with LF line ends) to `path` by write-beside-and-rename.

    Raises `UnsafeTarget` before writing anything, or the `OSError` of the failed write with
    the temporary file removed and `path` exactly as it was.
    """
    path = Path(path)
    check_target(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        if path.exists():
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _sync_dir(path.parent)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _sync_dir(folder: Path) -> None:
    """Make the rename itself durable where the platform allows opening a directory."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # Windows cannot open a directory; its rename is durable on its own
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
