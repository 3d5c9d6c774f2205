"""What an audit found, and its two renderings: plain text for people, JSON Lines for CI.

A `Finding` is one problem (an orphan, a chain gap, a fall ...); a `Report` holds the findings
and the `summary` (measurements that are not findings: each checkpoint's lag, each observer's
number of reads). Text puts the most serious finding first; JSON is one object per finding, then
one object with `"kind": "summary"`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

# A time at or past this many seconds reads as a Unix time (2001 onwards) and prints as ISO-8601.
UNIX_FROM = 1e9

# Lower is more serious: lost rows and fallen heads first, then what makes them possible.
SEVERITY: dict[str, int] = {
    "orphan": 0,
    "fall": 0,
    "given_up_commit": 1,
    "double_commit": 1,
    "chain_gap": 1,
    "off_head_commit": 2,
    "overlap": 2,
}


def when(at: float) -> str:
    """A time for a message: ISO-8601 (UTC) for a Unix time, else the number as given."""
    if at >= UNIX_FROM:
        return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
    return f"{at:g}"


@dataclass(frozen=True)
class Finding:
    """One problem: its `kind`, where (`shard` and `id`, or `observer` and `ballot`), when
    (`at`), one sentence, and the rows of the input that show it (`window`)."""

    kind: str
    at: float
    message: str
    shard: str | None = None
    id: int | None = None
    observer: str | None = None
    ballot: str | None = None
    window: tuple[int, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    def sort_key(self) -> tuple[int, float, str, int]:
        """Most serious first, then in time order."""
        return (
            SEVERITY.get(self.kind, 9),
            self.at,
            self.shard or self.observer or "",
            self.id or 0,
        )

    def as_json(self) -> dict[str, Any]:
        """The JSON object: `kind`, the keys that apply, `message`, `window`, the details."""
        out: dict[str, Any] = {"kind": self.kind}
        for key in ("shard", "id", "observer", "ballot"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out["at"] = self.at
        out["message"] = self.message
        if self.window:
            out["window"] = list(self.window)
        out.update(self.details)
        return out


@dataclass(frozen=True)
class Report:
    """An audit's result: its findings (in any order) and its summary measurements."""

    audit: str
    findings: tuple[Finding, ...]
    summary: Mapping[str, Any]

    @property
    def clean(self) -> bool:
        return not self.findings

    @property
    def exit_code(self) -> int:
        """0 clean, 1 findings (2, bad input, never gets this far)."""
        return 0 if self.clean else 1

    def ordered(self) -> list[Finding]:
        return sorted(self.findings, key=Finding.sort_key)


def render_text(report: Report) -> str:
    """One line per finding, most serious first, then one verdict line."""
    lines = [f"{f.kind}: {f.message}" for f in report.ordered()]
    counts: dict[str, int] = {}
    for f in report.findings:
        counts[f.kind] = counts.get(f.kind, 0) + 1
    what = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no finding"
    lines.append(f"audit {report.audit}: {what} ({_measured(report.summary)})")
    return "\n".join(lines) + "\n"


def _measured(summary: Mapping[str, Any]) -> str:
    keys = (
        "status_rows",
        "checkpoints",
        "rule",
        "largest_lag",
        "furthest_ahead",
        "events",
        "reads",
        "fixture",
        "orders",
        "rewinding",
    )
    said = [f"{k} {summary[k]}" for k in keys if k in summary]
    if "service" in summary:  # `audit loop --service`: the real run's falls over its reads
        run = summary["service"]
        said.append(f"on the service {run['falls']} falls in {run['reads']:,} reads")
    return ", ".join(said)


def render_json(report: Report) -> str:
    """JSON Lines: one object per finding, most serious first, then the summary object."""
    objs = [f.as_json() for f in report.ordered()]
    objs.append({"kind": "summary", "audit": report.audit, **report.summary})
    return "".join(json.dumps(o, sort_keys=False) + "\n" for o in objs)
