"""The commit-order gap, stepped by hand: two writer connections and a summarizer on a real server.

`CommitOrderLab` owns a private schema with two writer connections (A, B) and one worker
connection that delivers rows and runs two summarizers side by side: Article 1's id-order rule
(rule "id_order", summarizer policy "id_order") and the xmin horizon wait (rule "horizon": the
commit-order-safe `delivered_frontier`, policy "frontier", asked with a wait of `GRACE_S`, so a
horizon a scripted writer holds shows at once, while one that another session holds for a
moment, such as autovacuum analysing a catalog under a transaction id, is waited out). Time is
counted in steps, not seconds, so every run of the same script gives the same ids, frontiers and
orphans (the docs figures rely on it).
Optionally writers take a transaction-level advisory lock before inserting (the "lock" fix):
then a writer that finds the lock taken waits, and the step is recorded as a wait.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import labkit.catalog.versions_pg as versions_pg
import labkit.frontier.log as fr
import labkit.frontier.summarizer as sm
import labkit.pg.instance as pg

WRITERS = ("A", "B")
ACTIONS = ("insert", "commit", "deliver", "summarize")
RULES = ("id_order", "horizon")
# The summarizer policy each rule's checkpoint is kept under.
POLICY = {"id_order": "id_order", "horizon": "frontier"}
SHARD = "main"
LOCK_KEY = 7_000_001
# How long a summarize step waits for the horizon: far longer than a background transaction
# holds an id, far shorter than a scripted writer's transaction, which stays open for steps.
GRACE_S = 0.05
TRY_LOCK_SQL = "SELECT pg_try_advisory_xact_lock(%s)"


@dataclass(frozen=True)
class Event:
    """One step: who did what, to which row, and each rule's coverage afterwards."""

    step: int
    actor: str
    action: str
    row_id: int | None
    coverage: dict[str, int]
    note: str = ""


@dataclass
class Row:
    """A row's life in steps: taken, committed (visible), delivered, summarized per rule."""

    row_id: int
    writer: str
    inserted: int
    committed: int | None = None
    delivered: int | None = None
    summarized: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LabState:
    """What the plots and the widget read: every row, every event, orphans per rule."""

    rows: tuple[Row, ...]
    events: tuple[Event, ...]
    orphans: dict[str, tuple[int, ...]]
    held: int
    waits: int


class CommitOrderLab:
    """Two writers and a summarizer on one server; `step(actor, action)` moves one of them."""

    def __init__(self, dsn: str, lock: bool = False) -> None:
        self.lock = lock
        self._schema_cm = pg.scratch_schema(dsn, prefix="lab")
        self.schema = self._schema_cm.__enter__()
        opts = pg.search_path_option(self.schema)
        self.writers = {w: pg.connect(dsn, options=opts) for w in WRITERS}
        self.worker = pg.connect(dsn, options=opts)
        versions_pg.pin_settings(
            self.worker, versions_pg.READ_COMMITTED
        )  # the horizon wait's level, kept
        fr.create_schema(self.worker)
        self.rows: dict[int, Row] = {}
        self.open: dict[str, list[int]] = {w: [] for w in WRITERS}
        self.events: list[Event] = []
        self.coverage = {r: 0 for r in RULES}
        self.held = 0
        self.waits = 0

    # --- the four actions --------------------------------------------------------------------

    def insert(self, writer: str) -> int | None:
        """Writer takes the next id in its open transaction (or waits for the lock: None)."""
        conn = self.writers[writer]
        if self.lock and not self.open[writer]:
            if not conn.execute(TRY_LOCK_SQL, (LOCK_KEY,)).fetchone()[0]:
                self.waits += 1
                self._log(writer, "insert", None, "waits for the lock")
                return None
        row_id = fr.enqueue(conn, SHARD, 1)
        self.rows[row_id] = Row(row_id, writer, len(self.events))
        self.open[writer].append(row_id)
        self._log(writer, "insert", row_id)
        return row_id

    def commit(self, writer: str) -> None:
        """Writer commits: its rows become visible to everyone else now."""
        self.writers[writer].commit()
        for row_id in self.open[writer]:
            self.rows[row_id].committed = len(self.events)
        self.open[writer] = []
        self._log(writer, "commit", None)

    def deliver(self) -> list[int]:
        """The worker delivers every row it can see that is still pending, lowest id first."""
        done = []
        while (row_id := fr.dispatch_next(self.worker, SHARD)) is not None:
            fr.mark_delivered(self.worker, row_id)
            self.rows[row_id].delivered = len(self.events)
            done.append(row_id)
        self._log("worker", "deliver", done[-1] if done else None, ", ".join(map(str, done)))
        return done

    def summarize(self) -> dict[str, int]:
        """Both summarizers ask their rule where coverage may move, and summarize up to it."""
        ends = {
            "id_order": fr.id_order_frontier(self.worker, SHARD, self.coverage["id_order"]),
        }
        reading = fr.horizon_frontier(self.worker, SHARD, self.coverage["horizon"], wait=GRACE_S)
        ends["horizon"] = reading.frontier
        if not reading.settled:
            self.held += 1
        for rule, end in ends.items():
            summary = sm.summarize_range(self.worker, SHARD, POLICY[rule], end=end)
            for row_id in summary.item_ids if summary else ():
                self.rows[row_id].summarized[rule] = len(self.events)
            covered = sm.coverage_end(self.worker, SHARD, POLICY[rule])
            self.coverage[rule] = max(self.coverage[rule], covered)
        note = "" if reading.settled else "horizon held"
        self._log("worker", "summarize", None, note)
        return dict(self.coverage)

    def step(self, actor: str, action: str) -> None:
        """Run one scripted step: ("A"|"B", "insert"|"commit") or ("worker", "deliver"|...)."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; expected one of {ACTIONS}")
        if action in ("insert", "commit"):
            if actor not in WRITERS:
                raise ValueError(f"{action} needs a writer {WRITERS}, got {actor!r}")
            self.insert(actor) if action == "insert" else self.commit(actor)
        elif action == "deliver":
            self.deliver()
        else:
            self.summarize()

    def run(self, script: Iterable[tuple[str, str]]) -> LabState:
        """Run every step of `script`, then return the state."""
        for actor, action in script:
            self.step(actor, action)
        return self.state()

    # --- reading ----------------------------------------------------------------------------

    def state(self) -> LabState:
        """Rows, events and, per rule, the orphans: terminal rows under coverage in no summary."""
        lost = {r: tuple(sm.orphans(self.worker, SHARD, POLICY[r])) for r in RULES}
        return LabState(
            tuple(self.rows[k] for k in sorted(self.rows)),
            tuple(self.events),
            lost,
            self.held,
            self.waits,
        )

    def _log(self, actor: str, action: str, row_id: int | None, note: str = "") -> None:
        self.events.append(
            Event(len(self.events), actor, action, row_id, dict(self.coverage), note)
        )

    def close(self) -> None:
        """Roll back open writers, close every connection and drop the lab's schema."""
        for conn in (*self.writers.values(), self.worker):
            conn.close()
        self._schema_cm.__exit__(None, None, None)

    def __enter__(self) -> CommitOrderLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The late commit in eight steps: A takes id 1, B takes id 2 and commits, 2 is delivered, the
# summarizers run, then A commits, 1 is delivered, and the summarizers run again.
LATE_COMMIT: tuple[tuple[str, str], ...] = (
    ("A", "insert"),
    ("B", "insert"),
    ("B", "commit"),
    ("worker", "deliver"),
    ("worker", "summarize"),
    ("A", "commit"),
    ("worker", "deliver"),
    ("worker", "summarize"),
)


def random_script(steps: int, seed: int) -> list[tuple[str, str]]:
    """A seeded interleaving of inserts, commits, deliveries and summaries, drained at the end."""
    rng = random.Random(seed)
    script: list[tuple[str, str]] = []
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.5:
            script.append((rng.choice(WRITERS), "insert" if rng.random() < 0.6 else "commit"))
        else:
            script.append(("worker", "deliver" if roll < 0.75 else "summarize"))
    return (
        script + [(w, "commit") for w in WRITERS] + [("worker", "deliver"), ("worker", "summarize")]
    )


HORIZON_FIX = "xmin horizon wait"


@dataclass(frozen=True)
class FixOutcome:
    """One fix on one scripted interleaving: rows, orphans, summarizer holds, writer waits."""

    fix: str
    rows: int
    orphans: int
    held: int
    waits: int


def compare_fixes(dsn: str, scripts: Sequence[Sequence[tuple[str, str]]]) -> list[FixOutcome]:
    """Article 1's rule, the lock and the xmin horizon wait over the same scripted
    interleavings."""
    totals = {name: [0, 0, 0, 0] for name in ("no-wait frontier (Article 1)", "lock", HORIZON_FIX)}
    for script in scripts:
        for lock in (False, True):
            with CommitOrderLab(dsn, lock=lock) as lab:
                state = lab.run(script)
            picks = (
                [("lock", "id_order")]
                if lock
                else [("no-wait frontier (Article 1)", "id_order"), (HORIZON_FIX, "horizon")]
            )
            for name, rule in picks:
                t = totals[name]
                t[0] += len(state.rows)
                t[1] += len(state.orphans[rule])
                t[2] += state.held if rule == "horizon" else 0
                t[3] += state.waits
    return [FixOutcome(name, *t) for name, t in totals.items()]
