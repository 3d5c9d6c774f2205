"""The log audit on a long history, beside the frontier lookup: `python -m benchmarks --only audit`.

Writes a generated clean history (`labkit.audit.samples.synthetic_log`: status rows over the
shards, a frontier-rule checkpoint per shard every 1,000 of its rows) as two CSV files in a
temporary folder, then runs `python -m labkit audit log` on them in a child process, which
reports its own audit time and peak resident memory. In the same run, `delivered_frontier` on a
shard of `LOOKUP_ROWS` rows (`benchmarks.frontier_lookup`'s "active" shape) is timed before and
after the audit, so the ratio per row (audit seconds per status row over seconds per lookup)
compares measurements taken under the same machine load. `python -m benchmarks.audit
[--rows N] [--shards S]` runs the audit alone at any size.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import FIGURES, BenchResult, finish, fmt_s, print_table, time_call
from labkit.audit.log import CHECKPOINT_COLUMNS, STATUS_COLUMNS, StatusRow
from labkit.audit.samples import synthetic_log

NAME = "audit"
ROWS, SHARDS = 1_000_000, 100
SMOKE_ROWS, SMOKE_SHARDS = 3_000, 4
LOOKUP_ROWS, SMOKE_LOOKUP_ROWS = 10**4, 10**2
EVERY = 1000  # a checkpoint per shard after this many of its rows
LIMIT_S, LIMIT_MB = 30.0, 1536.0  # issue 36: a million rows under 30 s and 1.5 GB


def write_history(folder: Path, rows: int, shards: int) -> tuple[Path, Path, int]:
    """The two CSV files, written row by row; returns their paths and the checkpoint count."""
    status, ckpt = folder / "status.csv", folder / "checkpoints.csv"
    count = 0
    with status.open("w", newline="") as fs, ckpt.open("w", newline="") as fc:
        ws, wc = csv.writer(fs, lineterminator="\n"), csv.writer(fc, lineterminator="\n")
        ws.writerow(STATUS_COLUMNS)
        wc.writerow(CHECKPOINT_COLUMNS)
        for item in synthetic_log(rows, shards=shards, every=EVERY):
            if isinstance(item, StatusRow):
                ws.writerow((item.id, item.shard, item.status, item.at))
            else:
                wc.writerow((item.shard, item.start, item.end, item.at))
                count += 1
    return status, ckpt, count


def _peak_mb() -> float:
    """This process's peak resident MB; NaN where `resource` is missing (Windows)."""
    try:
        import resource
    except ImportError:
        return float("nan")
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1024 if sys.platform != "darwin" else kib / 2**20  # macOS counts bytes


def child(argv: list[str]) -> int:
    """In the child: run `python -m labkit audit ARGV...`, its stdout discarded, then print one
    JSON line on stderr: exit code, audit seconds (process start excluded), peak resident MB."""
    import contextlib
    import io

    from labkit.__main__ import main

    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as text:
        code = main(["audit", *argv])
    seconds = time.perf_counter() - start
    last = text.getvalue().strip().splitlines()[-1:] or [""]
    report = {"exit": code, "seconds": seconds, "peak_mb": _peak_mb(), "verdict": last[0]}
    print(json.dumps(report), file=sys.stderr)
    return 0


def audit_once(status: Path, ckpt: Path) -> dict[str, Any]:
    """Run the audit in a fresh child process: its report, and the wall time around it."""
    command = [sys.executable, "-m", "benchmarks.audit", "--child", "log", str(status)]
    start = time.perf_counter()
    done = subprocess.run(
        [*command, "--checkpoints", str(ckpt)], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    lines = done.stderr.strip().splitlines()
    try:
        report = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise RuntimeError(f"the audit child failed: {done.stderr.strip()[-500:]}") from None
    return {**report, "wall_s": wall}


def lookup_timing(rows: int, repeats: int, number: int) -> list[float]:
    """Samples of seconds per `delivered_frontier` call on one shard of `rows` rows, a few of
    them pending at the tail (frontier_lookup's "active" shape)."""
    from benchmarks import frontier_lookup as fl
    from labkit.frontier import log as fr

    conn = fl.build(rows)
    try:
        fl.set_shape(conn, rows, "active")
        timing = time_call(lambda: fr.delivered_frontier(conn, fl.SHARD, 0), repeats, number)
    finally:
        conn.close()
    return list(timing.samples)


def plot(rows: list[dict[str, object]]):
    """Seconds per status row audited against seconds per frontier lookup, and the audit's peak
    memory against the 1.5 GB bound (from the CSV's rows)."""
    from labkit.plots.style import COLORS, new_figure

    by = {str(r["kind"]): r for r in rows}
    audit, lookup = by["audit"], by["frontier_lookup"]
    fig = new_figure(7.5, 3.2, layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=(2, 1))
    per_row = float(audit["per_row_s"]) * 1e6
    per_lookup = float(lookup["per_call_s"]) * 1e6
    left.barh(
        [f"audit, one status row\n({int(audit['rows']):,} rows)", "frontier lookup, one call"],
        [per_row, per_lookup],
        color=[COLORS["frontier"], "0.55"],
    )
    left.set_xlabel("µs (audit: time in the audit / rows; lookup: median)")
    left.set_title(f"audit per row = {per_row / per_lookup:.2f}× one frontier lookup", fontsize=9)
    peak = float(audit["peak_mb"])
    right.bar(["peak"], [peak if math.isfinite(peak) else 0.0], color=COLORS["frontier"])
    right.axhline(LIMIT_MB, color="black", linestyle=":", label="1.5 GB bound")
    right.set_ylabel("resident MB")
    right.set_title(f"peak {peak:.0f} MB, {float(audit['wall_s']):.1f} s wall", fontsize=9)
    right.legend(loc="center right", fontsize=8)
    return fig


def run(smoke: bool = False, out: Path = FIGURES) -> BenchResult:
    """Generate the history, time the lookup, audit in a child, time the lookup again; print
    rows/s, peak memory and the ratio per row, write CSV and figure."""
    n, shards = (SMOKE_ROWS, SMOKE_SHARDS) if smoke else (ROWS, SHARDS)
    lookup_rows = SMOKE_LOOKUP_ROWS if smoke else LOOKUP_ROWS
    repeats, number = (3, 50) if smoke else (21, 500)
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        status, ckpt, checkpoints = write_history(Path(tmp), n, shards)
        size_mb = status.stat().st_size / 1e6
        samples = lookup_timing(lookup_rows, repeats, number)
        report = audit_once(status, ckpt)
        samples += lookup_timing(lookup_rows, repeats, number)
    seconds, wall = float(report["seconds"]), float(report["wall_s"])
    peak = float(report["peak_mb"])
    per_call = statistics.median(samples)
    rows: list[dict[str, object]] = [
        {
            "kind": "audit",
            "rows": n,
            "shards": shards,
            "checkpoints": checkpoints,
            "csv_mb": round(size_mb, 1),
            "exit": report["exit"],
            "seconds": round(seconds, 3),
            "wall_s": round(wall, 3),
            "rows_per_s": round(n / seconds),
            "per_row_s": seconds / n,
            "peak_mb": round(peak, 1),
            "per_call_s": "",
        },
        {
            "kind": "frontier_lookup",
            "rows": lookup_rows,
            "shards": 1,
            "checkpoints": "",
            "csv_mb": "",
            "exit": "",
            "seconds": "",
            "wall_s": "",
            "rows_per_s": "",
            "per_row_s": "",
            "peak_mb": "",
            "per_call_s": per_call,
        },
    ]
    print(
        f"  {n:,} status rows ({size_mb:.0f} MB CSV), {checkpoints:,} checkpoints, {shards} shards"
    )
    print_table(
        [
            {
                "audit s": f"{seconds:.2f}",
                "wall s": f"{wall:.2f}",
                "rows/s": f"{n / seconds:,.0f}",
                "per row": fmt_s(seconds / n),
                "peak MB": f"{peak:.0f}",
                "lookup": fmt_s(per_call),
            }
        ],
        ("audit s", "wall s", "rows/s", "per row", "peak MB", "lookup"),
    )
    print(f"  exit {report['exit']}: {report['verdict']}")
    ratios = {"audit per row / frontier lookup": seconds / n / per_call}
    targets = {
        "clean history exits 0": report["exit"] == 0,
        f"{n:,} rows under {LIMIT_S:.0f} s wall": wall < LIMIT_S,
        "peak under 1.5 GB": peak < LIMIT_MB,
    }
    return finish(NAME, rows, ratios, targets, plot(rows), out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m benchmarks.audit")
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--shards", type=int, default=SHARDS)
    opts = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        status, ckpt, checkpoints = write_history(Path(tmp), opts.rows, opts.shards)
        report = audit_once(status, ckpt)
    seconds = float(report["seconds"])
    print(f"{opts.rows:,} status rows, {checkpoints:,} checkpoints, {opts.shards} shards")
    print(
        f"audit log: {seconds:.1f} s ({float(report['wall_s']):.1f} s wall, process start "
        f"included), {opts.rows / seconds:,.0f} rows/s, peak resident {report['peak_mb']:.0f} MB"
    )
    print(f"exit {report['exit']}: {report['verdict']}")
    return 0 if report["exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
