"""The audit's figures (`python -m labkit audit ... --figure PATH`): what `labkit.audit` found,
drawn.

`log`: per shard, each checkpoint's end against the true gap-free frontier over time, orphans
and chain gaps marked. `catalog`: each observer's head over time, falls marked. `loop`: the
shortest falling schedule (or, when none falls, Article 2's fixture) as lanes, one per request,
and as a sequence diagram of loop, store, planner and reader, and after `--service` the head
the reader process read during the real run. Marks carry a gid (`orphan-...`,
`fall-...`), which an SVG keeps as the element's id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from labkit.audit.findings import UNIX_FROM, Report, when
from labkit.plots.style import COLORS, OKABE_ITO, RIGHT_LEGEND, new_figure, save_figure, styled

MAX_SHARDS = 6  # shards drawn by the log figure: those with findings first, then by name
# Observers' lines: hues the fall mark (vermillion) and the grey of a rejection do not use.
OBSERVER_COLORS = [OKABE_ITO[k] for k in ("blue", "bluish_green", "orange", "reddish_purple")]
PARTIES = ("loop", "store", "planner", "reader")
FALL_COLOR = COLORS["rewind"]


def _clock(times: Iterable[float]) -> tuple[float, str]:
    """The origin subtracted from Unix times (0 for plain numbers) and the axis label."""
    first = min(times, default=0.0)
    if first >= UNIX_FROM:
        return first, f"seconds after {when(first)}"
    return 0.0, "time (at)"


@styled
def log_figure(report: Report) -> Figure:
    """Per shard: checkpoint ends and the true frontier at each checkpoint, orphans (X) and the
    first uncovered id of each chain gap (triangle) marked."""
    lags: list[Mapping[str, Any]] = list(report.summary.get("lags", []))
    marked = [f for f in report.findings if f.shard is not None]
    flagged = sorted({f.shard for f in marked if f.shard is not None})
    rest = sorted({str(g["shard"]) for g in lags} - set(flagged))
    shards = (flagged + rest)[:MAX_SHARDS] or [""]
    origin, xlabel = _clock([float(g["at"]) for g in lags] + [f.at for f in marked])
    fig = new_figure(8.0, 1.2 + 1.9 * len(shards), layout="constrained")
    axes = fig.subplots(len(shards), 1, sharex=True, squeeze=False)[:, 0]
    for ax, shard in zip(axes, shards, strict=True):
        mine = [g for g in lags if str(g["shard"]) == shard]
        xs = [float(g["at"]) - origin for g in mine]
        ax.step(
            xs,
            [g["end"] for g in mine],
            where="post",
            color="#444444",
            marker="o",
            ms=4,
            label="checkpoint end",
        )
        ax.step(
            xs,
            [g["frontier"] for g in mine],
            where="post",
            color=COLORS["frontier"],
            ls="--",
            marker="s",
            ms=4,
            label="gap-free frontier",
        )
        for f in marked:
            if f.shard != shard or f.id is None:
                continue
            orphan = f.kind == "orphan"
            (mark,) = ax.plot(
                [f.at - origin],
                [f.id],
                ls="none",
                ms=9,
                marker="X" if orphan else "^",
                color=COLORS["orphan"] if orphan else COLORS["reject"],
                label=f.kind.replace("_", " "),
            )
            mark.set_gid(f"{f.kind}-{shard}-{f.id}")
        ax.set_ylabel(f"shard {shard}\nid")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        handles, labels = ax.get_legend_handles_labels()
        keep = dict(zip(labels, handles, strict=True))
        ax.legend(keep.values(), keep.keys(), **RIGHT_LEGEND)
    axes[-1].set_xlabel(xlabel)
    hidden = len(flagged) + len(rest) - len(shards)
    more = f" ({hidden} more shards not drawn)" if hidden > 0 else ""
    fig.suptitle(f"Checkpoints against the gap-free frontier{more}")
    return fig


@styled
def catalog_figure(report: Report, reads: Sequence[tuple[str, float, int]]) -> Figure:
    """Each observer's head reads over time, one line each; every fall a vermillion drop."""
    falls = [f for f in report.findings if f.kind == "fall"]
    observers = sorted({o for o, _, _ in reads} | {f.observer or "" for f in falls})
    origin, xlabel = _clock([at for _, at, _ in reads] + [f.at for f in falls])
    fig = new_figure(8.0, 4.0, layout="constrained")
    ax = fig.add_subplot()
    for k, obs in enumerate(observers):
        pts = [(at - origin, v) for o, at, v in reads if o == obs]
        if pts:
            xs, ys = zip(*pts, strict=True)
            color = OBSERVER_COLORS[k % len(OBSERVER_COLORS)]
            ax.step(xs, ys, where="post", color=color, label=f"observer {obs}", marker=".")
    for k, f in enumerate(falls):
        x = f.at - origin
        drop = ax.vlines(x, f.details["to"], f.details["from"], color=FALL_COLOR, lw=2.5)
        drop.set_gid(f"fall-{f.observer}-{k + 1}")
        ax.plot([x], [f.details["to"]], ls="none", marker="v", ms=9, color=FALL_COLOR, label="fall")
    handles, labels = ax.get_legend_handles_labels()
    keep = dict(zip(labels, handles, strict=True))
    ax.legend(keep.values(), keep.keys(), **RIGHT_LEGEND)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("head version read")
    n = len(falls)
    ax.set_title(f"Each observer's head: {n} fall{'s' if n != 1 else ''}")
    return fig


def loop_run(report: Report) -> tuple[str, dict[str, Any]]:
    """The run a loop figure draws: the shortest fall if there is one, else the fixture."""
    for f in report.findings:
        if f.kind == "fall" and "schedule" in f.details:  # not a fall seen on the service
            d = f.details
            return "shortest falling schedule", {
                "steps": d["schedule"],
                "outcomes": d["outcomes"],
                "heads": d["heads"],
                "sends": d["sends"],
            }
    s = report.summary
    return "inverted-arrival fixture (the head holds)", {
        "steps": s["fixture_schedule"],
        "outcomes": s["fixture_outcomes"],
        "heads": s["fixture_heads"],
        "sends": s["fixture_sends"],
    }


def _fall_at(heads: Sequence[int]) -> int | None:
    top = 0
    for i, h in enumerate(heads):
        if h < top:
            return i
        top = max(top, h)
    return None


def _step_request(step: str) -> int | None:
    word = step.split()[-1]
    return int(word) if word.isdigit() else None


def _draw_lanes(ax: Axes, run: Mapping[str, Any]) -> None:
    steps, outcomes, sends = run["steps"], run["outcomes"], run["sends"]
    sent_at = {r: i for i, batch in enumerate(sends) for r in batch}
    lanes = sorted(sent_at)
    y = {r: k for k, r in enumerate(lanes)}
    last = {r: sent_at[r] for r in lanes}
    for i, (step, out) in enumerate(zip(steps, outcomes, strict=True), start=1):
        rid = _step_request(out.split(":")[0]) if ":" in out else _step_request(out)
        if rid is None or rid not in y:
            continue
        last[rid] = i
        if step.startswith("timeout"):
            ax.plot([i], [y[rid]], ls="none", marker="|", ms=14, mew=2, color=COLORS["running"])
        elif out.endswith(":commit"):
            ax.plot([i], [y[rid]], ls="none", marker="o", ms=9, color=COLORS["ballot"])
        else:
            ax.plot([i], [y[rid]], ls="none", marker="x", ms=9, mew=2, color=COLORS["reject"])
        ax.annotate(
            out.split(":")[-1] if ":" in out else "timeout",
            (i, y[rid]),
            xytext=(0, 8),
            textcoords="offset points",
            ha="center",
            fontsize=8,
        )
    for r in lanes:
        ax.plot([sent_at[r], last[r]], [y[r], y[r]], color="#999999", lw=1.2, zorder=0)
        ax.plot([sent_at[r]], [y[r]], ls="none", marker="o", ms=5, mfc="white", color="#444444")
    fell = _fall_at(run["heads"])
    if fell is not None:
        band = ax.axvspan(fell + 0.6, fell + 1.4, color=FALL_COLOR, alpha=0.18, lw=0)
        band.set_gid("loop-fall-lane")
        before = max(run["heads"][:fell], default=0)
        ax.text(
            fell + 1,
            -0.6,  # the top of the lanes (request 1 is drawn on top)
            f"head falls\nv{before} → v{run['heads'][fell]}",
            ha="center",
            va="top",
            fontsize=9,
            color=FALL_COLOR,
        )
    ax.set_yticks(range(len(lanes)), [f"request {r}" for r in lanes])
    ax.set_xticks(range(len(steps) + 1), ["start", *steps], rotation=20, ha="right")
    ax.set_xlim(-0.5, len(steps) + 0.5)
    ax.set_ylim(max(len(lanes) - 0.3, 0.7), -0.7)  # request 1 on top, as the diagram reads
    ax.grid(False)
    heads = " → ".join(str(h) for h in run["heads"])
    ax.set_title(f"Lanes: one per request; head after each step {heads}", fontsize=10)


def _messages(run: Mapping[str, Any]) -> list[tuple[str, str, str, bool, bool]]:
    """(from, to, label, reply, fall) for each arrow of the sequence diagram, in order."""
    out: list[tuple[str, str, str, bool, bool]] = []

    def sent(batch: Sequence[int]) -> None:
        for r in batch:
            out.append(("loop", "store", f"reserve ballot for request {r}", False, False))
            out.append(("loop", "planner", f"request {r}: tick(ballot, fence, head)", False, False))

    sent(run["sends"][0])
    top = 0
    for i, (step, outcome) in enumerate(zip(run["steps"], run["outcomes"], strict=True)):
        head = run["heads"][i]
        if step.startswith("timeout"):
            out.append(("loop", "store", f"{outcome}: abandon its ballot", False, False))
        else:
            rid = outcome.split(":")[0]
            verdict = outcome.split(":")[1]
            out.append(("planner", "loop", f"answer to request {rid} (late or not)", True, False))
            what = f"apply: commit → v{head}" if verdict == "commit" else f"apply: {verdict}"
            out.append(("loop", "store", what, False, False))
        sent(run["sends"][i + 1])
        out.append(("reader", "store", "read head", False, False))
        fall = head < top
        label = f"head v{head}" + (f" (fell from v{top})" if fall else "")
        out.append(("store", "reader", label, True, fall))
        top = max(top, head)
    return out


def _draw_sequence(ax: Axes, run: Mapping[str, Any]) -> None:
    messages = _messages(run)
    x = {p: k for k, p in enumerate(PARTIES)}
    n = len(messages)
    for p, k in x.items():
        ax.plot([k, k], [0.4, n + 0.6], color="#999999", lw=1, zorder=0)
        ax.text(
            k,
            -0.1,
            p,
            ha="center",
            va="center",
            fontsize=10,
            fontweight="bold",
            bbox={"boxstyle": "round", "fc": "white", "ec": "#444444"},
        )
    for row, (src, dst, label, reply, fall) in enumerate(messages, start=1):
        color = FALL_COLOR if fall else "#222222"
        arrow = ax.annotate(
            "",
            xy=(x[dst], row),
            xytext=(x[src], row),
            arrowprops={
                "arrowstyle": "-|>",
                "color": color,
                "ls": "--" if reply else "-",
                "lw": 2.0 if fall else 1.0,
            },
        )
        if fall:
            if arrow.arrow_patch is not None:  # the drawn arrow carries the id into an SVG
                arrow.arrow_patch.set_gid("loop-fall")
        ax.text(
            (x[src] + x[dst]) / 2,
            row - 0.12,
            label,
            ha="center",
            va="bottom",
            fontsize=8,
            color=color,
        )
    ax.set_ylim(n + 1, -0.6)
    ax.set_xlim(-0.5, len(PARTIES) - 0.5)
    ax.axis("off")
    ax.set_title("Sequence: loop, store, planner and reader", fontsize=10)


def _draw_service(ax: Axes, run: Mapping[str, Any]) -> None:
    """`audit loop --service`: the head the reader process read over the run's seconds, every
    fall a vermillion drop."""
    xs, ys = [0.0], [run["first"]]
    for t, _, after in run["changes"]:
        xs.append(t)
        ys.append(after)
    ax.step(xs, ys, where="post", color=OBSERVER_COLORS[0], label="head the reader read")
    for k, (t, before, after) in enumerate(c for c in run["changes"] if c[2] < c[1]):
        drop = ax.vlines(t, after, before, color=FALL_COLOR, lw=2.5)
        drop.set_gid(f"fall-service-{k + 1}")
        ax.plot([t], [after], ls="none", marker="v", ms=9, color=FALL_COLOR, label="fall")
    handles, labels = ax.get_legend_handles_labels()
    keep = dict(zip(labels, handles, strict=True))
    ax.legend(keep.values(), keep.keys(), **RIGHT_LEGEND)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("seconds since the run started (real time)")
    ax.set_ylabel("head version")
    n = run["falls"]
    ax.set_title(
        f"On the service: {n} fall{'s' if n != 1 else ''} in {run['reads']:,} reads "
        "of the reader process",
        fontsize=10,
    )


@styled
def loop_figure(report: Report) -> Figure:
    """The schedule `loop_run` picks, drawn as lanes (left) and as a sequence diagram (right);
    under them, after `--service`, the head the reader process read during the real run."""
    what, run = loop_run(report)
    service = report.summary.get("service")
    height = max(4.0, 1.2 + 0.3 * len(_messages(run)))
    extra = 0.0 if service is None else 3.2
    fig = new_figure(13.0, height + extra, layout="constrained")
    grid = fig.add_gridspec(
        1 if service is None else 2,
        2,
        width_ratios=(2, 3),
        height_ratios=None if service is None else (height, extra),
    )
    _draw_lanes(fig.add_subplot(grid[0, 0]), run)
    _draw_sequence(fig.add_subplot(grid[0, 1]), run)
    if service is not None:
        _draw_service(fig.add_subplot(grid[1, :]), service)
    fig.suptitle(f"{report.summary.get('loop', 'your loop')}: {what}")
    return fig


def audit_figure(report: Report, reads: Sequence[tuple[str, float, int]] | None = None) -> Figure:
    """The figure of `report` (`log`, `catalog` with its head `reads`, or `loop`)."""
    if report.audit == "log":
        return log_figure(report)
    if report.audit == "catalog":
        return catalog_figure(report, reads or [])
    return loop_figure(report)


def save_audit_figure(fig: Figure, path: Path) -> Path:
    """Write `fig` to `path` (.svg or .png, fixed metadata: byte-stable), by replace."""
    # `path` as the stem: save_figure swaps its suffix for the format's, which is its own.
    (written,) = save_figure(fig, path, formats=(path.suffix[1:],))
    return written
