"""Part two's audit on a reader's own catalog event log: every fall an observer saw, counted
against that observer's reads, and the commits that let a head fall.

Events are read once, in time order. A `head` row is an observer's read of the head; a
`commit` row says ballot `ballot` committed `version` built on `base`. The catalog's head is
the largest committed version so far. Each commit gets at most one finding, the most specific:
a commit for a ballot already given up, else a version committed twice, else a commit not
built on the head before it. Each finding carries its window: the input rows from the event
that set it up to the event that shows it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from labkit.audit.findings import Finding, Report, when
from labkit.audit.inputs import InputError, Source, cell_int, cell_text, cell_time, read_rows

EVENT_COLUMNS = ("at", "event", "ballot", "version", "base", "observer")
EVENTS = ("reserve", "request", "response", "commit", "reject", "abandon", "head")
# Only the loop's own give-up ends a ballot for the audit. A `reject` does not: the log does not
# say why an answer was refused, and some refusals (a stale base) leave the ballot in flight, its
# real answer free to commit later (the glossary's *Leaving flight*).
GIVE_UP = ("abandon",)
RECENT = 256  # events kept to print a window; a longer window is given by its two ends


@dataclass(frozen=True)
class Event:
    """One row of the event log (`row` = its line in the input)."""

    at: float
    event: str
    ballot: str = ""
    version: int | None = None
    base: int | None = None
    observer: str = ""
    row: int = 0

    def __str__(self) -> str:
        parts = [f"row {self.row}", f"at {when(self.at)}", self.event]
        if self.ballot:
            parts.append(f"ballot {self.ballot}")
        if self.observer:
            parts.append(f"observer {self.observer}")
        if self.version is not None:
            parts.append(f"version {self.version}")
        if self.base is not None:
            parts.append(f"base {self.base}")
        return " ".join(parts)


class CatalogAudit:
    """Feed it events in time order (`event`), then read `report()`."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.reads: dict[str, int] = {}
        self.falls: dict[str, int] = {}
        self.last_read: dict[str, Event] = {}
        self.committed: dict[int, Event] = {}  # version -> the commit that made it
        self.given_up: dict[str, Event] = {}  # ballot -> its abandon
        self.head: Event | None = None  # the commit of the largest version so far
        self.events = 0
        self.recent: deque[Event] = deque(maxlen=RECENT)
        self._pending_falls: list[tuple[Event, Event]] = []

    def window(self, first: Event, last: Event) -> tuple[int, ...]:
        """The input rows from `first` to `last`: all of them when still held, else the ends."""
        rows = tuple(e.row for e in self.recent if first.row <= e.row <= last.row)
        return rows if rows and rows[0] == first.row else (first.row, last.row)

    def event(self, e: Event) -> None:
        """One event."""
        self.events += 1
        self.recent.append(e)
        if e.event == "head":
            self._read(e)
        elif e.event in GIVE_UP:
            self.given_up.setdefault(e.ballot, e)
        elif e.event == "commit":
            self._commit(e)

    def _read(self, e: Event) -> None:
        self.reads[e.observer] = self.reads.get(e.observer, 0) + 1
        before = self.last_read.get(e.observer)
        self.last_read[e.observer] = e
        if before is not None and e.version is not None and before.version is not None:
            if e.version < before.version:
                self.falls[e.observer] = self.falls.get(e.observer, 0) + 1
                self._pending_falls.append((before, e))

    def _commit(self, e: Event) -> None:
        assert e.version is not None
        quit_at = self.given_up.get(e.ballot)
        twice = self.committed.get(e.version)
        head = self.head
        if quit_at is not None:
            self._add(
                "given_up_commit",
                quit_at,
                e,
                f"ballot {e.ballot} committed version {e.version} at {when(e.at)} after it was "
                f"given up ({quit_at.event} at {when(quit_at.at)})",
            )
        elif twice is not None:
            self._add(
                "double_commit",
                twice,
                e,
                f"version {e.version} committed twice: by ballot {twice.ballot} at "
                f"{when(twice.at)} and by ballot {e.ballot} at {when(e.at)}",
            )
        elif head is not None and e.base != head.version:
            self._add(
                "off_head_commit",
                head,
                e,
                f"ballot {e.ballot} committed version {e.version} on base {e.base} at "
                f"{when(e.at)}, but the highest commit was {head.version} (ballot {head.ballot})",
            )
        self.committed.setdefault(e.version, e)
        if head is None or (head.version is not None and e.version > head.version):
            self.head = e

    def _add(self, kind: str, first: Event, last: Event, message: str) -> None:
        self.findings.append(
            Finding(
                kind,
                last.at,
                message,
                ballot=last.ballot,
                window=self.window(first, last),
                details={"version": last.version, "base": last.base},
            )
        )

    def report(self) -> Report:
        """The findings (each fall against its observer's reads) and the summary."""
        findings = list(self.findings)
        seen: dict[str, int] = {}
        for before, after in self._pending_falls:
            obs = after.observer
            seen[obs] = seen.get(obs, 0) + 1
            maker = self.committed.get(after.version) if after.version is not None else None
            findings.append(
                Finding(
                    "fall",
                    after.at,
                    f"observer {obs} read head {after.version} at {when(after.at)} after "
                    f"{before.version} at {when(before.at)} (fall {seen[obs]} of "
                    f"{self.falls[obs]}, in {self.reads[obs]} reads)",
                    observer=obs,
                    ballot=maker.ballot if maker else None,
                    window=self.window(before, after),
                    details={
                        "from": before.version,
                        "to": after.version,
                        "reads": self.reads[obs],
                        "falls": self.falls[obs],
                    },
                )
            )
        summary = {
            "events": self.events,
            "reads": sum(self.reads.values()),
            "observers": {
                o: {"reads": n, "falls": self.falls.get(o, 0)}
                for o, n in sorted(self.reads.items())
            },
            "commits": len(self.committed),
            "head": self.head.version if self.head else None,
        }
        return Report("catalog", tuple(findings), summary)


def parse_events(rows: Iterable[tuple[int, dict[str, Any]]], path: str) -> Iterator[Event]:
    """`Event`s from `read_rows` output: a known event, the cells it needs, in time order."""
    last: float | None = None
    for n, r in rows:
        at = cell_time(path, n, "at", r["at"])
        if last is not None and at < last:
            raise InputError(
                path,
                n,
                "at",
                f"{when(at)} is earlier than the row before ({when(last)}): sort by time",
            )
        last = at
        kind = cell_text(path, n, "event", r["event"])
        if kind not in EVENTS:
            raise InputError(
                path, n, "event", f"unknown event {kind!r}; one of {', '.join(EVENTS)}"
            )
        needs_ballot = kind != "head"
        yield Event(
            at,
            kind,
            ballot=cell_text(path, n, "ballot", r["ballot"], optional=not needs_ballot),
            version=cell_int(
                path, n, "version", r["version"], optional=kind not in ("commit", "head")
            ),
            base=cell_int(path, n, "base", r["base"], optional=kind != "commit"),
            observer=cell_text(path, n, "observer", r["observer"], optional=kind != "head"),
            row=n,
        )


def audit_events(events: Iterable[Event]) -> Report:
    """Audit events already parsed, in time order."""
    audit = CatalogAudit()
    for e in events:
        audit.event(e)
    return audit.report()


def audit_catalog(source: Source, *, mapping: Mapping[str, str] | None = None) -> Report:
    """Audit a reader's event log, streamed once. Raises `InputError` on the first bad row."""
    rows = read_rows(source, EVENT_COLUMNS, mapping, order_by="at")
    return audit_events(parse_events(rows, str(source.path)))
