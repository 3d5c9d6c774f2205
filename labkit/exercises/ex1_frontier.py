"""Exercise set one, the gap-free frontier (notebooks 01-03): predict it, write it as one SQL
query, index it, and count what the MAX rule orphans. Every check runs the real thing: SQLite,
`labkit.frontier`, the scenario runner and the explorer's model.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import labkit.exercises.sandbox as sandbox
from labkit import frontier as fr
from labkit.exercises.kit import Exercise, Wrong, listing
from labkit.explorer import model_run
from labkit.scenarios import run_scenario, scenario_from_dict, scenario_from_order


def _ids(answer: Any, what: str) -> set[int]:
    """A learner's collection of row ids as a set of ints."""
    if isinstance(answer, int | str) or not isinstance(answer, Iterable):
        raise Wrong(f"give {what} as a list or set of ids, e.g. [2, 5] (or [] for none)")
    out = set()
    for item in answer:
        if isinstance(item, bool) or not isinstance(item, int):
            raise Wrong(f"{item!r} is not an id; {what} must hold whole numbers")
        out.add(int(item))
    return out


# --- part one, exercise 1: the frontier as one SQL query ------------------------------------

ODD_KEY = 'o\'brien "q" — ünï 🚀'


def _build_frontier_cases(seed: int = 0) -> tuple[sqlite3.Connection, list[tuple[str, str, int]]]:
    """A log with hand-made edge-case shards and random ones; (shard, label, base) to check."""
    conn = fr.connect()
    rng = random.Random(seed)
    steps: list[tuple[str, str]] = []  # (shard, final status), in id order

    def rows(shard: str, statuses: Iterable[str]) -> None:
        steps.extend((shard, s) for s in statuses)

    rows("done", ["delivered", "failed", "delivered"])
    rows("tail", ["delivered", "delivered", "failed", "failed"])
    rows("late", ["pending", "delivered", "delivered", "running", "delivered"])
    rows(ODD_KEY, ["delivered", "pending", "delivered"])
    # interleaved shards a and b: ids alternate between them
    for i in range(8):
        steps.append(("a" if i % 2 else "b", rng.choice(fr.STATUSES) if i > 1 else "delivered"))
    rows("tail", ["pending"])  # after the dead-letter tail, a fresh pending row
    for _ in range(60):
        steps.append((f"r{rng.randrange(4)}", rng.choice(fr.STATUSES)))
    for shard, status in steps:
        row_id = fr.enqueue(conn, shard, rng.randint(1, 5))
        if status == "running":
            fr.mark_running(conn, row_id)
        elif status == "delivered":
            fr.mark_delivered(conn, row_id)
        elif status == "failed":
            fr.mark_failed(conn, row_id)
    conn.commit()
    labels = {  # most telling first: the MAX rule fails on "late" at base 0
        "late": "a small pending id below delivered ones",
        "done": "all terminal",
        "tail": "dead-letter tail, then a pending row",
        "empty": "empty shard",
        ODD_KEY: "a key with quotes and unicode",
        "a": "interleaved with shard 'b'",
        "b": "interleaved with shard 'a'",
    }
    cases: list[tuple[str, str, int]] = []
    last_id = len(steps)
    for shard, label in labels.items():
        ids = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM conversations WHERE channel_key = ? ORDER BY id", (shard,)
            )
        ]
        bases = sorted({0, *(ids[:1]), *(ids[len(ids) // 2 : len(ids) // 2 + 1]), last_id + 5})
        cases.extend((shard, label, b) for b in bases)
    for k in range(4):
        shard = f"r{k}"
        for _ in range(3):
            cases.append((shard, "random shard", rng.randrange(0, last_id)))
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
    if got > want:
        blocker = next(((i, s) for i, s in rows if base < i <= got and s in fr.NON_TERMINAL), None)
        if blocker:
            return f"it passed the {blocker[1]} id {blocker[0]}"
        return f"no row of this shard has an id in ({want}, {got}]; the frontier never runs ahead"
    if got < base:
        return "it went below the coverage base; coverage never moves back"
    failed = [i for i, s in rows if got < i <= want and s == "failed"]
    if failed:
        return f"id {failed[0]} is failed, and failed is terminal: it must not hold the frontier"
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
    plans = set()
    for shard, label, base in cases:
        params = {"shard": shard, "base": base}
        result = sandbox.run(conn, sql, params)
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
        want = fr.delivered_frontier(conn, shard, base)
        rows = _shard_rows(conn, shard, base)
        if got != want:
            why = _explain_frontier_miss(rows, base, got, want)
            raise Wrong(
                f"on shard {shard!r} ({label}) with base {base} your query returned {got}, "
                f"the frontier is {want}: {why}"
            )
        # the query just ran, so its EXPLAIN can only fail through a labkit bug: not guarded
        plans.add(" | ".join(fr.explain(conn, sql, params, authorizer=sandbox.read_only)))
    scans = [p for p in plans if "SCAN conversations" in p]
    note = (
        f"it matched delivered_frontier on {len(cases)} (shard, base) cases, edge cases included."
    )
    if scans:
        note += f" One thing to tune: SQLite plans a full scan somewhere ({scans[0]})."
    return note


frontier_sql_ex = Exercise(
    name="Frontier in one query",
    question=(
        "Write the gap-free frontier as ONE parameterised SELECT over `conversations`, using the "
        "named parameters :shard and :base. It returns one value: one less than the smallest "
        "pending/running id above :base; if none, the largest id above :base; if no rows "
        "above :base, :base itself."
    ),
    checker=_check_frontier_sql,
    hint_text=(
        "COALESCE(a, b, c) returns its first non-NULL argument. Make a = the smallest open id "
        "above :base minus 1, b = the largest id above :base, c = :base. Scalar subqueries "
        "(SELECT ... ) can be arguments. Filter every subquery on channel_key = :shard."
    ),
    solution_text=(
        "SELECT COALESCE(\n"
        "  (SELECT MIN(id) - 1 FROM conversations\n"
        "    WHERE channel_key = :shard AND id > :base AND status IN ('pending','running')),\n"
        "  (SELECT MAX(id) FROM conversations WHERE channel_key = :shard AND id > :base),\n"
        "  :base)"
    ),
)


# --- part one, exercise 2: predict the frontier and MAX after some deliveries ---------------

PREDICT_EVENTS: tuple[tuple[str, int], ...] = (
    ("deliver", 3),
    ("deliver", 5),
    ("deliver", 1),
    ("fail", 2),
)


def _predict_timeline() -> Any:
    data = {
        "name": "predict",
        "title": "Seed scenario, partly delivered",
        "description": "The seed's six rows; 3, 5 and 1 delivered, 2 dead-lettered.",
        "messages": [{"shard": "main", "priority": 1 if i == 3 else 5} for i in range(1, 7)],
        "events": [{"op": op, "id": i} for op, i in PREDICT_EVENTS],
    }
    return run_scenario(scenario_from_dict(data, "<predict_frontier_ex>")).iloc[-1]


def _number(answer: Mapping[str, Any], keys: Sequence[str]) -> int | None:
    for key in keys:
        if key in answer:
            value = answer[key]
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise Wrong(f"{key} must be a whole number, not {value!r}")
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
        raise Wrong(f"you said the frontier is {frontier}; the log says {want_f}: {why}")
    if mx != want_m:
        delivered = [i for i, s in statuses.items() if s == "delivered"]
        raise Wrong(
            f"you said MAX(delivered) is {mx}; it is {want_m}: the delivered ids are "
            f"{listing(delivered)} (failed and pending rows do not count)"
        )
    return (
        f"frontier {want_f}, MAX {want_m}. A summary up to MAX would pass the pending id "
        f"{want_f + 1}."
    )


predict_frontier_ex = Exercise(
    name="Predict the frontier",
    question=(
        "The seed scenario: six rows in shard 'main', id 3 has priority 1, the rest 5. Then: "
        + ", ".join(f"{op} id {i}" for op, i in PREDICT_EVENTS)
        + ". With coverage base 0, what are the frontier and MAX(id) WHERE status='delivered'? "
        "Answer {'frontier': ..., 'max_watermark': ...}."
    ),
    checker=_check_predict,
    hint_text=(
        "Write the six statuses in id order. The frontier stops just before the first row that "
        "is pending or running; failed counts as done. MAX only looks at delivered rows."
    ),
    solution_text=(
        "Statuses: 1 delivered, 2 failed, 3 delivered, 4 pending, 5 delivered, 6 pending. "
        "Frontier = 4 - 1 = 3; MAX(delivered) = 5. answer = {'frontier': 3, 'max_watermark': 5}"
    ),
)


# --- part one, exercise 3: the index that makes the frontier query a SEARCH -----------------

INDEX_ROWS = 3000


def _index_db() -> sqlite3.Connection:
    """A log with lots of settled history, few open rows, and neither of the schema's indexes."""
    conn = fr.connect()
    rng = random.Random(3)
    for i in range(1, INDEX_ROWS + 1):
        conn.execute(
            "INSERT INTO conversations (channel_key, direction, status, priority) "
            "VALUES (?, 'inbound', ?, 5)",
            (rng.choice("abc"), "pending" if i % 500 == 0 else "delivered"),
        )
    conn.execute("DROP INDEX idx_conv_active")
    conn.execute("DROP INDEX idx_conv_shard_id")
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
    plan = " | ".join(fr.explain(conn, fr.FRONTIER_SQL, ("a", 0)))
    if f"INDEX {name} " not in plan + " ":
        extra = ""
        if partial:
            extra = (
                ". A partial index is used only if the query's WHERE implies the index's WHERE; "
                "the query says status IN ('pending','running')"
            )
        raise Wrong(f"SQLite does not use {name}: the plan is still {plan!r}{extra}")
    if not plan.startswith("SEARCH"):
        raise Wrong(f"the plan uses {name} but scans it: {plan!r}; lead with channel_key")
    if "channel_key=?" not in plan:
        raise Wrong(
            f"the plan is {plan!r}: it does not seek the shard, so it reads open rows of every "
            "shard; lead the index with channel_key"
        )
    if not re.search(r"\bid>\?", plan):
        raise Wrong(
            f"the plan is {plan!r}: it seeks the shard but then walks all of its rows; "
            "put id right after channel_key so the seek starts above the base"
        )
    if not partial:
        raise Wrong(
            f"the plan is a SEARCH ({plan!r}), but {name} holds all {INDEX_ROWS} rows, settled "
            "history included, and grows forever; make it partial with "
            "WHERE status IN ('pending','running') so it holds only open rows"
        )
    entries = conn.execute(
        "SELECT COUNT(*) FROM conversations WHERE status IN ('pending','running')"
    ).fetchone()[0]
    for shard in "abc":
        want = conn.execute(
            "SELECT MIN(id) FROM conversations NOT INDEXED "
            "WHERE channel_key = ? AND status IN ('pending','running')",
            (shard,),
        ).fetchone()[0]
        got = conn.execute(fr.FRONTIER_SQL, (shard, 0)).fetchone()[0]
        if got != want:  # an index never changes an answer: this is a bug, not the learner's
            raise RuntimeError(f"with index {name} FRONTIER_SQL answers {got} for {shard!r}")
    return f"plan {plan!r}; the index holds {entries} open rows out of {INDEX_ROWS}."


partial_index_ex = Exercise(
    name="Index for the frontier",
    question=(
        "On a log with both indexes dropped, the frontier query (labkit.frontier.FRONTIER_SQL) "
        "plans as 'SEARCH conversations USING INTEGER PRIMARY KEY (rowid>?)': it reads every "
        "row above the base, of every shard. Write the CREATE INDEX that makes it "
        "'SEARCH conversations USING INDEX <yours> (channel_key=? AND id>?)' and holds open "
        "rows only."
    ),
    checker=_check_partial_index,
    hint_text=(
        "Column order follows the query: equality first (channel_key), then the range (id). "
        "CREATE INDEX ... ON conversations(...) WHERE ... makes a partial index; its WHERE "
        "must be implied by the query's WHERE, word for word is safest."
    ),
    solution_text=(
        "CREATE INDEX idx_open ON conversations(channel_key, id) "
        "WHERE status IN ('pending','running')"
    ),
)


# --- part one, exercise 4: which ids does MAX orphan ----------------------------------------

ORPHAN_PRIORITIES: tuple[int, ...] = (5, 5, 1, 5, 2, 5, 5)
ORPHAN_ORDER: tuple[int, ...] = (3, 5, 1, 7, 2, 4, 6)
ORDER_IDS = tuple(range(1, len(ORPHAN_PRIORITIES) + 1))


def _check_max_orphans(answer: Any) -> str:
    said = _ids(answer, "the orphans")
    timeline = run_scenario(scenario_from_order(ORPHAN_PRIORITIES, ORPHAN_ORDER))
    want = set(timeline.iloc[-1]["orphan_ids_max"])
    model = model_run(len(ORDER_IDS), ORPHAN_ORDER)
    if set(model["max"]["orphans"]) != want:
        raise RuntimeError(f"explorer and SQLite disagree on MAX's orphans: {model} vs {want}")
    missing, extra = sorted(want - said), sorted(said - want)
    if missing:
        i = missing[0]
        jumped = (timeline["coverage_max"] >= i) & timeline["statuses"].map(
            lambda s, i=i: s[i] in fr.NON_TERMINAL
        )
        k = int(jumped.to_numpy().argmax())
        step = timeline.iloc[k]
        finished = timeline.iloc[:k]["event"][timeline.iloc[:k]["op"] != "summarize"]
        after = finished.iloc[-1] if len(finished) else "the start"
        raise Wrong(
            f"id {i} is an orphan too: after '{after}' MAX coverage jumped to "
            f"{step['coverage_max']} while id {i} was still {step['statuses'][i]}"
        )
    if extra:
        i = extra[0]
        if i not in ORDER_IDS:
            raise Wrong(f"there is no id {i}; the shard holds ids 1..{len(ORDER_IDS)}")
        raise Wrong(
            f"id {i} is not an orphan: it was already delivered when MAX coverage passed it, "
            "so it is in a summary"
        )
    frontier_lost = list(timeline.iloc[-1]["orphan_ids_frontier"])
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
    hint_text=(
        "Track MAX after each delivery. Whenever it jumps, the summary covers everything up to "
        "it; any id in the jump that is not yet delivered is skipped for good."
    ),
    solution_text=(
        "After 3: MAX 3, skips 1 and 2. After 5: MAX 5, skips 4. After 1: MAX stays 5. "
        "After 7: MAX 7, skips 6. answer = {1, 2, 4, 6}"
    ),
)


exercises: list[Exercise] = [
    predict_frontier_ex,
    frontier_sql_ex,
    partial_index_ex,
    max_orphans_ex,
]
