"""Part one's exercises, the gap-free frontier: predict it and count what MAX orphans (after
notebook 01), write it as one query for a log with more statuses (02), and index it for a
two-column shard (03). Every check runs the learner's answer on real SQLite; the scenario
runner and the explorer's model judge the predictions.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import labkit.exercises.sandboxes.sqlite as sandbox
import labkit.frontier.log as fr
import labkit.frontier.rule as rule
from labkit import validation
from labkit.exercises.kit import Exercise, Variant, Wrong, learner_items, listing, shown, whole
from labkit.frontier.orders import model_run
from labkit.frontier.scenario_format import scenario_from_dict
from labkit.frontier.scenarios import POLICY_COLUMNS, run_scenario, scenario_from_order

_MAX, _FRONTIER = POLICY_COLUMNS["max"], POLICY_COLUMNS["frontier"]


def _ids(answer: Any, what: str) -> set[int]:
    """A learner's collection of row ids (a set, list, NumPy array or pandas Series) as a set
    of Python ints."""
    if isinstance(answer, int | str) or not isinstance(answer, Iterable):
        raise Wrong(
            f"give {what} as a set of ids, e.g. {{8, 9}} (or set() for none), "
            f"not a {type(answer).__name__}"
        )
    if isinstance(answer, Mapping):
        raise Wrong(f"give {what} as a set of ids, e.g. {{8, 9}}, not a dict")
    return set(learner_items(answer, what, lambda i: whole(i, f"each id in {what}"), noun="ids"))


# --- lesson 02: the frontier as one SQL query, for a log with more statuses ----------------
# A transfer variant: notebook 02 prints the four-status query, so this log has two more open
# statuses and one more terminal one. The learner has to decide which statuses block.

OPEN_STATUSES = ("pending", "leased", "running", "retrying")
DONE_STATUSES = ("delivered", "failed", "cancelled")
ODD_KEY = 'o\'brien "q" — ünï 🚀'

_VARIANT_SCHEMA = """
CREATE TABLE conversations (
    id          INTEGER PRIMARY KEY,  -- rows are never deleted here, so ids only grow
    channel_key TEXT    NOT NULL,
    priority    INTEGER NOT NULL,
    status      TEXT    NOT NULL CHECK (status IN
        ('pending', 'leased', 'running', 'retrying', 'delivered', 'failed', 'cancelled'))
);
CREATE INDEX idx_shard_rows ON conversations(channel_key, id);
"""


def reference_frontier(rows: Sequence[tuple[int, str]], base: int) -> int:
    """The frontier by its definition, for a shard's `(id, status)` rows above `base` in id
    order: one less than the first open id; else the last id; else `base`."""
    return rule.frontier(base, ((row_id, status in OPEN_STATUSES) for row_id, status in rows))


def _build_frontier_cases(seed: int = 0) -> tuple[sqlite3.Connection, list[tuple[str, str, int]]]:
    """A seven-status log with hand-made edge-case shards and random ones; (shard, label, base)
    pairs to check, the most telling first."""
    conn = sqlite3.connect(":memory:")
    conn.executescript(_VARIANT_SCHEMA)
    rng = random.Random(seed)
    steps: list[tuple[str, str]] = []  # (shard, status), in id order

    def rows(shard: str, statuses: Iterable[str]) -> None:
        steps.extend((shard, s) for s in statuses)

    rows("lease", ["delivered", "leased", "delivered", "delivered"])
    rows("retry", ["delivered", "delivered", "retrying", "delivered"])
    rows("cancel", ["cancelled", "delivered", "cancelled", "pending", "delivered"])
    rows("done", ["delivered", "failed", "cancelled"])
    rows("tail", ["delivered", "failed", "cancelled"])
    rows(ODD_KEY, ["delivered", "running", "delivered"])
    for i in range(8):  # shards a and b take turns, so their ids interleave
        steps.append(("a" if i % 2 else "b", rng.choice(OPEN_STATUSES + DONE_STATUSES)))
    rows("tail", ["retrying"])  # after the terminal tail, an open row
    for _ in range(60):
        steps.append((f"r{rng.randrange(4)}", rng.choice(OPEN_STATUSES + DONE_STATUSES)))
    conn.executemany(
        "INSERT INTO conversations (channel_key, status, priority) VALUES (?, ?, ?)",
        [(shard, status, rng.randint(1, 5)) for shard, status in steps],
    )
    conn.commit()
    labels = {
        "lease": "a leased row below delivered ones",
        "retry": "a retrying row below a delivered one",
        "cancel": "cancelled rows, then a pending one",
        "done": "all terminal",
        "tail": "a terminal tail, then a retrying row",
        "empty": "empty shard",
        ODD_KEY: "a key with quotes and unicode",
        "a": "interleaved with shard 'b'",
        "b": "interleaved with shard 'a'",
    }
    cases: list[tuple[str, str, int]] = []
    last_id = len(steps)
    for shard, label in labels.items():
        ids = [row_id for row_id, _ in _shard_rows(conn, shard, 0)]
        bases = sorted({0, *(ids[:1]), *(ids[len(ids) // 2 : len(ids) // 2 + 1]), last_id + 5})
        cases.extend((shard, label, b) for b in bases)
    for k in range(4):
        for _ in range(3):
            cases.append((f"r{k}", "random shard", rng.randrange(0, last_id)))
    return conn, cases


def _shard_rows(conn: sqlite3.Connection, shard: str, base: int) -> list[tuple[int, str]]:
    return conn.execute(
        "SELECT id, status FROM conversations WHERE channel_key = ? AND id > ? ORDER BY id",
        (shard, base),
    ).fetchall()


def _explain_frontier_miss(rows: list[tuple[int, str]], base: int, got: Any, want: int) -> str:
    """The kind of mistake that makes a query return `got` where the frontier is `want`, for a
    shard whose rows above `base` are `rows`; it names statuses and causes, never `want`."""
    if got is None:
        if not rows:
            return (
                "it returned NULL; with no row above the base, the frontier stays where it was: "
                "look at the last fallback of the rule"
            )
        return (
            "it returned NULL; when no row above the base is open the rule still has an answer: "
            "look at the second part of the rule"
        )
    if not validation.is_int(got):
        return f"it returned a {type(got).__name__}, not a whole-number id"
    if got > want:
        first_open = next(((i, s) for i, s in rows if s in OPEN_STATUSES), None)
        if first_open and first_open[0] == got:
            return (
                f"it returned the id of the first open row ({first_open[1]}) itself: the "
                "frontier stops one short of that row, because that row is not finished"
            )
        blocker = next(((i, s) for i, s in rows if i <= got and s in OPEN_STATUSES), None)
        if blocker:
            return (
                f"your frontier passes a {blocker[1]} row, and {blocker[1]} is open (it can "
                "still change): it must hold the frontier back"
            )
        return (
            "it is beyond every row of this shard above the base: does every "
            "subquery filter on channel_key = :shard?"
        )
    if got < base:
        return "it went below the coverage base; coverage never moves back"
    stopper = next(((i, s) for i, s in rows if got < i <= want and s != "delivered"), None)
    if stopper:
        return (
            f"your frontier stops at a {stopper[1]} row, but {stopper[1]} is terminal (it will "
            "never change): it must not hold the frontier back"
        )
    if got == base:
        return (
            "it stayed at the base although every row above it is finished: when nothing above "
            "the base is open, the frontier moves up to the largest id there"
        )
    if got in {i for i, _ in rows} and want not in {i for i, _ in rows}:
        return (
            "it stops at the last finished row of this shard before the first open one. The "
            "frontier is a boundary one below the first open row, not the last finished row of "
            "the shard: ids of other shards in between count as passed"
        )
    return (
        "your frontier stops early: the rows of this shard just above it are finished, so the "
        "frontier passes them"
    )


def _check_frontier_sql(sql: Any) -> str:
    text = sandbox.strip_sql(sql, "your query")
    code = sandbox.code_only(text)
    if not re.match(r"(?is)^\s*(select|with)\b", code):
        raise Wrong("the answer must be a single SELECT (or WITH ... SELECT) query")
    if "?" in code:
        raise Wrong("use the named parameters :shard and :base instead of ?")
    sandbox.require_params(text, ("shard", "base"), "your query")
    conn, cases = _build_frontier_cases()
    results = sandbox.run_each(
        conn, sql, [{"shard": shard, "base": base} for shard, _, base in cases]
    )
    for (shard, label, base), result in zip(cases, results, strict=True):
        if len(result) > sandbox.MAX_ROWS:
            raise Wrong(
                f"on shard {shard!r} with base {base} your query returned more than "
                f"{sandbox.MAX_ROWS} rows; it must return one value"
            )
        if len(result) != 1 or len(result[0]) != 1:
            raise Wrong(
                f"on shard {shard!r} with base {base} your query returned {len(result)} row(s) "
                f"of {len(result[0]) if result else 0} column(s); it must return one value"
            )
        got = result[0][0]
        rows = _shard_rows(conn, shard, base)
        want = reference_frontier(rows, base)
        if got != want or isinstance(got, bool):
            why = _explain_frontier_miss(rows, base, got, want)
            raise Wrong(
                f"on shard {shard!r} ({label}) with base {base} your query returned "
                f"{shown(got)}: {why}"
            )
    return (
        f"it matched the frontier on {len(cases)} (shard, base) cases: leased and retrying rows "
        "hold it back, cancelled ones do not."
    )


frontier_sql_ex = Exercise(
    name="Frontier with more statuses",
    question=(
        "A log whose rows can be pending, leased (claimed by a worker, not started), running or "
        "retrying (waiting to try again): all open; or delivered, failed or cancelled (the "
        "sender withdrew it): all terminal. Write its gap-free frontier as ONE SELECT over "
        "`conversations` with the named parameters :shard and :base, returning one value. "
        'Answer a string holding the query, shaped like "SELECT MAX(id) FROM conversations '
        'WHERE channel_key = :shard AND id > :base" (one SELECT, one value; not the rule).'
    ),
    checker=_check_frontier_sql,
    hints=(
        "Notebook 02's rule still holds; only the set of statuses that block changes. Which of "
        "the seven statuses can still change? Those, and only those, stop the frontier.",
        "The rule has three parts, and the first that is not NULL wins: one less than the "
        "smallest open id above :base; else the largest id above :base; else :base itself. "
        "Every part looks at the shard's rows only (channel_key = :shard).",
        "COALESCE((one less than the smallest id of this shard above :base whose status is "
        "IN (____)), (SELECT ____ FROM conversations WHERE ____), :base): fill in the open "
        "statuses and the middle fallback.",
    ),
    solution_text=(
        "SELECT COALESCE(\n"
        "  (SELECT MIN(id) - 1 FROM conversations WHERE channel_key = :shard AND id > :base\n"
        "     AND status IN ('pending', 'leased', 'running', 'retrying')),\n"
        "  (SELECT MAX(id) FROM conversations WHERE id > :base AND channel_key = :shard),\n"
        "  :base)"
    ),
)


# --- lesson 01: predict the frontier and MAX after some deliveries --------------------------

PREDICT_EVENTS: tuple[tuple[str, int], ...] = (
    ("deliver", 3),
    ("deliver", 5),
    ("deliver", 1),
    ("fail", 2),
)
PREDICT_PRIORITIES: tuple[int, ...] = (5, 5, 1, 5, 5, 5)


def _predict_timeline(
    priorities: Sequence[int] = PREDICT_PRIORITIES,
    events: Sequence[tuple[str, int]] = PREDICT_EVENTS,
) -> Any:
    """The last step of the scenario runner's timeline for rows of `priorities` (ids from 1)
    in shard 'main' after `events`: the statuses, the frontier and MAX."""
    data = {
        "name": "predict",
        "title": "Rows partly delivered",
        "description": "Rows of one shard, some delivered, some dead-lettered.",
        "messages": [{"shard": "main", "priority": p} for p in priorities],
        "events": [{"op": op, "id": i} for op, i in events],
    }
    return run_scenario(scenario_from_dict(data, "<predict_frontier_ex>")).iloc[-1]


def _number(answer: Any, keys: Sequence[str]) -> int:
    for key in keys:
        if key in answer:
            return whole(answer[key], key)
    raise Wrong(f"the answer needs a {keys[0]!r} entry")


_PREDICT_RECHECK = (
    "Re-check the statuses first: write each id's status after the last event, in id order, "
    "and mark which of them can still change; then apply each rule to that row of marks"
)


def _frontier_mistake(said: int, statuses: dict[int, str], want: int) -> str:
    """The idea behind a predicted frontier `said` to re-check; never names `want` and gives
    no direction to move in."""
    if said not in range(len(statuses) + 1):
        return f"the shard holds ids 1..{len(statuses)}; coverage base 0 means no id yet"
    if said > want and statuses.get(said) in fr.NON_TERMINAL:
        return (
            f"row {said} is still {statuses[said]}, so it can still change; a frontier never "
            f"includes an open row. {_PREDICT_RECHECK}"
        )
    if said < want and statuses[said + 1] == "failed":
        return (
            "a failed row is a dead letter: it is terminal and never changes again, so it "
            f"does not hold the frontier back. {_PREDICT_RECHECK}"
        )
    return (
        "the frontier walks up from the base over finished rows (delivered or dead-lettered) "
        f"and stops one short of the first row that can still change. {_PREDICT_RECHECK}"
    )


def _max_mistake(said: int, statuses: dict[int, str], frontier: int) -> str:
    """The idea behind a predicted MAX(delivered) `said` to re-check."""
    status = statuses.get(said)
    if said == frontier:
        return (
            "that is the gap-free rule's answer again; MAX(id) WHERE status='delivered' "
            "ignores gaps, whatever is open below"
        )
    if status is None:
        return f"the shard holds ids 1..{len(statuses)} only"
    if status != "delivered":
        return f"id {said} is {status}: MAX(id) WHERE status='delivered' counts delivered rows only"
    return "MAX takes the largest delivered id, gaps or not: check every delivered id"


def _check_predict(
    answer: Any,
    priorities: Sequence[int] = PREDICT_PRIORITIES,
    events: Sequence[tuple[str, int]] = PREDICT_EVENTS,
) -> str:
    if not (isinstance(answer, Mapping) or hasattr(answer, "keys")):
        raise Wrong(
            "give a dict with two whole numbers, e.g. {'frontier': 7, 'max_watermark': 9}, "
            f"not a {type(answer).__name__}"
        )
    frontier = _number(answer, ("frontier",))
    mx = _number(answer, ("max_watermark", "max"))
    last = _predict_timeline(priorities, events)
    statuses: dict[int, str] = dict(last["statuses"])
    want_f, want_m = int(last["frontier"]), int(last["max_watermark"])
    if frontier != want_f:
        why = _frontier_mistake(frontier, statuses, want_f)
        raise Wrong(f"you said the frontier is {shown(frontier)}, which is not it: {why}")
    if mx != want_m:
        why = _max_mistake(mx, statuses, want_f)
        raise Wrong(f"the frontier is right; MAX(delivered) is not {shown(mx)}: {why}")
    return (
        f"frontier {want_f}, MAX {want_m}. A summary up to MAX would pass the pending id "
        f"{want_f + 1}."
    )


def _predict_question(priorities: Sequence[int], events: Sequence[tuple[str, int]]) -> str:
    n = len(priorities)
    shown_priorities = ", ".join(f"id {i} at {p}" for i, p in enumerate(priorities, 1))
    return (
        f"{n} rows in shard 'main' (ids 1..{n}; priorities: {shown_priorities}). Then: "
        + ", ".join(f"{op} id {i}" for op, i in events)
        + ". With coverage base 0, what are the frontier and MAX(id) WHERE status='delivered'? "
        "Answer a dict of two whole numbers, shaped like {'frontier': 7, 'max_watermark': 9} "
        "(other numbers)."
    )


def _predict_variant(rng: random.Random) -> Variant:
    """New rows and events for the same prediction: a pending row below a delivered one, so
    the two rules disagree; the truth comes from the scenario runner."""
    while True:
        n = rng.randint(6, 9)
        priorities = tuple(rng.randint(1, 5) for _ in range(n))
        done = rng.sample(range(1, n + 1), rng.randint(n // 2, n - 2))
        events = tuple((("fail" if rng.random() < 0.3 else "deliver"), i) for i in done)
        last = _predict_timeline(priorities, events)
        f, m = int(last["frontier"]), int(last["max_watermark"])
        if 0 < f < m and (f, m) != (7, 9):  # never the shape example's numbers
            break
    statuses = dict(last["statuses"])
    marks = ", ".join(f"{i} {s}" for i, s in sorted(statuses.items()))
    return Variant(
        question=_predict_question(priorities, events),
        checker=lambda answer: _check_predict(answer, priorities, events),
        solution_text=(
            f"Statuses: {marks}. Frontier = {f + 1} - 1 = {f}; MAX(delivered) = {m}. "
            f"answer = {{'frontier': {f}, 'max_watermark': {m}}}"
        ),
    )


predict_frontier_ex = Exercise(
    name="Predict the frontier",
    question=(
        "Article 1's scenario: six rows in shard 'main', id 3 at priority 1, the rest at 5. "
        "Then: "
        + ", ".join(f"{op} id {i}" for op, i in PREDICT_EVENTS)
        + ". With coverage base 0, what are the frontier and MAX(id) WHERE status='delivered'? "
        "Answer a dict of two whole numbers, shaped like {'frontier': 7, 'max_watermark': 9} "
        "(other numbers)."
    ),
    checker=_check_predict,
    hints=(
        "Write the statuses down in id order first. Which of them can still change?",
        "The frontier walks up from the base over finished rows (delivered or failed) and "
        "stops one short of the first row that can still change. MAX is another rule: the "
        "largest delivered id, whatever is still open below it.",
        "Under each id write d (delivered), f (failed) or p (pending) as of the last event. "
        "One rule reads that row of letters from the left and stops before the first letter "
        "that ____; the other ignores every letter but ____. Which letter is finished, yet "
        "not counted by MAX?",
    ),
    solution_text=(
        "Statuses: 1 delivered, 2 failed, 3 delivered, 4 pending, 5 delivered, 6 pending. "
        "Frontier = 4 - 1 = 3; MAX(delivered) = 5. answer = {'frontier': 3, 'max_watermark': 5}"
    ),
    variants=_predict_variant,
)


# --- lesson 03: the partial index, for another shard shape and status set -----------------
# A transfer variant: notebook 03 shows the index for (channel_key, id) and two open statuses;
# here a shard is (tenant, channel_key) and three statuses are open.

INDEX_ROWS = 3000
INDEX_OPEN = ("pending", "retrying", "running")
INDEX_QUERY = (
    "SELECT MIN(id) FROM conversations WHERE tenant = ? AND channel_key = ? "
    "AND status IN ('pending', 'retrying', 'running') AND id > ?"
)
_INDEX_SCHEMA = """
CREATE TABLE conversations (
    id          INTEGER PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    channel_key TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    priority    INTEGER NOT NULL
);
"""


def _index_db() -> sqlite3.Connection:
    """A two-tenant log with lots of settled history, a few open rows and no index at all."""
    conn = sqlite3.connect(":memory:")
    conn.executescript(_INDEX_SCHEMA)
    rng = random.Random(3)
    rows = []
    for i in range(1, INDEX_ROWS + 1):
        status = INDEX_OPEN[i % 3] if i % 250 == 0 else rng.choice(("delivered", "failed"))
        rows.append((rng.choice(("acme", "globex")), rng.choice("abc"), status))
    conn.executemany(
        "INSERT INTO conversations (tenant, channel_key, status, priority) VALUES (?, ?, ?, 5)",
        rows,
    )
    conn.commit()
    return conn


INDEX_SQL_SQL = "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?"


def _indexes(conn: sqlite3.Connection) -> dict[str, bool]:
    """Index name -> partial? for the conversations table."""
    return {
        str(row[1]): bool(row[4])
        for row in conn.execute("PRAGMA index_list(conversations)").fetchall()
    }


def _check_partial_index(sql: Any) -> str:
    text = sandbox.strip_sql(sql, "your statement")
    if not re.match(r"(?is)^\s*create\s+(unique\s+)?index\b", sandbox.code_only(text)):
        raise Wrong("the answer must be one CREATE INDEX statement")
    conn = _index_db()
    before = set(_indexes(conn))
    sandbox.run(conn, text, what="your CREATE INDEX", writes=True)
    new = {k: v for k, v in _indexes(conn).items() if k not in before}
    if not new:
        raise Wrong("that statement created no index on conversations")
    name, partial = next(iter(new.items()))
    plan = " | ".join(fr.explain(conn, INDEX_QUERY, ("acme", "a", 0)))
    if f"INDEX {name} " not in plan + " ":
        extra = ""
        if partial:
            made = conn.execute(INDEX_SQL_SQL, (name,)).fetchone()[0]
            where = re.split(r"(?i)\bwhere\b", sandbox.code_only(made), maxsplit=1)[-1]
            extra = (
                ". SQLite uses a partial index only when the query's WHERE implies the index's"
                + (
                    ". It proves that term by term and does not read an IN list as a set: "
                    "for an IN list that means the same values in the same order as the "
                    "query's own list, or the index looks unusable to it"
                    if re.search(r"(?i)\bin\s*\(", where)
                    else ", and it proves that by matching terms, not by reasoning about "
                    "them: the index's WHERE must be written as the query writes its condition"
                )
            )
        raise Wrong(f"SQLite does not use {name}: the plan is still {plan!r}{extra}")
    if not plan.startswith("SEARCH"):
        raise Wrong(f"the plan uses {name} but scans it: {plan!r}; lead with the shard columns")
    missing = [col for col in ("tenant", "channel_key") if f"{col}=?" not in plan]
    if missing:
        raise Wrong(
            f"the plan is {plan!r}: it does not seek on {' and '.join(missing)}, so it reads "
            "the open rows of other shards too; a shard here is (tenant, channel_key), and "
            "both columns come first"
        )
    if not re.search(r"\b(id|rowid)>\?", plan):  # SQLite appends the rowid to every index
        raise Wrong(
            f"the plan is {plan!r}: it seeks the shard but not the id range, so it walks all of "
            "the shard's rows: something between the shard columns and the id stops the seek"
        )
    if not partial:
        raise Wrong(
            f"the plan is a SEARCH ({plan!r}), but {name} holds all {INDEX_ROWS} rows, settled "
            "history included, and grows forever; a WHERE on the index keeps it to the rows "
            "the query can ever want, so it holds open rows only"
        )
    entries = conn.execute(
        "SELECT COUNT(*) FROM conversations WHERE status IN ('pending', 'retrying', 'running')"
    ).fetchone()[0]
    return f"plan {plan!r}; the index holds {entries} open rows out of {INDEX_ROWS}."


partial_index_ex = Exercise(
    name="Index for a two-column shard",
    question=(
        "A log where a shard is the pair (tenant, channel_key) and pending, running and "
        "retrying rows are open. Its frontier seek is labkit.exercises.INDEX_QUERY. "
        "With no index it plans as 'SEARCH conversations USING INTEGER PRIMARY KEY (rowid>?)'. "
        "Write the CREATE INDEX after which it is a SEARCH on your index that seeks the shard "
        "and the id range, and which holds open rows only. Answer a string holding one "
        'statement, shaped like "CREATE INDEX idx_x ON conversations(priority) WHERE '
        'priority > 3" (another index).'
    ),
    checker=_check_partial_index,
    hints=(
        "Equality columns come first in an index, the range column after them. Which columns "
        "does INDEX_QUERY compare with '=' and which with '>'? And which rows does it ever "
        "look at?",
        "Two parts. The key: every column the query tests with '=', then the one it tests with "
        "'>' (SQLite appends the rowid, which is id here, to every index, so it may stay "
        "implicit). The WHERE: a partial index keeps only the rows that match it, and SQLite "
        "uses it only when the query's WHERE implies the index's, so copy the query's status "
        "condition as it is written.",
        "CREATE INDEX idx_open ON conversations(tenant, ____, id) WHERE status IN (____), with "
        "the open statuses in the order INDEX_QUERY lists them.",
    ),
    solution_text=(
        "CREATE INDEX idx_open ON conversations(tenant, channel_key, id) "
        "WHERE status IN ('pending', 'retrying', 'running')\n"
        "(conversations(tenant, channel_key) with the same WHERE is the same index: SQLite "
        "appends the rowid, id, to every index.)"
    ),
)


# --- lesson 01: which ids does MAX orphan -----------------------------------------------------

ORPHAN_PRIORITIES: tuple[int, ...] = (5, 5, 1, 5, 2, 5, 5)
ORPHAN_ORDER: tuple[int, ...] = (3, 5, 1, 7, 2, 4, 6)


def _max_jumps(timeline: Any) -> list[tuple[str, int, list[int]]]:
    """Each time MAX coverage moved: the finish it followed, where it jumped to, and the ids
    it passed that were still open then."""
    jumps, covered = [], 0
    finished = "the start"
    for _, step in timeline.iterrows():
        if step["op"] != "summarize":
            finished = step["event"]
            continue
        cov = int(step[_MAX.coverage])
        if cov > covered:
            statuses = step["statuses"]
            skipped = [i for i in range(covered + 1, cov + 1) if statuses[i] in fr.NON_TERMINAL]
            jumps.append((finished, cov, skipped))
            covered = cov
    return jumps


def _check_max_orphans(
    answer: Any,
    priorities: Sequence[int] = ORPHAN_PRIORITIES,
    order: Sequence[int] = ORPHAN_ORDER,
) -> str:
    said = _ids(answer, "the orphans")
    ids = range(1, len(priorities) + 1)
    timeline = run_scenario(scenario_from_order(priorities, order))
    want = set(timeline.iloc[-1][_MAX.orphan_ids])
    model = model_run(len(ids), order)
    if set(model["max"]["orphans"]) != want:
        raise RuntimeError(f"explorer and SQLite disagree on MAX's orphans: {model} vs {want}")
    missing, extra = sorted(want - said), sorted(said - want)
    if extra:
        outside = [i for i in extra if i not in ids]
        if outside:
            raise Wrong(f"there is no id {outside[0]}; the shard holds ids 1..{len(ids)}")
    if extra or missing:
        jumps = _max_jumps(timeline)
        k = next(
            (k for k, (_, _, skipped) in enumerate(jumps) if set(skipped) != set(skipped) & said),
            len(jumps),
        )
        count = ("", "", "two", "three", "four", "five", "six", "seven", "eight", "nine")[k]
        covered = f"MAX's first {count} jumps" if k > 1 else "MAX's first jump" if k else ""
        found = f"your ids account for {covered}, but not for all of them. " if covered else ""
        raise Wrong(
            f"{found}Not every id you named, or left out, fits the rule: an orphan is an id "
            "that was still open when a MAX jump passed it. For each finish, note where MAX "
            "moves and which ids below it are not yet delivered at that moment; then ask of "
            "each id you gave whether it was delivered before the jump that passed it"
        )
    frontier_lost = list(timeline.iloc[-1][_FRONTIER.orphan_ids])
    return f"MAX orphans {sorted(want)}; the frontier orphans {frontier_lost or 'nothing'}."


def _orphans_question(priorities: Sequence[int], order: Sequence[int]) -> str:
    n = len(priorities)
    return (
        f"{n} rows in one shard, priorities {list(priorities)} (ids 1..{n}). They finish "
        f"in the order {list(order)}, and after every finish the summarizer runs under "
        "the MAX rule (cover up to MAX(delivered)). Which ids end up orphans: delivered, yet in "
        "no summary? Answer a set of ids, shaped like {8, 9} (other ids), or set() for none."
    )


def _orphans_variant(rng: random.Random) -> Variant:
    """A new finishing order (and priorities) for the same question; MAX orphans between two
    ids and all but two, so neither 'none' nor 'all' is ever right."""
    while True:
        n = rng.randint(6, 9)
        priorities = tuple(rng.randint(1, 5) for _ in range(n))
        order = tuple(rng.sample(range(1, n + 1), n))
        orphans = sorted(model_run(n, order)["max"]["orphans"])
        if 2 <= len(orphans) <= n - 2 and orphans != [8, 9]:  # never the shape example
            break
    return Variant(
        question=_orphans_question(priorities, order),
        checker=lambda answer: _check_max_orphans(answer, priorities, order),
        solution_text=(
            "Each id still open when a finish moved MAX past it is an orphan. "
            f"answer = {{{listing(orphans)}}}"
        ),
    )


max_orphans_ex = Exercise(
    name="MAX's orphans",
    question=_orphans_question(ORPHAN_PRIORITIES, ORPHAN_ORDER),
    checker=_check_max_orphans,
    hints=(
        "Keep a running MAX as the rows finish. What happens to the ids it jumps over?",
        "After each finish write down MAX(delivered) and the ids below it that are not "
        "delivered yet. The summary covers everything up to MAX, and the next one starts above "
        "it, so such an id is never summarised. Collect those ids over the whole order; MAX "
        "may jump more than once.",
        "Make a table with one line per finish: the id that finished, MAX after it, and the "
        "ids below MAX still open at that moment. Which lines add ids to the answer, and does "
        "an id leave the answer when it is delivered ____?",
    ),
    solution_text=(
        "After 3: MAX 3, skips 1 and 2. After 5: MAX 5, skips 4. After 1: MAX stays 5. "
        "After 7: MAX 7, skips 6. answer = {1, 2, 4, 6}"
    ),
    variants=_orphans_variant,
)


exercises: list[Exercise] = [
    predict_frontier_ex,
    max_orphans_ex,
    frontier_sql_ex,
    partial_index_ex,
]
# The notebook each exercise practises: notebooks/0N_... -> exercises/solutions/ex0N_...
by_lesson: dict[int, list[Exercise]] = {
    1: [predict_frontier_ex, max_orphans_ex],
    2: [frontier_sql_ex],
    3: [partial_index_ex],
}
