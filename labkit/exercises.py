"""Workshop exercises, each checked against the real code: SQLite, the scenario runner, the
explorer, `WatermarkLoop` and the arrival-order checker.

In a notebook::

    from labkit.exercises import ____, frontier_sql_ex
    frontier_sql = ____          # your answer
    frontier_sql_ex.check(frontier_sql)

`part1` and `part2` list the exercises of each half of the workshop, in order.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from labkit import db
from labkit import frontier as fr
from labkit.arrivals import ScheduleError, ScheduleResult, run_schedule
from labkit.exercise_kit import BLANK, Exercise, Feedback, Wrong, ____
from labkit.explorer import model_run
from labkit.scenarios import run_scenario, scenario_from_dict, scenario_from_order
from labkit.watermark_loop import REASONS, Response, WatermarkLoop

__all__ = [
    "BLANK",
    "Exercise",
    "Feedback",
    "____",
    "apply_rule_ex",
    "closing_question_ex",
    "frontier_sql_ex",
    "lww_rewind_ex",
    "max_orphans_ex",
    "part1",
    "part2",
    "partial_index_ex",
    "predict_frontier_ex",
    "rejection_reasons_ex",
]

COMMIT = "commit"


# --- small helpers ---------------------------------------------------------------------------


def _strip_sql(sql: Any, what: str) -> str:
    """The learner's SQL without comments, string literals blanked and no trailing `;`."""
    if not isinstance(sql, str):
        raise Wrong(f"give {what} as a Python string of SQL (you gave a {type(sql).__name__})")
    text = re.sub(r"--[^\n]*|/\*.*?\*/", " ", sql, flags=re.DOTALL).strip()
    text = text.rstrip(";").strip()
    if not text:
        raise Wrong(f"{what} is empty")
    if ";" in _code_only(text):
        raise Wrong(f"{what} must be a single statement; yours has more than one")
    return text


def _code_only(text: str) -> str:
    """`text` with the contents of string literals blanked, for keyword and `?` checks."""
    return re.sub(r"'(?:[^']|'')*'", "''", text)


def _statement_error(exc: Exception, what: str) -> Wrong:
    msg = str(exc)
    if "one statement at a time" in msg:
        return Wrong(f"{what} must be a single statement; yours has more than one")
    if "not authorized" in msg:
        return Wrong(f"{what} may only read: SQLite refused it ({msg})")
    return Wrong(f"SQLite could not run {what}: {msg}")


_READ_ONLY = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}
_READ_ONLY.add(getattr(sqlite3, "SQLITE_RECURSIVE", 33))


def _read_only(action: int, *_: Any) -> int:
    """SQLite authorizer: allow reading and functions, deny every write, PRAGMA or ATTACH."""
    return sqlite3.SQLITE_OK if action in _READ_ONLY else sqlite3.SQLITE_DENY


# Learner SQL runs with a budget of SQLite VM steps (~0.3 s; a right answer needs a few
# thousand): a runaway recursive CTE is interrupted instead of hanging the kernel.
STEP_BUDGET = 5_000_000
_STEPS_PER_CALL = 1_000


@contextmanager
def _guarded(conn: sqlite3.Connection, what: str, read_only: bool = True) -> Iterator[None]:
    """Run a learner statement under the step budget (and, by default, read-only).

    An interrupted statement, a refused one or any other SQLite error becomes a `Wrong`.
    """
    calls = 0

    def over_budget() -> bool:
        nonlocal calls
        calls += 1
        return calls * _STEPS_PER_CALL > STEP_BUDGET

    conn.set_progress_handler(over_budget, _STEPS_PER_CALL)
    if read_only:
        conn.set_authorizer(_read_only)
    try:
        yield
    except (sqlite3.Error, ValueError) as exc:
        if calls * _STEPS_PER_CALL > STEP_BUDGET:
            raise Wrong(
                f"your query ran too long: SQLite stopped {what} after {STEP_BUDGET:,} steps "
                "(a recursive CTE with no stopping condition?); the frontier needs only a "
                "few index seeks"
            ) from exc
        raise _statement_error(exc, what) from exc
    finally:
        conn.set_progress_handler(None, 0)
        if read_only:
            conn.set_authorizer(None)


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


def _ranges(ids: Sequence[int]) -> str:
    return ", ".join(str(i) for i in ids) if ids else "none"


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
    text = _strip_sql(sql, "the query")
    code = _code_only(text)
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
        with _guarded(conn, "the query"):
            result = conn.execute(sql, params).fetchall()
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
        # explain() reads the schema version first, then EXPLAINs under the authorizer
        with _guarded(conn, "the query", read_only=False):
            plans.add(" | ".join(fr.explain(conn, sql, params, authorizer=_read_only)))
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
            f"{_ranges(delivered)} (failed and pending rows do not count)"
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
    text = _strip_sql(sql, "the statement")
    if not re.match(r"(?is)^\s*create\s+(unique\s+)?index\b", _code_only(text)):
        raise Wrong("the answer must be one CREATE INDEX statement")
    conn = _index_db()
    before = set(_indexes(conn))
    with _guarded(conn, "your CREATE INDEX", read_only=False):
        conn.execute(text)
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
        if got != want:  # only a broken SQLite could get here
            raise Wrong(f"with your index the frontier query answers {got} for {shard!r}")
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
    assert set(model["max"]["orphans"]) == want, "explorer and SQLite disagree"
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


# --- part two, exercise 1: predict WatermarkLoop's decisions --------------------------------

REJECT_SETUP = (
    "WatermarkLoop(conn, window=3): reserve ballots 1 and 2 (both observe watermark 0); "
    "ballot 1's response commits version 1; reserve ballots 3 and 4 (both observe 1)."
)
REJECT_RESPONSES: dict[str, Response] = {
    "A": Response(1, 0, 0, ("search",)),
    "B": Response(3, 1, 0, ("search", "mail")),
    "C": Response(4, 1, 1, ("search", "calendar")),
    "D": Response(2, 0, 0, ("search", "files")),
    "E": Response(3, 1, 1, ("search", "mail")),
}


def _normalize_reason(value: Any, label: str) -> str:
    if value is None or (isinstance(value, str) and value.lower() in ("commit", "committed")):
        return COMMIT
    if isinstance(value, str) and value in REASONS:
        return value
    raise Wrong(
        f"{label}: {value!r} is not a decision; use 'commit' (or None) or one of {list(REASONS)}"
    )


def _why(reason: str, resp: Response, head: int, inflight: dict[int, int], past: dict) -> str:
    b = resp.ballot_id
    if reason == "unknown_ballot":
        if b in past:
            return f"ballot {b} already left flight ({past[b]}); a late or repeated body is unknown"
        return f"ballot {b} was never reserved"
    if reason == "stale_watermark":
        return f"ballot {b} observed watermark {inflight[b]}, but the head has moved to {head}"
    if reason == "stale_base":
        return (
            f"its watermark still matches ({head}), but the body was computed from version "
            f"{resp.base_version}, not the head {head}: applying it would rewind"
        )
    return f"ballot {b} is in flight, observed {head} == head, and its base is the head"


def _reject_loop() -> WatermarkLoop:
    loop = WatermarkLoop(db.connect(), window=3)
    loop.reserve()
    loop.reserve()
    loop.apply(Response(1, 0, 0, ("search",)))
    loop.reserve()
    loop.reserve()
    return loop


def _check_rejections(answer: Any) -> str:
    if not isinstance(answer, Mapping):
        raise Wrong("give a dict from label to decision, e.g. {'A': 'unknown_ballot', ...}")
    missing = [k for k in REJECT_RESPONSES if k not in answer]
    if missing:
        raise Wrong(f"give a decision for every response; missing: {', '.join(missing)}")
    loop = _reject_loop()
    past: dict[int, str] = {1: "it committed version 1"}
    for label, resp in REJECT_RESPONSES.items():
        said = _normalize_reason(answer[label], label)
        head = loop.head_version()
        inflight = {b.ballot_id: b.watermark for b in loop.inflight()}
        out = loop.apply(resp)
        actual = COMMIT if out.committed else str(out.reason)
        why = _why(actual, resp, head, inflight, past)
        if said != actual:
            raise Wrong(
                f"response {label} (ballot {resp.ballot_id}, observed watermark "
                f"{resp.observed_watermark}, base {resp.base_version}): you said {said!r}, "
                f"WatermarkLoop.apply said {actual!r}: {why}"
            )
        if all(b.ballot_id != resp.ballot_id for b in loop.inflight()):
            past.setdefault(
                resp.ballot_id,
                f"it committed at {label}" if out.committed else f"fenced out at {label}",
            )
    return f"all five match; the head ended at version {loop.head_version()}, never lower."


rejection_reasons_ex = Exercise(
    name="Predict the verdicts",
    question=(
        REJECT_SETUP
        + " Then these responses arrive in order, as Response(ballot_id, observed_watermark, "
        "base_version, tools): "
        + "; ".join(
            f"{k}: ({r.ballot_id}, {r.observed_watermark}, {r.base_version})"
            for k, r in REJECT_RESPONSES.items()
        )
        + ". For each, what does apply() decide: 'commit', 'unknown_ballot', "
        "'stale_watermark' or 'stale_base'?"
    ),
    checker=_check_rejections,
    hint_text=(
        "apply() checks in this order: is the ballot still in flight? does the watermark it "
        "observed equal the head? is the body based on the head? A committed ballot leaves "
        "flight; a rejected one leaves only once the head has passed its watermark (a bad body "
        "alone does not evict the ballot that owns the watermark)."
    ),
    solution_text=(
        "A unknown_ballot (1 already committed); B stale_base (base 0, head 1); C commit "
        "(version 2); D stale_watermark (observed 0, head 2); E stale_watermark (B's bad body "
        "left ballot 3 in flight, but C moved the head to 2, past the 1 it observed: its work "
        "needs a new ballot)."
    ),
)


# --- part two, exercise 2: an arrival order that rewinds last-write-wins --------------------


def _steps(answer: Any, what: str = "the schedule") -> list[str]:
    if isinstance(answer, str) or not isinstance(answer, Sequence):
        raise Wrong(f"give {what} as a list of steps, e.g. ['deliver 1', 'timeout', ...]")
    if not answer:
        raise Wrong(f"{what} is empty")
    if len(answer) > 20:
        raise Wrong(f"{what} has {len(answer)} steps; a counterexample needs far fewer")
    return [str(s) for s in answer]


def _play(design: str, steps: list[str], **kwargs: Any) -> ScheduleResult:
    try:
        return run_schedule(design, steps, **kwargs)
    except ScheduleError as exc:
        raise Wrong(f"the {design} design cannot play that: {exc}") from exc


def _trace(res: ScheduleResult) -> str:
    return "; ".join(f"{o} -> v{h}" for o, h in zip(res.outcomes, res.heads, strict=True))


def _check_lww(answer: Any) -> str:
    steps = _steps(answer)
    lww = _play("lww", steps)
    if not lww.rewinds:
        callback = _play("callback", steps)
        extra = ""
        if callback.rewinds:
            extra = (
                " It does rewind the callback design, but lww refused the late body: it was "
                "not newer by updated_at (a duplicate keeps its first stamp)."
            )
        raise Wrong(f"under lww the reader never saw the head fall: {_trace(lww)}.{extra}")
    ballot = _play("ballot", steps)
    k = lww.first_rewind or 0
    saw = max(lww.heads[:k]) if k else 0
    return (
        f"at step {k + 1} ({steps[k]!r}) the reader saw version {lww.heads[k]} after {saw}: "
        f"the late body carried a newer updated_at. The ballot design on the same steps: "
        f"{_trace(ballot)}."
    )


lww_rewind_ex = Exercise(
    name="Fool last-write-wins",
    question=(
        "Find a schedule (see labkit.arrivals.run_schedule: 'deliver N', 'stale N', "
        "'timeout [N]', 'crash') under which the 'lww' design rewinds the catalog: an "
        "independent reader sees the head version fall. Requests are numbered from 1; "
        "updated_at is stamped when the planner produces a body."
    ),
    checker=_check_lww,
    hint_text=(
        "A duplicate keeps its first stamp, so duplicates alone do not fool lww. You need a "
        "body that is old (computed from an early version) but produced late: let the loop "
        "give up on request 1 first."
    ),
    solution_text=(
        "['timeout', 'deliver 2', 'deliver 3', 'deliver 1']: the loop gives up on 1 and sends "
        "2; 2 and 3 commit versions 1 and 2; request 1's body, produced last, has the newest "
        "updated_at and writes version 1 again."
    ),
)


# --- part two, exercise 3: seed two's closing question --------------------------------------

CLOSING = {"window": 2, "ticks": 2, "first_request": 12}
DECISIONS = ("reject", "replay", "compensate")


def _delivered_after(res: ScheduleResult, rid: int) -> tuple[int | None, set[int]]:
    """The step at which request `rid` committed, and the requests delivered after it."""
    done = next((k for k, o in enumerate(res.outcomes) if o == f"{rid}:commit"), None)
    if done is None:
        return None, set()
    after = {int(o.split(":")[0]) for o in res.outcomes[done + 1 :] if o.split(":")[0].isdigit()}
    return done, after


def _check_closing(answer: Any) -> str:
    if isinstance(answer, Mapping):
        if "schedule" not in answer or "decision" not in answer:
            raise Wrong("give {'schedule': [...], 'decision': 'reject' | 'replay' | 'compensate'}")
        schedule, decision = answer["schedule"], answer["decision"]
    elif isinstance(answer, tuple | list) and len(answer) == 2 and isinstance(answer[1], str):
        schedule, decision = answer
    else:
        raise Wrong("give {'schedule': [...], 'decision': 'reject' | 'replay' | 'compensate'}")
    steps = _steps(schedule)
    naive = {d: _play(d, steps, **CLOSING) for d in ("callback", "lww")}
    done, after = _delivered_after(naive["callback"], 13)
    if done is None:
        raise Wrong(
            "request 13 never committed in your schedule; the question starts after 13 "
            "committed (the loop gave up on 12 and sent 13): begin with 'timeout', 'deliver 13'"
        )
    if not {12, 14} <= after:
        lacking = sorted({12, 14} - after)
        raise Wrong(
            f"after 13 committed, your schedule never delivers {_ranges(lacking)}; both 12 and "
            "14 must arrive (again) after that"
        )
    broken = {d: r for d, r in naive.items() if r.rewinds}
    if not broken:
        raise Wrong(
            "no naive design rewinds on that order: "
            + " | ".join(f"{d}: {_trace(r)}" for d, r in naive.items())
            + ". Which body is the oldest, and when must it land?"
        )
    safe = _play("ballot", steps, settle=True, **CLOSING)
    if safe.rewinds:  # the ballot invariant; a failure here is a labkit bug
        raise Wrong(f"the ballot design rewound: {_trace(safe)}")
    if not isinstance(decision, str) or decision.strip().lower() not in DECISIONS:
        raise Wrong(f"the decision must be one of {list(DECISIONS)}, not {decision!r}")
    decision = decision.strip().lower()
    if decision == "compensate":
        raise Wrong(
            "there is nothing to compensate: under the ballot design the late bodies never "
            f"touched the catalog ({_trace(safe)}). Compensation is for a write already made."
        )
    if decision == "replay":
        raise Wrong(
            "the late responses themselves must be rejected first, and replaying them is not "
            "needed here: 13 already replayed 12's tick and 14 committed, so re-sending would "
            "redo finished work. A replay is a NEW ballot, only for work still wanted."
        )
    name, res = next(iter(broken.items()))
    k = res.first_rewind or 0
    return (
        f"{name} rewound at step {k + 1} ({steps[k]!r}); the ballot design: {_trace(safe)}. "
        "Reject, and leave the head alone."
    )


closing_question_ex = Exercise(
    name="Seed two's closing question",
    question=(
        "Tick 12 is in flight; the loop gives up on it and tick 13 commits; then 12 and 14 "
        "both arrive (and may arrive again). Give a schedule (requests numbered from 12, "
        "window 2, two ticks) that rewinds a naive design ('callback' or 'lww'), and the "
        "decision the safe loop should take for those late responses: 'reject', 'replay' or "
        "'compensate'. Answer {'schedule': [...], 'decision': ...}."
    ),
    checker=_check_closing,
    hint_text=(
        "Start with 'timeout', 'deliver 13'. Which body is oldest? If it lands after a newer "
        "version, the callback writes it anyway. For the decision: did the safe loop ever "
        "write the late body?"
    ),
    solution_text=(
        "{'schedule': ['timeout', 'deliver 13', 'deliver 14', 'deliver 12', 'deliver 14'], "
        "'decision': 'reject'}: callback and lww write 12's version-0 body after 14 committed "
        "version 2, so the head falls to 1; the ballot loop answers unknown_ballot for 12 and "
        "for 14's duplicate, and its head stays at 2."
    ),
)


# --- part two, exercise 4: fix a broken apply rule ------------------------------------------

RULE_SEEDS = 40
RULE_STEPS = 30


def _random_response(
    rng: random.Random, loop: WatermarkLoop, known: list[int], next_id: int
) -> Response:
    head = loop.head_version()
    inflight = {b.ballot_id: b.watermark for b in loop.inflight()}
    pick = rng.random()
    if inflight and pick < 0.6:
        b = rng.choice(sorted(inflight))
    elif known and pick < 0.85:
        b = rng.choice(known)
    else:
        b = next_id + rng.randint(0, 3)
    observed = inflight.get(b, head) if rng.random() < 0.8 else max(0, head - rng.randint(0, 2))
    base = head if rng.random() < 0.7 else max(0, head - rng.randint(1, 2))
    return Response(b, observed, base, (f"tool-{b}-{base}",))


def _rule_cases(seed: int) -> Iterable[tuple[int, dict[int, int], Response, str]]:
    """Drive a real WatermarkLoop at random; yield (head, inflight, response, real verdict)."""
    rng = random.Random(seed)
    loop = WatermarkLoop(db.connect(), rng.randint(1, 3))
    known: list[int] = []
    for _ in range(RULE_STEPS):
        roll = rng.random()
        if roll < 0.35 and len(loop.inflight()) < loop.window:
            known.append(loop.reserve().ballot_id)
        elif roll < 0.4 and loop.inflight():
            loop.abandon(rng.choice(loop.inflight()).ballot_id)
        else:
            head = loop.head_version()
            inflight = {b.ballot_id: b.watermark for b in loop.inflight()}
            resp = _random_response(rng, loop, known, (max(known) if known else 0) + 1)
            out = loop.apply(resp)
            yield head, inflight, resp, COMMIT if out.committed else str(out.reason)


def _check_rule(rule: Any) -> str:
    if not callable(rule):
        raise Wrong(
            f"give a function decide(inflight, head, response), not a {type(rule).__name__}"
        )
    seen: dict[str, int] = {}
    for seed in range(RULE_SEEDS):
        for head, inflight, resp, actual in _rule_cases(seed):
            state = (
                f"with head {head} and ballots in flight {inflight or '{}'} (ballot: watermark "
                f"it observed), the response (ballot {resp.ballot_id}, observed watermark "
                f"{resp.observed_watermark}, base {resp.base_version})"
            )
            try:
                said = rule(dict(inflight), head, resp)
            except Exception as exc:
                raise Wrong(f"{state} made your rule raise {type(exc).__name__}: {exc}") from exc
            said = _normalize_reason(said, "your rule's answer")
            if said != actual:
                raise Wrong(
                    f"{state}: your rule said {said!r}, WatermarkLoop.apply said {actual!r}"
                )
            seen[actual] = seen.get(actual, 0) + 1
    counts = ", ".join(f"{k} {v}" for k, v in sorted(seen.items()))
    return (
        f"your rule agreed with WatermarkLoop.apply on {sum(seen.values())} responses ({counts})."
    )


apply_rule_ex = Exercise(
    name="Fix the apply rule",
    question=(
        "This rule, in the spirit of seed two's sketch, accepts anything whose proposed head is "
        "not behind the current one:\n"
        "    def decide(inflight, head, response):\n"
        "        if response.base_version + 1 < head:\n"
        "            return 'stale_base'\n"
        "        return None\n"
        "Fix it. `inflight` maps each in-flight ballot id to the watermark it observed, `head` "
        "is the committed version. Return None to commit, else 'unknown_ballot', "
        "'stale_watermark' or 'stale_base'. It is checked against the real WatermarkLoop on "
        "random runs."
    ),
    checker=_check_rule,
    hint_text=(
        "Three questions, in this order: is response.ballot_id in `inflight`? Did the ballot "
        "observe the current head, and does the response carry that same watermark? Is the "
        "body based on the head (not head - 1, and not head + anything)?"
    ),
    solution_text=(
        "def decide(inflight, head, response):\n"
        "    if response.ballot_id not in inflight:\n"
        "        return 'unknown_ballot'\n"
        "    observed = inflight[response.ballot_id]\n"
        "    if observed != head or response.observed_watermark != observed:\n"
        "        return 'stale_watermark'\n"
        "    if response.base_version != head:\n"
        "        return 'stale_base'\n"
        "    return None"
    ),
)


part1: list[Exercise] = [predict_frontier_ex, frontier_sql_ex, partial_index_ex, max_orphans_ex]
part2: list[Exercise] = [rejection_reasons_ex, lww_rewind_ex, closing_question_ex, apply_rule_ex]
