"""The log audit on a long history: `python -m benchmarks.bench_audit [--rows N] [--shards S]`.

Writes a generated clean history (`labkit.audit.samples.synthetic_log`: status rows over the
shards, a frontier-rule checkpoint per shard every 1,000 of its rows) as two CSV files in a
temporary folder, then runs `python -m labkit audit log` on them in a child process and prints
its rows per second and its peak resident memory. A measurement to read, not a timed test.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from labkit.audit.log import CHECKPOINT_COLUMNS, STATUS_COLUMNS, StatusRow
from labkit.audit.samples import synthetic_log


def write_history(folder: Path, rows: int, shards: int) -> tuple[Path, Path, int]:
    """The two CSV files, written row by row; returns their paths and the checkpoint count."""
    status, ckpt = folder / "status.csv", folder / "checkpoints.csv"
    count = 0
    with status.open("w", newline="") as fs, ckpt.open("w", newline="") as fc:
        ws, wc = csv.writer(fs, lineterminator="\n"), csv.writer(fc, lineterminator="\n")
        ws.writerow(STATUS_COLUMNS)
        wc.writerow(CHECKPOINT_COLUMNS)
        for item in synthetic_log(rows, shards=shards, every=1000):
            if isinstance(item, StatusRow):
                ws.writerow((item.id, item.shard, item.status, item.at))
            else:
                wc.writerow((item.shard, item.start, item.end, item.at))
                count += 1
    return status, ckpt, count


def _child_usage() -> tuple[float, float]:
    """Peak resident MB and CPU seconds of the finished child; NaN where `resource` is missing."""
    try:
        import resource
    except ImportError:  # Windows
        return float("nan"), float("nan")
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    return child.ru_maxrss / 1024, child.ru_utime + child.ru_stime  # Linux: KiB


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(prog="python -m benchmarks.bench_audit")
    args.add_argument("--rows", type=int, default=1_000_000)
    args.add_argument("--shards", type=int, default=100)
    opts = args.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        status, ckpt, checkpoints = write_history(Path(tmp), opts.rows, opts.shards)
        size_mb = status.stat().st_size / 1e6
        command = [sys.executable, "-m", "labkit", "audit", "log", str(status)]
        start = time.perf_counter()
        done = subprocess.run(
            [*command, "--checkpoints", str(ckpt)], capture_output=True, text=True
        )
        seconds = time.perf_counter() - start
    peak_mb, cpu = _child_usage()
    verdict = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()
    print(
        f"{opts.rows:,} status rows ({size_mb:.0f} MB CSV), {checkpoints:,} checkpoints, "
        f"{opts.shards} shards"
    )
    print(
        f"audit log: {seconds:.1f} s wall (process start included), "
        f"{opts.rows / seconds:,.0f} rows/s, peak resident memory {peak_mb:.0f} MB"
    )
    print(
        f"CPU time {cpu:.1f} s, {opts.rows / cpu:,.0f} rows per CPU second "
        "(the wall time also counts waiting for a shared CPU)"
    )
    print(f"exit {done.returncode}: {verdict}")
    return 0 if done.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
