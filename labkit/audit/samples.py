"""The audit's sample files (data/audit/): clean and broken twins, made from a seed.

Part one's files come from a workbook run (`labkit.frontier.scenarios.run_scenario`): one
shard's status changes, and its checkpoints under the frontier rule (clean) or under
`MAX(delivered)` (broken: a priority jump orphans the rows it passed), beside a second shard
written here with a commit-order gap and a chain gap planted. Part two's file is a catalog event
log with ballots and two observers, its broken twin with a fall, a double commit, a commit on
a stale base and a commit for an abandoned ballot planted. `python -m labkit.audit.samples DIR`
writes them.
"""

from __future__ import annotations

import csv
import io
import json
import random
import sys
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

import labkit.frontier.rule as rule
from labkit.audit.log import CHECKPOINT_COLUMNS, STATUS_COLUMNS, Checkpoint, StatusRow
from labkit.designs.arrival_orders import _Runner
from labkit.designs.design import Request
from labkit.designs.schedule_builder import PRESETS
from labkit.designs.schedules import Kind, Step, as_steps
from labkit.files import replace_file
from labkit.frontier.scenarios import (
    POLICY_COLUMNS,
    dispatch_order,
    run_scenario,
    scenario_from_order,
)

SEED = 10
ROWS = 8
CATALOG_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
Row = dict[str, Any]


def jump_priorities(n: int = ROWS, seed: int = SEED) -> list[int]:
    """Priorities where one row, chosen by `seed` among the later ones, jumps the queue."""
    rng = random.Random(seed)
    priorities = [5] * n
    priorities[rng.randrange(2, n)] = 1
    return priorities


def workbook_run(shard: str = "eu", n: int = ROWS, seed: int = SEED) -> pd.DataFrame:
    """Part one's run: rows dispatched `ORDER BY priority, id` with a jump, summarized after
    each delivery under both rules (`run_scenario`'s timeline)."""
    priorities = jump_priorities(n, seed)
    return run_scenario(scenario_from_order(priorities, dispatch_order(priorities), shard=shard))


def export_run(timeline: pd.DataFrame, policy: str) -> tuple[list[Row], list[Row]]:
    """A timeline as the audit's two files: each status change as a status row, and each
    move of `policy`'s coverage as a checkpoint row, both at the step's number."""
    coverage = POLICY_COLUMNS[policy].coverage
    statuses: list[Row] = []
    checkpoints: list[Row] = []
    seen: dict[tuple[str, int], str] = {}
    covered: dict[str, int] = {}
    for rec in timeline.to_dict("records"):
        step, shard = int(rec["step"]), str(rec["shard"])
        for row_id, status in sorted(rec["statuses"].items()):
            if seen.get((shard, row_id)) != status:
                seen[shard, row_id] = status
                statuses.append({"id": row_id, "shard": shard, "status": status, "at": step})
        end = int(rec[coverage])
        if end != covered.get(shard, 0):
            checkpoints.append(
                {"shard": shard, "start": covered.get(shard, 0), "end": end, "at": step}
            )
            covered[shard] = end
    return statuses, checkpoints


def _number(at: float) -> float | int:
    """A time as the file shows it: whole seconds without a decimal point."""
    return int(at) if float(at).is_integer() else at


def planted_shard(broken: bool, shard: str = "us", t0: int = 100) -> tuple[list[Row], list[Row]]:
    """A second shard, ids 101..107. Broken: id 104 commits after 105 and is first seen after
    a checkpoint covered (0, 105] (the commit-order gap), and the next checkpoint starts at
    106, so id 106 is never covered (a chain gap). Clean: 104 seen with the others, the chain
    whole."""
    s: list[Row] = []

    def status(row_id: int, state: str, at: float) -> None:
        s.append({"id": row_id, "shard": shard, "status": state, "at": _number(t0 + at)})

    for i in (101, 102, 103) + (() if broken else (104,)):
        status(i, "pending", 1)
    for k, i in enumerate((101, 102, 103)):
        status(i, "delivered", 2 + k)
    if not broken:
        status(104, "delivered", 4.2)
    status(105, "delivered", 4.5)
    checkpoints: list[Row] = [{"shard": shard, "start": 0, "end": 105, "at": _number(t0 + 5)}]
    if broken:
        status(104, "pending", 5.5)
        status(104, "delivered", 6)
    status(106, "pending", 7)
    status(107, "pending", 7)
    status(106, "delivered", 8)
    status(107, "delivered", 8.5)
    second: Row = {
        "shard": shard,
        "start": 106 if broken else 105,
        "end": 107,
        "at": _number(t0 + 9),
    }
    checkpoints.append(second)
    return s, checkpoints


def log_files(broken: bool, seed: int = SEED) -> tuple[list[Row], list[Row]]:
    """Part one's twin: the workbook run under MAX (broken) or the frontier rule (clean), then
    the planted shard."""
    statuses, checkpoints = export_run(workbook_run(seed=seed), "max" if broken else "frontier")
    more_s, more_c = planted_shard(broken)
    return statuses + more_s, checkpoints + more_c


def catalog_events(broken: bool, seed: int = SEED, ballots: int = 8) -> list[Row]:
    """Part two's twin: ballots reserve, request, get a response and commit the next version on
    the head; observers r1 and r2 read the head after commits. Broken adds a stale read by r2
    (a fall), a retried commit of the same version, a commit on a stale base and a commit by
    a ballot it had abandoned."""
    rng = random.Random(seed)
    events: list[Row] = []
    clock = [0.0]

    def add(event: str, **cells: Any) -> None:
        clock[0] += rng.choice((0.5, 1.0, 1.5))
        at = (CATALOG_START + timedelta(seconds=clock[0])).isoformat().replace("+00:00", "Z")
        events.append({"at": at, "event": event, **cells})  # a cell that does not apply is left out

    head = 0
    plants = {2: "fall", 4: "double", 5: "stale", 6: "abandoned"} if broken else {}
    for k in range(1, ballots + 1):
        ballot = f"b{k}"
        plant = plants.get(k)
        add("reserve", ballot=ballot, version=head + 1)
        add("request", ballot=ballot)
        add("response", ballot=ballot)
        if plant == "abandoned":
            add("abandon", ballot=ballot)
        base = head - 1 if plant == "stale" else head
        add("commit", ballot=ballot, version=head + 1, base=base)
        head += 1
        if plant == "double":
            add("commit", ballot=f"{ballot}-retry", version=head, base=head - 1)
        for observer in ("r1", "r2"):
            if rng.random() < 0.8:
                add("head", observer=observer, version=head)
        add("head", observer="r2", version=head)
        if plant == "fall":
            add("head", observer="r2", version=head - 1)
    return events


def synthetic_log(
    rows: int, shards: int = 100, seed: int = SEED, every: int = 100, window: int = 8
) -> Iterator[StatusRow | Checkpoint]:
    """A long, clean history made on the fly (never held whole): `rows` status rows over
    `shards`, each row pending then delivered out of order within `window` open rows of its
    shard, and a frontier-rule checkpoint of a shard after each `every` of its rows."""
    rng = random.Random(seed)
    next_id = [1] * shards
    open_ids: list[list[int]] = [[] for _ in range(shards)]
    ends = [0] * shards
    counts = [0] * shards
    for n in range(rows):
        k = rng.randrange(shards)
        key, ids = f"s{k:03d}", open_ids[k]
        if ids and (len(ids) >= window or rng.random() < 0.5):
            row_id, status = ids.pop(rng.randrange(len(ids))), "delivered"
        else:
            row_id, status = next_id[k], "pending"
            next_id[k] += 1
            ids.append(row_id)
        yield StatusRow(row_id, key, status, float(n), n + 1)
        counts[k] += 1
        if counts[k] % every == 0:
            base = ends[k]
            end = rule.frontier(base, ((i, i in ids) for i in range(base + 1, next_id[k])))
            if end > base:
                yield Checkpoint(key, base, end, float(n), counts[k] // every)
                ends[k] = end


def _csv_text(rows: Sequence[Row], columns: Sequence[str]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _jsonl_text(rows: Iterable[Row]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def sample_texts(seed: int = SEED) -> dict[str, str]:
    """Every sample file's name and text."""
    texts: dict[str, str] = {}
    for name, broken in (("clean", False), ("broken", True)):
        statuses, checkpoints = log_files(broken, seed)
        statuses.sort(key=lambda r: r["at"])  # stable: the two shards interleave by time
        texts[f"log_{name}_status.csv"] = _csv_text(statuses, STATUS_COLUMNS)
        texts[f"log_{name}_checkpoints.csv"] = _csv_text(checkpoints, CHECKPOINT_COLUMNS)
        texts[f"catalog_{name}.jsonl"] = _jsonl_text(catalog_events(broken, seed))
    return texts


def write_samples(folder: Path, seed: int = SEED) -> list[Path]:
    """Write the sample files into `folder` (each by write-beside-and-rename)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in sample_texts(seed).items():
        replace_file(folder / name, text)
        paths.append(folder / name)
    return paths


def _ballot(req: Request) -> str:
    """A request's ballot as the event log names it; a design without ballots names the call."""
    return f"b{req.ballot_id}" if req.ballot_id is not None else f"call{req.request_id}"


def export_design(
    design: str,
    steps: Sequence[Step | str] = PRESETS["inverted"].steps,
    *,
    window: int = 2,
    observer: str = "r1",
) -> list[Row]:
    """Part two's run as the audit's event log: `design` played through `steps` (default:
    Article 2's late tick), each send a reserve (ballot designs) and a request, each delivery a
    response then a commit or a reject, each time-out an abandon (ballot designs), and after
    every step `observer`'s read of the head. `at` counts the events."""
    events: list[Row] = []

    def add(event: str, **cells: Any) -> None:
        events.append({"at": len(events) + 1, "event": event, **cells})

    def sent(reqs: Iterable[Request]) -> None:
        for req in reqs:
            if req.ballot_id is not None:
                add("reserve", ballot=_ballot(req), version=req.base_version + 1)
            add("request", ballot=_ballot(req))

    runner = _Runner(design, window=window, ticks=1000, first_request=1, skews=None)
    sent(runner.sent.values())
    for step in as_steps(steps):
        before = set(runner.sent)
        if step.kind == Kind.TIMEOUT:
            awaited = runner.d.awaited()
            pick = [r for r in awaited if step.request in (None, r.request_id)][:1]
        runner.step(step)
        out = runner.result.outcomes[-1]
        if step.kind == Kind.TIMEOUT:
            for req in pick:
                if req.ballot_id is not None:
                    add("abandon", ballot=_ballot(req))
        elif out.request_id is not None:
            req = runner.sent[out.request_id]
            add("response", ballot=_ballot(req))
            if out.committed:
                add("commit", ballot=_ballot(req), version=out.head, base=req.base_version)
            else:
                add("reject", ballot=_ballot(req))
        sent(runner.sent[k] for k in sorted(set(runner.sent) - before))
        add("head", observer=observer, version=out.head)
    return events


def write_csv(path: Path, rows: Sequence[Row], columns: Sequence[str]) -> Path:
    """`rows` as CSV with a header of `columns` (a cell left out is empty), by replace."""
    replace_file(path, _csv_text(rows, columns))
    return path


def write_jsonl(path: Path, rows: Iterable[Row]) -> Path:
    """`rows` as JSON Lines, one object a line, by replace."""
    replace_file(path, _jsonl_text(rows))
    return path


def export_workbook_runs(folder: Path, seed: int = SEED) -> dict[str, Path]:
    """The workbook's own runs as files a team would export: part one's run under MAX and under
    the frontier rule (status and checkpoint CSVs), part two's `callback` and `ballot` designs
    through Article 2's late tick (JSON Lines event logs). Name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    run = workbook_run(seed=seed)
    paths: dict[str, Path] = {}
    for policy in reversed(rule.POLICIES):  # max, then frontier
        statuses, checkpoints = export_run(run, policy)
        paths[f"{policy}_status"] = write_csv(
            folder / f"{policy}_status.csv", statuses, STATUS_COLUMNS
        )
        paths[f"{policy}_checkpoints"] = write_csv(
            folder / f"{policy}_checkpoints.csv", checkpoints, CHECKPOINT_COLUMNS
        )
    for design in ("callback", "ballot"):
        paths[design] = write_jsonl(folder / f"{design}_events.jsonl", export_design(design))
    return paths


if __name__ == "__main__":
    for path in write_samples(Path(sys.argv[1] if len(sys.argv) > 1 else "data/audit")):
        print(path)
