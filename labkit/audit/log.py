"""Part one's audit on a reader's own message log: orphans, chain gaps and overlaps, and how far
each checkpoint sits from the true gap-free frontier.

The status rows and the checkpoints are read once each, in time order, merged (a status row
at the same time as a checkpoint counts as before it). Per shard only the open rows and a few
counters are kept, so memory grows with the rows open at once, never with the history. A row
that is terminal stays terminal (as in the workbook: a redrive is a new row), so a row for an
id that is not open is that id's first sighting.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import labkit.frontier.rule as rule
from labkit.audit.findings import Finding, Report, when
from labkit.audit.inputs import InputError, Source, cell_int, cell_text, cell_time, read_rows
from labkit.validation import INT64_MAX, INT64_MIN

STATUS_COLUMNS = ("id", "shard", "status", "at")
CHECKPOINT_COLUMNS = ("shard", "start", "end", "at")
DEFAULT_TERMINAL = ("delivered", "failed", "cancelled")
KNOWN_OPEN = ("pending", "running")
DELIVERED = "delivered"
MAX_UNKNOWN_NAMED = 20
LAGS_KEPT = 10_000  # checkpoints whose lag the summary lists; the counts cover every one


class StatusRow(NamedTuple):
    """Row `id` of `shard` entered `status` at time `at` (`row` = its line in the input); a
    named tuple, the cheapest record to make a million of."""

    id: int
    shard: str
    status: str
    at: float
    row: int = 0


class Checkpoint(NamedTuple):
    """At time `at` a summarizer covered the ids in (start, end] of `shard`."""

    shard: str
    start: int
    end: int
    at: float
    row: int = 0


@dataclass
class _Shard:
    """One shard's running state: its open rows (id -> status) and counters."""

    open: dict[int, str] = field(default_factory=dict)
    heap: list[int] = field(default_factory=list)  # the open ids; stale entries dropped lazily
    max_seen: int | None = None
    min_seen: int | None = None
    checkpoints: int = 0
    max_delivered: int = 0
    chain_end: int = 0
    covered_end: int = 0
    gaps: list[tuple[int, int]] = field(default_factory=list)  # (lo, hi]: never covered

    def lowest_open(self) -> int | None:
        while self.heap and self.heap[0] not in self.open:
            heapq.heappop(self.heap)
        return self.heap[0] if self.heap else None

    def add_open(self, row_id: int, status: str) -> None:
        self.open[row_id] = status
        heapq.heappush(self.heap, row_id)
        if len(self.heap) > 2 * len(self.open) + 64:  # keep the heap bounded by the open set
            self.heap = list(self.open)
            heapq.heapify(self.heap)

    def rows_for_rule(self) -> Iterator[tuple[int, bool]]:
        """The rows above 0 the rule reads, as `(id, still_open)` in id order: the lowest open
        row if there is one (the rule stops there), else the last row. The terminal rows in
        between change nothing the rule returns, so they are not kept."""
        low = self.lowest_open()
        if low is not None:
            yield low, True
        elif self.max_seen is not None:
            yield self.max_seen, False

    def frontier(self) -> int:
        """The true gap-free frontier over the rows seen so far (`labkit.frontier.rule`)."""
        return rule.frontier(0, self.rows_for_rule())

    def covered(self, row_id: int) -> bool:
        """Whether a checkpoint of this shard has covered `row_id` already."""
        return 0 < row_id <= self.covered_end and not any(lo < row_id <= hi for lo, hi in self.gaps)


class LogAudit:
    """Feed it status rows and checkpoints in time order (`status`, `checkpoint`), then read
    `report()`. `audit_log` does the merging from files."""

    def __init__(
        self, terminal: Sequence[str] = DEFAULT_TERMINAL, delivered: str = DELIVERED
    ) -> None:
        self.terminal = frozenset(terminal)
        self.delivered = delivered
        self.shards: dict[str, _Shard] = {}
        self.findings: list[Finding] = []
        self.lags: list[dict[str, Any]] = []  # the first LAGS_KEPT checkpoints, one each
        self.checkpoints = self.on_frontier = self.on_max = 0
        self.largest_lag = self.furthest_ahead = 0  # behind the frontier / past it, in ids
        self.status_rows = 0
        self.peak_open = 0
        self.open_now = 0
        self.unknown: set[str] = set()
        self._orphaned: set[tuple[str, int]] = set()

    def _shard(self, key: str) -> _Shard:
        state = self.shards.get(key)
        if state is None:
            state = self.shards[key] = _Shard()
        return state

    def frontier(self, shard: str) -> int:
        """The true gap-free frontier of `shard` over the rows fed so far (0 for no row)."""
        state = self.shards.get(shard)
        return state.frontier() if state else 0

    def status(self, r: StatusRow) -> None:
        """One status transition."""
        self.status_rows += 1
        s = self._shard(r.shard)
        terminal = r.status in self.terminal
        if not terminal and r.status not in KNOWN_OPEN and len(self.unknown) < MAX_UNKNOWN_NAMED:
            self.unknown.add(r.status)
        if r.id in s.open:
            if terminal:
                del s.open[r.id]
                self.open_now -= 1
            else:
                s.open[r.id] = r.status
        else:  # the id's first sighting
            if s.covered(r.id) and (r.shard, r.id) not in self._orphaned:
                self._orphaned.add((r.shard, r.id))
                self.findings.append(
                    Finding(
                        "orphan",
                        r.at,
                        f"shard {r.shard} id {r.id}: first seen ({r.status}) at {when(r.at)}, "
                        f"after a checkpoint had covered it (coverage reached {s.covered_end}): "
                        "the commit-order gap",
                        shard=r.shard,
                        id=r.id,
                        details={
                            "cause": "before_first_seen",
                            "status": r.status,
                            "status_row": r.row,
                        },
                    )
                )
            s.max_seen = r.id if s.max_seen is None else max(s.max_seen, r.id)
            s.min_seen = r.id if s.min_seen is None else min(s.min_seen, r.id)
            if not terminal:
                s.add_open(r.id, r.status)
                self.open_now += 1
                self.peak_open = max(self.peak_open, self.open_now)
        if terminal and r.status == self.delivered:
            s.max_delivered = max(s.max_delivered, r.id)

    def checkpoint(self, c: Checkpoint) -> None:
        """One checkpoint: its chain link, the open rows it covered, its lag."""
        s = self._shard(c.shard)
        prev = s.chain_end
        s.checkpoints += 1
        if c.start > prev and s.checkpoints == 1 and (s.min_seen is None or s.min_seen > c.start):
            s.gaps.append((prev, c.start))  # the chain starts here: no row below it seen yet
        elif c.start > prev:
            s.gaps.append((prev, c.start))
            self.findings.append(
                Finding(
                    "chain_gap",
                    c.at,
                    f"shard {c.shard}: no checkpoint covers ids ({prev}, {c.start}]; the first "
                    f"uncovered id is {prev + 1} (checkpoint at {when(c.at)} starts at {c.start})",
                    shard=c.shard,
                    id=prev + 1,
                    details={"start": prev, "end": c.start, "checkpoint_row": c.row},
                )
            )
        elif c.start < prev:
            self.findings.append(
                Finding(
                    "overlap",
                    c.at,
                    f"shard {c.shard}: checkpoint at {when(c.at)} covers ({c.start}, {c.end}], "
                    f"ids ({c.start}, {min(prev, c.end)}] again",
                    shard=c.shard,
                    id=c.start + 1,
                    details={
                        "start": c.start,
                        "end": min(prev, c.end),
                        "checkpoint_row": c.row,
                    },
                )
            )
        for row_id in sorted(i for i in s.open if c.start < i <= c.end):
            if (c.shard, row_id) in self._orphaned:
                continue
            self._orphaned.add((c.shard, row_id))
            self.findings.append(
                Finding(
                    "orphan",
                    c.at,
                    f"shard {c.shard} id {row_id}: covered at {when(c.at)} by ({c.start}, {c.end}] "
                    f"while {s.open[row_id]}",
                    shard=c.shard,
                    id=row_id,
                    details={
                        "cause": "covered_while_open",
                        "status": s.open[row_id],
                        "checkpoint_row": c.row,
                    },
                )
            )
        true_end = s.frontier()
        max_end = max(prev, s.max_delivered)
        self.checkpoints += 1
        self.on_frontier += true_end == c.end
        self.on_max += max_end == c.end
        self.largest_lag = max(self.largest_lag, true_end - c.end)
        self.furthest_ahead = max(self.furthest_ahead, c.end - true_end)
        if len(self.lags) >= LAGS_KEPT:
            return self._link(s, prev, c)
        self.lags.append(
            {
                "shard": c.shard,
                "at": c.at,
                "start": c.start,
                "end": c.end,
                "frontier": true_end,
                "lag": true_end - c.end,
                "max_rule_end": max_end,
                "max_rule_would_cover_open": sum(1 for i in s.open if prev < i <= max_end),
            }
        )
        self._link(s, prev, c)

    @staticmethod
    def _link(s: _Shard, prev: int, c: Checkpoint) -> None:
        s.chain_end = max(prev, c.end)
        s.covered_end = max(s.covered_end, c.end)

    def report(self) -> Report:
        """The findings and the summary: counts, the rule the checkpoints follow, each lag."""
        on_frontier, on_max, n = self.on_frontier, self.on_max, self.checkpoints
        followed = (
            "none (no checkpoint)"
            if not n
            else "frontier"
            if on_frontier == n
            else "max"
            if on_max == n
            else "neither"
        )
        summary = {
            "status_rows": self.status_rows,
            "checkpoints": n,
            "shards": len(self.shards),
            "rule": followed,
            "checkpoints_on_frontier": on_frontier,
            "checkpoints_on_max": on_max,
            "largest_lag": self.largest_lag,
            "furthest_ahead": self.furthest_ahead,
            "peak_open_rows": self.peak_open,
            "unknown_statuses": sorted(self.unknown),
            "frontier": {k: s.frontier() for k, s in sorted(self.shards.items())},
            "lags": self.lags,
            "lags_left_out": n - len(self.lags),
        }
        return Report("log", tuple(self.findings), summary)


def audit_rows(
    status_rows: Iterable[StatusRow],
    checkpoints: Iterable[Checkpoint],
    terminal: Sequence[str] = DEFAULT_TERMINAL,
    delivered: str = DELIVERED,
) -> Report:
    """Audit rows already parsed (each sequence in time order): the merge `audit_log` runs."""
    audit = LogAudit(terminal, delivered)
    statuses = iter(status_rows)
    pending = next(statuses, None)
    for c in checkpoints:
        while pending is not None and pending.at <= c.at:
            audit.status(pending)
            pending = next(statuses, None)
        audit.checkpoint(c)
    while pending is not None:
        audit.status(pending)
        pending = next(statuses, None)
    return audit.report()


def _in_time_order(rows: Iterator[Any], path: str) -> Iterator[Any]:
    last = None
    for r in rows:
        if last is not None and r.at < last:
            raise InputError(
                path,
                r.row,
                "at",
                f"{when(r.at)} is earlier than the row before ({when(last)}): sort by time",
            )
        last = r.at
        yield r


def _status_row(path: str, n: int, r: dict[str, Any]) -> StatusRow:
    """One status row, each cell checked (`InputError` naming the first bad one)."""
    return StatusRow(
        cell_int(path, n, "id", r["id"]) or 0,
        cell_text(path, n, "shard", r["shard"]),
        cell_text(path, n, "status", r["status"]),
        cell_time(path, n, "at", r["at"]),
        n,
    )


def parse_status(rows: Iterable[tuple[int, dict[str, Any]]], path: str) -> Iterator[StatusRow]:
    """`StatusRow`s from `read_rows` output, refusing a bad cell or a row out of time order.

    A row of plain text cells that all read at once takes a fast path; any other row (a JSON
    number, an empty or bad cell) goes through the cell checks, which name what is wrong."""
    last = -math.inf
    for n, r in rows:
        row_id, shard, status, at = r["id"], r["shard"], r["status"], r["at"]
        try:
            if type(row_id) is not str or type(at) is not str:
                raise TypeError
            one = StatusRow(int(row_id), shard.strip(), status.strip(), float(at), n)
            if not (one.shard and one.status and INT64_MIN <= one.id <= INT64_MAX):
                raise ValueError
            if not math.isfinite(one.at):
                raise ValueError
        except (TypeError, ValueError, AttributeError):
            one = _status_row(path, n, r)
        if one.at < last:
            raise InputError(
                path,
                n,
                "at",
                f"{when(one.at)} is earlier than the row before ({when(last)}): sort by time",
            )
        last = one.at
        yield one


def parse_checkpoints(
    rows: Iterable[tuple[int, dict[str, Any]]], path: str
) -> Iterator[Checkpoint]:
    """`Checkpoint`s from `read_rows` output; `end` below `start` is a bad row."""

    def one(n: int, r: dict[str, Any]) -> Checkpoint:
        start = cell_int(path, n, "start", r["start"]) or 0
        end = cell_int(path, n, "end", r["end"]) or 0
        if end < start:
            raise InputError(path, n, "end", f"{end} is below start {start}")
        return Checkpoint(
            cell_text(path, n, "shard", r["shard"]),
            start,
            end,
            cell_time(path, n, "at", r["at"]),
            n,
        )

    return _in_time_order((one(n, r) for n, r in rows), path)


def audit_log(
    status: Source,
    checkpoints: Source,
    *,
    status_map: Mapping[str, str] | None = None,
    checkpoint_map: Mapping[str, str] | None = None,
    terminal: Sequence[str] = DEFAULT_TERMINAL,
    delivered: str = DELIVERED,
) -> Report:
    """Audit a reader's files: both streamed once, in time order (a SQLite table is read
    ordered by its time column). Raises `InputError` on the first bad row."""
    s_path, c_path = str(status.path), str(checkpoints.path)
    rows = parse_status(read_rows(status, STATUS_COLUMNS, status_map, order_by="at"), s_path)
    ckpts = parse_checkpoints(
        read_rows(checkpoints, CHECKPOINT_COLUMNS, checkpoint_map, order_by="at"), c_path
    )
    return audit_rows(rows, ckpts, terminal, delivered)
