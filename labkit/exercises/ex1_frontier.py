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

import labkit.exercises.sandbox as sandbox
import labkit.frontier.log as fr
from labkit.exercises.kit import Exercise, Wrong, listing, shown
from labkit.frontier.orders import model_run
from labkit.frontier.scenario_format import scenario_from_dict
from labkit.frontier.scenarios import POLICY_COLUMNS, run_scenario, scenario_from_order

_MAX, _FRONTIER = POLICY_COLUMNS["max"], POLICY_COLUMNS["frontier"]


def _ids(answer: Any, what: str) -> set[int]:
    """A learner's collection of row ids as a set of ints."""
    if isinstance(answer, int | str) or not isinstance(answer, Iterable):
        raise Wrong(f"give {what} as a list or set of ids, e.g. [2, 5] (or [] for none)")
    out = set()
    for item in answer:
        if isinstance(item, bool) or not isinstance(item, int):
            raise Wrong(f"{shown(item)} is not an id; {what} must hold whole numbers")
        out.add(int(item))
    return out


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
    frontier = base
    for row_id, status in rows:
        if status in OPEN_STATUSES:
            return row_id - 1
        frontier = row_id
    return frontier


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
    """Why `got` is not the frontier `want` of a shard whose rows above `base` are `rows`."""
    if got is None:
        if not rows:
            return "it returned NULL; with no rows above the base the frontier stays at the base"
        return (
            "it returned NULL; when no row above the base is open, the frontier is the largest "
            "id above the base"
        )
    if not isinstance(got, int):
        return f"it returned {type(got).__name__} {got!r}, not a whole-number id"
    if got > want:
        blocker = next(((i, s) for i, s in rows if base < i <= got and s in OPEN_STATUSES), None)
        if blocker:
            return f"it passed id {blocker[0]}, which is {blocker[1]}: still open"
        return f"no row of this shard has an id in ({want}, {got}]; the frontier never runs ahead"
    if got < base:
        return "it went below the coverage base; coverage never moves back"
    done = [(i, s) for i, s in rows if got < i <= want and s != "delivered"]
    if done:
        i, s = done[0]
        return f"id {i} is {s}, and {s} is terminal: it must not hold the frontier back"
    return f"every row in ({base}, {want}] is terminal, so the frontier gets there"


def _check_frontier_sql(sql: Any) -> str:
    text = sandbox.strip_sql(sql, "your query")
    code = sandbox.code_only(text)
    if not re.match(r"(?is)^\s*(select|with)\b", code):
        raise Wrong("the answer must be a single SELECT (or WITH ... SELECT) query")
    if "?" in code:
        raise Wrong("use the named parameters :shard and :base instead of ?")
    for name in ("shard", "base"):
        if not re.search(rf":{name}\b", code):
            raise Wrong(f"the query never uses :{name}; bind it instead of writing values in")
    conn, cases = _build_frontier_cases()
    results = sandbox.run_each(conn, sql, [{"shard": shard, "base": base} for shard, _, base in cases])
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
                f"on shard {shard!r} ({label}) with base {base} your query returned {got}, "
                f"the frontier is {want}: {why}"
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
        "`conversations` with the named parameters :shard and :base, returning one value."
    ),
    checker=_check_frontier_sql,
    hints=(
        "Notebook 02's rule still holds; only the set of statuses that block changes. Which of "
        "the seven statuses can still change? Those, and only those, stop the frontier.",
        "COALESCE(smallest open id above :base minus 1, largest id above :base, :base), where "
        "'open' is status IN ('pending', 'leased', 'running', 'retrying'). Filter every "
        "subquery on channel_key = :shard.",
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


def _predict_timeline() -> Any:
    data = {
        "name": "predict",
        "title": "Article 1's six rows, partly delivered",
        "description": "Article 1's six rows; 3, 5 and 1 delivered, 2 dead-lettered.",
        "messages": [{"shard": "main", "priority": 1 if i == 3 else 5} for i in range(1, 7)],
        "events": [{"op": op, "id": i} for op, i in PREDICT_EVENTS],
    }
    return run_scenario(scenario_from_dict(data, "<predict_frontier_ex>")).iloc[-1]


def _number(answer: Mapping[str, Any], keys: Sequence[str]) -> int | None:
    for key in keys:
        if key in answer:
            value = answer[key]
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise Wrong(f"{key} must be a whole number, not {shown(value)}")
            return value
    raise Wrong(f"the answer needs a {keys[0]!r} entry")


def _check_predict(answer: Any) -> str:
    if not isinstance(answer, Mapping):
        raise Wrong("give a dict like {'frontier': 0, 'max_watermark': 0}")
    frontier = _number(answer, ("frontier",))
    mx = _number(answer, ("max_watermark", "max"))
    last = _predict_timeline()
    statuses: dict[int, str] = dict(last["statuses"])
    want_f, want_m = int(last["frontier"]), int(last["max_watermark"])
    if frontier != want_f:
        if frontier is not None and frontier > want_f:
            why = (
                f"id {want_f + 1} is still {statuses[want_f + 1]}, so the frontier stops before it"
            )
        else:
            failed = [i for i in range(1, want_f + 1) if statuses[i] == "failed"]
            why = (
                f"id {failed[0]} is failed, which is terminal and does not hold the frontier back"
                if failed
                else f"ids 1..{want_f} are all terminal"
            )
        raise Wrong(f"you said the frontier is {shown(frontier)}; the log says {want_f}: {why}")
    if mx != want_m:
        delivered = [i for i, s in statuses.items() if s == "delivered"]
        raise Wrong(
            f"you said MAX(delivered) is {shown(mx)}; it is {want_m}: the delivered ids are "
            f"{listing(delivered)} (failed and pending rows do not count)"
        )
    return (
        f"frontier {want_f}, MAX {want_m}. A summary up to MAX would pass the pending id "
        f"{want_f + 1}."
    )


predict_frontier_ex = Exercise(
    name="Predict the frontier",
    question=(
        "Article 1's scenario: six rows in shard 'main', id 3 at priority 1, the rest at 5. "
        "Then: "
        + ", ".join(f"{op} id {i}" for op, i in PREDICT_EVENTS)
        + ". With coverage base 0, what are the frontier and MAX(id) WHERE status='delivered'? "
        "Answer {'frontier': ..., 'max_watermark': ...}."
    ),
    checker=_check_predict,
    hints=(
        "Write the six statuses down in id order first. Which of them can still change?",
        "The frontier stops one short of the first pending or running id; a failed row counts "
        "as finished. MAX looks at delivered rows only, wherever they are.",
    ),
    solution_text=(
        "Statuses: 1 delivered, 2 failed, 3 delivered, 4 pending, 5 delivered, 6 pending. "
        "Frontier = 4 - 1 = 3; MAX(delivered) = 5. answer = {'frontier': 3, 'max_watermark': 5}"
    ),
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
            extra = (
                ". SQLite uses a partial index only when the query's WHERE implies the index's; "
                "for an IN list that means the same values in the same order as the query's "
                "('pending', 'retrying', 'running')"
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
    if not re.search(r"\bid>\?", plan):
        raise Wrong(
            f"the plan is {plan!r}: it seeks the shard but then walks all of its rows; "
            "put id right after the shard columns so the seek starts above the base"
        )
    if not partial:
        raise Wrong(
            f"the plan is a SEARCH ({plan!r}), but {name} holds all {INDEX_ROWS} rows, settled "
            "history included, and grows forever; add the query's status condition as the "
            "index's WHERE so it holds open rows only"
        )
    entries = conn.execute(
        "SELECT COUNT(*) FROM conversations WHERE status IN ('pending', 'retrying', 'running')"
    ).fetchone()[0]
    return f"plan {plan!r}; the index holds {entries} open rows out of {INDEX_ROWS}."


partial_index_ex = Exercise(
    name="Index for a two-column shard",
    question=(
        "A log where a shard is the pair (tenant, channel_key) and pending, running and "
        "retrying rows are open. Its frontier seek is labkit.exercises.ex1_frontier.INDEX_QUERY. "
        "With no index it plans as 'SEARCH conversations USING INTEGER PRIMARY KEY (rowid>?)'. "
        "Write the CREATE INDEX after which it is a SEARCH on your index that seeks the shard "
        "and the id range, and which holds open rows only."
    ),
    checker=_check_partial_index,
    hints=(
        "Equality columns come first in an index, the range column after them. Which columns "
        "does INDEX_QUERY compare with '=' and which with '>'? And which rows does it ever "
        "look at?",
        "CREATE INDEX ... ON conversations(tenant, channel_key, id) WHERE <the query's status "
        "condition, copied exactly, values in the same order>.",
    ),
    solution_text=(
        "CREATE INDEX idx_open ON conversations(tenant, channel_key, id) "
        "WHERE status IN ('pending', 'retrying', 'running')"
    ),
)


# --- lesson 01: which ids does MAX orphan -----------------------------------------------------

ORPHAN_PRIORITIES: tuple[int, ...] = (5, 5, 1, 5, 2, 5, 5)
ORPHAN_ORDER: tuple[int, ...] = (3, 5, 1, 7, 2, 4, 6)
ORDER_IDS = tuple(range(1, len(ORPHAN_PRIORITIES) + 1))


def _check_max_orphans(answer: Any) -> str:
    said = _ids(answer, "the orphans")
    timeline = run_scenario(scenario_from_order(ORPHAN_PRIORITIES, ORPHAN_ORDER))
    want = set(timeline.iloc[-1][_MAX.orphan_ids])
    model = model_run(len(ORDER_IDS), ORPHAN_ORDER)
    if set(model["max"]["orphans"]) != want:
        raise RuntimeError(f"explorer and SQLite disagree on MAX's orphans: {model} vs {want}")
    missing, extra = sorted(want - said), sorted(said - want)
    if missing:
        i = missing[0]
        jumped = (timeline[_MAX.coverage] >= i) & timeline["statuses"].map(
            lambda s, i=i: s[i] in fr.NON_TERMINAL
        )
        k = int(jumped.to_numpy().argmax())
        step = timeline.iloc[k]
        finished = timeline.iloc[:k]["event"][timeline.iloc[:k]["op"] != "summarize"]
        after = finished.iloc[-1] if len(finished) else "the start"
        raise Wrong(
            f"id {i} is an orphan too: after '{after}' MAX coverage jumped to "
            f"{step[_MAX.coverage]} while id {i} was still {step['statuses'][i]}"
        )
    if extra:
        i = extra[0]
        if i not in ORDER_IDS:
            raise Wrong(f"there is no id {i}; the shard holds ids 1..{len(ORDER_IDS)}")
        raise Wrong(
            f"id {i} is not an orphan: it was already delivered when MAX coverage passed it, "
            "so it is in a summary"
        )
    frontier_lost = list(timeline.iloc[-1][_FRONTIER.orphan_ids])
    return f"MAX orphans {sorted(want)}; the frontier orphans {frontier_lost or 'nothing'}."


max_orphans_ex = Exercise(
    name="MAX's orphans",
    question=(
        f"Seven rows in one shard, priorities {list(ORPHAN_PRIORITIES)} (ids 1..7). They finish "
        f"in the order {list(ORPHAN_ORDER)}, and after every finish the summarizer runs under "
        "the MAX rule (cover up to MAX(delivered)). Which ids end up orphans: delivered, yet in "
        "no summary? Answer a set of ids."
    ),
    checker=_check_max_orphans,
    hints=(
        "Keep a running MAX as the rows finish. What happens to the ids it jumps over?",
        "Each time MAX jumps, the summary covers everything up to it; an id inside the jump "
        "that had not finished yet is never summarised later. Write the statuses after each "
        "finish and list the ids each jump passes.",
    ),
    solution_text=(
        "After 3: MAX 3, skips 1 and 2. After 5: MAX 5, skips 4. After 1: MAX stays 5. "
        "After 7: MAX 7, skips 6. answer = {1, 2, 4, 6}"
    ),
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
