"""Part three's exercises on a real PostgreSQL server: for each, typical wrong answers get
feedback naming the mistake's cause and never the expected answer; other correct forms pass;
the guarded-write check catches lost updates by racing real connections."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from labkit import exercises as exs
from labkit.exercises import ____, catalog_pg, frontier_pg
from labkit.exercises.kit import Exercise, Wrong
from labkit.exercises.sandboxes import pg as pg_sandbox

HORIZON = "SELECT pg_snapshot_xmin(pg_current_snapshot()) >= CAST(:xact AS xid8)"
GUARDED = (
    "UPDATE naive_catalog SET version = :seen + 1, tools = :tools WHERE id = 1 AND version = :seen"
)
TENANT = (
    "UPDATE tenant_catalog SET version = :seen + 1, tools = :tools "
    "WHERE tenant = :tenant AND version = :seen"
)
ORPHANS = {"P": {1}, "Q": set()}
# What feedback on a wrong answer must never show: each exercise's expected answer.
SECRETS: dict[str, tuple[str, ...]] = {
    "interleaving_ex": ("'P': {1}", "P orphans 1", "id 1 is orphaned", "orphaned: 1", "'Q': set()"),
    "condition_ex": ("pg_snapshot_xmin(pg_current_snapshot()) >=", ">= CAST(:xact"),
    "guarded_write_ex": ("AND version = :seen", "version = :seen AND"),
    "tenant_write_ex": ("tenant = :tenant",),
}
NAME = {id(getattr(exs, name)): name for name in SECRETS}


@pytest.fixture(autouse=True)
def no_server_unless_marked(request: pytest.FixtureRequest, monkeypatch) -> None:
    """A test not marked `postgres` must never reach a server: a check that would ask for one
    fails it (conftest's guard cannot see `shared_server`, which the checks use)."""
    if request.node.get_closest_marker("postgres") is None:

        def no_server() -> str:
            raise AssertionError("this answer reached the server; it must be refused before")

        monkeypatch.setattr(pg_sandbox, "server_dsn", no_server)


@pytest.fixture
def on_server(quiet_pg_dsn: str) -> Iterator[str]:
    """The checks run on the session's server (one server for every test here), never on one
    other test runs share: the condition check refuses to judge while their transactions run."""
    pg_sandbox.use_server(quiet_pg_dsn)
    yield quiet_pg_dsn
    pg_sandbox.use_server(None)


def wrong(name: str, answer: Any, *needles: str) -> str:
    """`answer` is refused, its feedback names every needle and none of the answer's secrets."""
    fb = getattr(exs, name).check(answer)
    assert fb.status == "incorrect", fb
    for needle in needles:
        assert needle in fb.message, (needle, fb.message)
    for secret in SECRETS[name]:
        assert secret not in fb.message, (secret, fb.message)
    assert "Traceback" not in fb.message
    return fb.message


# --- every exercise: blank, junk, the hint ladder, the question's shape ------------------------


@pytest.mark.parametrize("ex", exs.part3, ids=lambda e: e.name)
def test_placeholder_is_not_attempted_without_a_server(ex: Exercise) -> None:
    fb = ex.check(____)
    assert fb.status == "not_attempted" and ".hint(3)" in fb.message


@pytest.mark.parametrize("ex", exs.part3, ids=lambda e: e.name)
@pytest.mark.parametrize("junk", [None, 42, 3.5, "", object(), [object()], {"x": 1}])
def test_junk_is_refused_before_any_server_is_asked(ex: Exercise, junk: Any) -> None:
    fb = ex.check(junk)  # `no_server_unless_marked` fails it if the server is asked
    assert fb.status == "incorrect" and fb.message.startswith(ex.name), fb


@pytest.mark.parametrize("ex", exs.part3, ids=lambda e: e.name)
def test_three_hints_climb_to_a_gap_and_only_the_solution_answers(ex: Exercise) -> None:
    hints = [ex.hint(k).message for k in (1, 2, 3)]
    assert [h[:8] for h in hints] == ["(1 of 3)", "(2 of 3)", "(3 of 3)"]
    assert len(set(hints)) == 3 and all(len(h) > 60 for h in hints)
    assert "____" in hints[2]  # the near-answer leaves a gap to fill
    assert "3 hints" in ex.hint(4).message
    solution = ex.solution().message
    assert solution.startswith("(the answer)")
    secret = SECRETS[NAME[id(ex)]][0]
    assert secret in solution
    assert not any(secret in h for h in hints), "a hint gives the answer away"


def test_the_last_hints_leave_a_real_gap() -> None:
    """The review found hint 3 one trivial step from the answer: for the orphans it named the
    ids A holds and where the checkpoint jumps; for the tenant write it left only the tenant
    condition to fill in beside the whole guard."""
    orphans = exs.interleaving_ex.hint(3).message
    assert "ids 1 and 4" not in orphans and "largest visible id" not in orphans
    tenant = exs.tenant_write_ex.hint(3).message
    assert tenant.count("____") == 2 and "AND version = :seen" not in tenant


@pytest.mark.parametrize("ex", exs.part3, ids=lambda e: e.name)
def test_the_question_states_the_answers_shape_with_other_numbers(ex: Exercise) -> None:
    assert "shaped like" in ex.question
    for secret in SECRETS[NAME[id(ex)]]:
        assert secret not in ex.question


def test_part_three_is_lessons_seven_and_eight_in_order() -> None:
    assert exs.part3 == [*exs.by_lesson[7], *exs.by_lesson[8]]


# --- 07, exercise 1: predict the orphans ------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize(
    "answer",
    [
        ORPHANS,
        {"P": [1], "Q": []},
        {"p": (np.int64(1),), "q": frozenset()},
        {"P": [1.0], "Q": set()},  # an integral float means the id
    ],
)
def test_orphans_accept_every_correct_form(on_server: str, answer: Any) -> None:
    fb = exs.interleaving_ex.check(answer)
    assert fb.passed, fb
    assert "P orphans 1" in fb.message and "Q orphans nothing" in fb.message
    assert "the xmin horizon wait, which summarized alongside, orphaned no row in either" in (
        fb.message
    )


# What feedback on a wrong prediction says, by the idea it points at.
PASSED_LATER = "that summarize's checkpoint stopped below it"
NEVER_HIDDEN = "committed, so visible, at every summarize"
LEFT_OUT = "at least one orphan is missing"


def names_nothing(message: str) -> None:
    """A message about a wrong prediction names no id and no interleaving: a blind learner
    could otherwise fix one part at a time, or drop the id it names."""
    text = message.split(": ", 1)[1]
    assert not re.search(r"\d", text), message
    assert not re.search(r"\b[PQ]\b", text), message


@pytest.mark.postgres
def test_deleting_what_is_named_does_not_find_the_orphans(on_server: str) -> None:
    """The review's case: start with every id in both interleavings and drop the id each
    message names; that reached the answer in 6 tries. No message names an id, so the loop
    stalls at once."""
    said: dict[str, set[int]] = {"P": {1, 2, 3, 4}, "Q": {1, 2}}
    fb = exs.interleaving_ex.check(said)
    assert not fb.passed and NEVER_HIDDEN in fb.message, fb
    names_nothing(fb.message)


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        ({"P": {1, 4}, "Q": set()}, PASSED_LATER),  # 4 was hidden at step 7, passed at 10
        ({"P": {1}, "Q": {1}}, NEVER_HIDDEN),  # Q: A commits before the first summarize
        ({"P": {1, 2, 3}, "Q": set()}, NEVER_HIDDEN),
        ({"P": {1, 2, 3, 4}, "Q": {1, 2}}, NEVER_HIDDEN),
        ({"P": {2, 3}, "Q": set()}, NEVER_HIDDEN),  # and one missing: named ones come first
        ({"P": {1}, "Q": {2}}, NEVER_HIDDEN),  # P right, Q wrong: the message says neither
        ({"P": set(), "Q": set()}, LEFT_OUT),
        ({"P": set(), "Q": {1}}, NEVER_HIDDEN),
    ],
)
def test_orphans_wrong_predictions_name_the_idea_not_the_ids(
    on_server: str, answer: Any, needle: str
) -> None:
    names_nothing(wrong("interleaving_ex", answer, needle))


@pytest.mark.postgres
def test_a_left_out_orphan_says_whether_the_named_ids_are_right(on_server: str) -> None:
    fb = wrong("interleaving_ex", {"P": set(), "Q": set()}, LEFT_OUT)
    assert "every id you named is one" not in fb
    ex = exs.interleaving_ex
    truth: dict[str, set[int]] = {}
    while not any(len(ids) >= 2 for ids in truth.values()):  # a variant with two orphans
        ex.new_variant()
        scripts = frontier_pg.current_scripts()
        truth = {k: set(frontier_pg.step_model(s).orphans) for k, s in scripts.items()}
    part = {k: set(sorted(ids)[1:]) for k, ids in truth.items()}  # each without its smallest
    names_nothing(wrong("interleaving_ex", part, LEFT_OUT, "every id you named is one"))


def test_an_id_that_never_exists_is_named_with_the_range() -> None:  # before any server
    wrong("interleaving_ex", {"P": {7}, "Q": set()}, "only takes ids 1 to 4", "7 never exists")


@pytest.mark.postgres
def test_each_variants_worked_answer_passes_and_a_wrong_one_fails(on_server: str) -> None:
    """Variants 1-4: the worked answer passes on the server (so the step model that drew the
    variant agrees with the run); one id too many, or one too few, fails without naming it;
    "then run it" plays the variant's interleavings."""
    ex = exs.interleaving_ex
    for _ in range(4):
        ex.new_variant()
        answer = eval(ex.solution().message.rsplit("answer = ", 1)[1])  # noqa: S307 - ours
        assert ex.check(answer).passed, (ex.current().question, answer)
        scripts = frontier_pg.current_scripts()
        label = next(k for k in scripts if answer[k]) if any(answer.values()) else "P"
        taken = sum(a == "insert" for _, a in scripts[label])
        extra = min(set(range(1, taken + 1)) - answer[label])  # the last id is never an orphan
        for said in ({**answer, label: answer[label] | {extra}}, {**answer, label: set()}):
            if said == answer:
                continue
            fb = ex.check(said)
            assert fb.status == "incorrect", (said, fb)
            names_nothing(fb.message)
            ex.wrong_streak = 0
        assert run_plays(label, scripts[label], answer[label])


@pytest.mark.postgres
def test_a_variant_runs_on_the_server_at_its_first_check_only(
    on_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next checks of a variant read the runs its first check played on this server; a
    fresh variant plays its own."""
    ex = exs.interleaving_ex
    ex.new_variant()
    frontier_pg._played.cache_clear()  # earlier tests played these variants
    played: list[Any] = []
    real = frontier_pg._run
    monkeypatch.setattr(frontier_pg, "_run", lambda s, dsn=None: played.append(s) or real(s, dsn))
    first = ex.check({"P": set(), "Q": set()})
    assert len(played) == 2
    ex.wrong_streak = 0
    again = ex.check({"P": set(), "Q": set()})
    assert len(played) == 2 and again.message == first.message
    ex.new_variant()
    ex.check({"P": set(), "Q": set()})
    assert played[2:] == list(frontier_pg.current_scripts().values())


def run_plays(label: str, script: Any, orphans: set[int]) -> bool:
    state = frontier_pg.run_script(label)
    return len(state.events) == len(script) and set(state.orphans["id_order"]) == orphans


def test_variants_are_valid_interleavings_with_varied_orphans() -> None:
    """Each drawn interleaving is a valid script (a writer inserts before it commits and
    commits by the end; two summarize steps or more, the last after every commit; at most
    six ids); across variants some interleavings orphan nothing and others up to three ids."""
    ex = exs.interleaving_ex
    seen: set[tuple[int, ...]] = set()
    for _ in range(30):
        ex.new_variant()
        scripts = frontier_pg.current_scripts()
        assert scripts["P"] != scripts["Q"] and set(scripts) == {"P", "Q"}
        for script in scripts.values():
            assert_valid(script)
            seen.add(frontier_pg.step_model(script).orphans)
        assert frontier_pg.script_text(scripts["P"]) in ex.current().question
    assert () in seen and sum(1 for s in seen if s) >= 6 and max(map(len, seen)) <= 3


def assert_valid(script: Any) -> None:
    open_: dict[str, int] = {"A": 0, "B": 0}
    for actor, action in script:
        if action == "insert":
            open_[actor] += 1
        elif action == "commit":
            assert open_[actor] > 0, script  # it inserted before it commits
            open_[actor] = 0
        else:
            assert actor == "worker" and action in ("deliver", "summarize"), script
    assert open_ == {"A": 0, "B": 0}, script  # every writer committed by the end
    steps = [a for _, a in script]
    last_commit = max(k for k, a in enumerate(steps) if a == "commit")
    assert steps.count("summarize") >= 2 and steps[-1] == "summarize", script
    assert last_commit < len(steps) - 1 and steps.count("insert") <= 6, script


@pytest.mark.parametrize(
    ("answer", "needles"),
    [
        ({"P": {"1"}, "Q": set()}, ("must be a number, not the text", "drop the quotes")),
        ({"P": [1.5], "Q": set()}, ("whole number", "1.5 is not")),
        ({"P": [True], "Q": set()}, ("bool",)),
        ({"P": 1, "Q": set()}, ("give a set of row ids", "is a int")),
        ({"P": "1", "Q": set()}, ("give a set of row ids", "is a str")),
        ({"P": {1}}, ("missing: Q",)),
        ({"P": {1}, "Q": {}}, ("empty dict", "set()")),
        ({"P": {1}, "Q": set(), "R": set()}, ("not R",)),
        ({"P": {1}, "p": {1}, "Q": set()}, ("label P is given twice",)),
        ([{1}, set()], ("give a dict", "list")),
    ],
)
def test_orphans_answers_of_the_wrong_shape_say_so(answer: Any, needles: tuple[str, ...]) -> None:
    wrong("interleaving_ex", answer, *needles)  # refused before any server is needed


# --- 07, exercise 2: when may a frontier pass an id --------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        HORIZON,
        "select cast(:xact as xid8) <= pg_snapshot_xmin(pg_current_snapshot()); -- done",
        "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint % 1 = 0"
        " AND pg_snapshot_xmin(pg_current_snapshot()) >= :xact::xid8",  # a literal % works
        "SELECT NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(pg_current_snapshot()) AS x"
        " WHERE x < CAST(:xact AS xid8))",
        "WITH s AS (SELECT pg_current_snapshot() AS snap)"
        " SELECT pg_snapshot_xmin(snap)::text::bigint >= CAST(:xact AS bigint) FROM s",
    ],
)
def test_condition_accepts_every_correct_form(on_server: str, sql: str) -> None:
    fb = exs.condition_ex.check(sql)
    assert fb.passed, fb
    assert "all 8 situations" in fb.message


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("sql", "needles"),
    [
        (
            "SELECT CAST(:xact AS xid8) IS NOT NULL",
            ("older than :xact holds an uncommitted id", "look at the transactions"),
        ),
        (  # Article 1's rule: only the rows it can see
            "SELECT NOT EXISTS (SELECT 1 FROM conversations WHERE status IN ('pending', "
            "'running') AND CAST(:xact AS xid8) IS NOT NULL)",
            ("invisible until it commits", "not at the rows"),
        ),
        (
            "SELECT pg_snapshot_xmin(pg_current_snapshot()) <= CAST(:xact AS xid8)",
            ("lets the frontier pass while a transaction older than :xact",),
        ),
        (  # off by one: right while :xact's transaction has ended, for ever wrong inside it
            "SELECT pg_snapshot_xmin(pg_current_snapshot()) > CAST(:xact AS xid8)",
            ("inside the transaction that took :xact", "waits for ever"),
        ),
        (
            "SELECT pg_xact_status(CAST(:xact AS xid8)) = 'committed'",
            ("older than :xact is still running",),
        ),
        (  # waits for every transaction, younger ones too
            "SELECT NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(pg_current_snapshot()))"
            " AND CAST(:xact AS xid8) IS NOT NULL",
            ("YOUNGER than :xact", "Only older transactions matter"),
        ),
        (
            "SELECT pg_snapshot_xmin(pg_current_snapshot()) >= CAST(:xact AS xid8)"
            " AND NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_xid IS NULL"
            " AND state = 'idle in transaction' AND pid <> pg_backend_pid())",
            ("your condition holds the frontier back although every transaction older",),
        ),
        (
            "SELECT 1 WHERE CAST(:xact AS xid8) IS NOT NULL",
            ("must return a boolean", "Python type int"),
        ),
        ("SELECT CAST(NULL AS boolean) OR CAST(:xact AS xid8) IS NULL", ("returned NULL",)),
        (
            "SELECT true FROM conversations WHERE CAST(:xact AS xid8) IS NOT NULL",
            ("returned 0 row(s)", "one value"),
        ),
        ("SELECT :xact IS NOT NULL", ("could not tell the type of a parameter", "cast it")),
    ],
)
def test_condition_wrong_answers_name_the_cause(
    on_server: str, sql: str, needles: tuple[str, ...]
) -> None:
    wrong("condition_ex", sql, *needles)


@pytest.mark.parametrize(
    ("sql", "needles"),
    [
        ("SELECT pg_snapshot_xmin(pg_current_snapshot()) >= CAST(? AS xid8)", ("named",)),
        (
            "SELECT now() > CAST(:start AS timestamptz)",
            ("never uses :xact; compare the transactions still running against :xact",),
        ),
        (
            "SELECT pg_snapshot_xmin(pg_current_snapshot()) >= CAST(@xact AS xid8)",
            ("writes @xact; a parameter here is written :xact",),
        ),
        ("SELECT CAST(:xact AS xid8) IS NULL OR :other IS NULL", ("uses :other",)),
        ("DELETE FROM conversations WHERE id = CAST(:xact AS bigint)", ("one SELECT or WITH",)),
        ("SELECT 1; SELECT CAST(:xact AS xid8) IS NULL", ("single statement",)),
        (["SELECT true"], ("Python string of SQL",)),
        (  # one row of huge numeric products once ran 70 s past the time limit
            "SELECT CAST(:xact AS xid8) IS NOT NULL" + " AND true" * 120,
            ("1,118 characters long without its comments and extra spaces", "none over 1,000"),
        ),
    ],
)
def test_condition_malformed_answers_say_what_is_off(sql: Any, needles: tuple[str, ...]) -> None:
    wrong("condition_ex", sql, *needles)


@pytest.mark.postgres
def test_condition_runs_read_only_as_a_role_without_rights(on_server: str) -> None:
    message = wrong(
        "condition_ex",
        "WITH gone AS (DELETE FROM conversations RETURNING id)"
        " SELECT CAST(:xact AS xid8) IS NOT NULL",
    )
    assert "refused a write" in message or "does not open" in message


@pytest.mark.postgres
def test_condition_that_runs_too_long_is_stopped(on_server: str) -> None:
    wrong(
        "condition_ex",
        "SELECT pg_sleep(5) IS NULL AND CAST(:xact AS xid8) IS NOT NULL",
        "ran longer than 2 s",
    )


@pytest.mark.postgres
def test_condition_situations_are_what_their_labels_say(on_server: str) -> None:
    """In each moment the check sets up, the statement delivered_frontier runs says pass
    exactly where the label says no older transaction is alive, and the solution's query,
    asked in the same snapshot, says the same."""
    import labkit.frontier.log as fr
    import labkit.pg.instance as pg

    text = pg_sandbox.learner_sql(HORIZON, "it", ("select",), ("xact",))
    with pg_sandbox.learner_schema(on_server, fr.create_schema, ("select",)) as (schema, role):
        opts = pg.search_path_option(schema)
        with (
            pg.connect(on_server, autocommit=True, options=opts) as ref,
            pg.connect(on_server, options=opts) as snap,
        ):
            for moment, before, after in frontier_pg._moments():
                may, rows = frontier_pg._ask_in(
                    moment, before, after, on_server, schema, role, text, ref, snap
                )
                holds = "older than :xact holds" in moment.label or "still holds" in moment.label
                assert may is (not holds), moment.label
                assert rows == [[["bool", may]]], moment.label


@pytest.mark.postgres
def test_condition_waits_out_other_sessions_and_says_when_it_cannot(
    on_server: str, monkeypatch
) -> None:
    """A transaction outside the check, holding a transaction id, would hold every moment
    back: the check refuses to judge while it runs (ServerBusy), and judges once it ends.
    (Few tries, so the outside transaction is short for other tests on a shared server.)"""
    import labkit.pg.instance as pg

    monkeypatch.setattr(frontier_pg, "QUIET_TRIES", 5)
    with pg.connect(on_server) as outside:
        outside.execute(frontier_pg.TAKE_XACT_SQL)  # holds a transaction id until rolled back
        with pytest.raises(frontier_pg.ServerBusy, match="run it again"):
            exs.condition_ex.check(HORIZON)
        outside.rollback()
    monkeypatch.undo()
    assert exs.condition_ex.check(HORIZON).passed


# --- 08: the guarded write, raced ---------------------------------------------------------------

UNGUARDED = "UPDATE naive_catalog SET version = :seen + 1, tools = :tools WHERE id = 1"
SUBQUERY_GUARD = UNGUARDED + " AND (SELECT version FROM naive_catalog WHERE id = 1) = :seen"


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        GUARDED,
        "update naive_catalog set version = version + 1, tools = :tools where version = :seen;",
        "UPDATE naive_catalog SET (version, tools) = (:seen + 1, :tools)"
        " WHERE id = 1 AND version = :seen RETURNING version",
        "INSERT INTO naive_catalog (id, version, tools) VALUES (1, :seen + 1, :tools)"
        " ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, tools = EXCLUDED.tools"
        " WHERE naive_catalog.version = :seen",
        "WITH cur AS (SELECT id FROM naive_catalog WHERE id = 1 AND version = :seen FOR UPDATE)"
        " UPDATE naive_catalog SET version = :seen + 1, tools = :tools FROM cur"
        " WHERE naive_catalog.id = cur.id",
        # a literal % (a LIKE pattern, a modulo) reaches PostgreSQL as written
        GUARDED + " AND tools LIKE 'answer%'",
        GUARDED + " AND id % 2 = 1",
    ],
)
def test_guarded_write_accepts_every_correct_form(on_server: str, sql: str) -> None:
    fb = exs.guarded_write_ex.check(sql)
    assert fb.passed, fb
    assert "exactly one write won" in fb.message


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("sql", "needles"),
    [
        (UNGUARDED, ("worker A read version 5", "lost update", "does not compare the version")),
        (  # it does compare, but >= lets a stale read through
            UNGUARDED + " AND version >= :seen",
            ("lost update", "still lets a write through after another worker moved the version"),
        ),
        (
            "UPDATE naive_catalog SET version = version + 1, tools = :tools"
            " WHERE id = 1 AND :seen IS NOT NULL",
            ("still went through", "lost update"),
        ),
        (
            SUBQUERY_GUARD,
            ("A's and ", "answers were lost without an error", "subquery", "waited for it"),
        ),
        (
            "WITH cur AS (SELECT version FROM naive_catalog WHERE id = 1)"
            " UPDATE naive_catalog SET version = :seen + 1, tools = :tools FROM cur"
            " WHERE naive_catalog.id = 1 AND cur.version = :seen",
            ("were lost without an error", "CTE"),
        ),
        (
            "UPDATE naive_catalog SET version = :seen, tools = :tools"
            " WHERE id = 1 AND version = :seen",
            ("kept the version at 5", "one above the version read"),
        ),
        (
            "UPDATE naive_catalog SET version = :seen + 2, tools = :tools WHERE version = :seen",
            ("stored version 7",),
        ),
        (
            "UPDATE naive_catalog SET version = :seen + 1, tools = :tools"
            " WHERE id = 1 AND version = :seen + 1",
            ("wrote nothing", "refuses the very write"),
        ),
        (
            "UPDATE naive_catalog SET version = :seen + 1, tools = 'x' || :tools"
            " WHERE id = 1 AND version = :seen",
            ("not the worker's answer",),
        ),
        (
            "WITH gone AS (DELETE FROM naive_catalog RETURNING id) UPDATE naive_catalog"
            " SET version = :seen + 1, tools = :tools WHERE id = 1 AND version = :seen",
            ("does not open",),
        ),
    ],
)
def test_guarded_write_wrong_answers_name_whose_update_and_why(
    on_server: str, sql: str, needles: tuple[str, ...]
) -> None:
    wrong("guarded_write_ex", sql, *needles)


@pytest.mark.parametrize(
    ("sql", "needles"),
    [
        ("SELECT version FROM naive_catalog WHERE version = :seen AND :tools <> ''", ("UPDATE",)),
        ("UPDATE naive_catalog SET version = :seen + 1 WHERE id = 1", ("never uses :tools",)),
        ("UPDATE naive_catalog SET version = %s, tools = %s WHERE id = 1", ("named parameters",)),
        ({"sql": GUARDED}, ("Python string of SQL", "dict")),
        (
            UNGUARDED + " AND version = ':seen'",
            ("':seen' in quotes: that is the text ':seen', not the parameter",),
        ),
        (UNGUARDED + " AND version = $seen", ("writes $seen; a parameter here is written :seen",)),
        (
            "UPDATE naive_catalog SET version = 6, tools = :tools WHERE id = 1 AND version = 5",
            ("never uses :seen; use the parameter :seen",),
        ),
    ],
)
def test_guarded_write_malformed_answers_say_what_is_off(
    sql: Any, needles: tuple[str, ...]
) -> None:
    wrong("guarded_write_ex", sql, *needles)


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        TENANT,
        "UPDATE tenant_catalog SET version = version + 1, tools = :tools"
        " WHERE (tenant, version) = (:tenant, :seen)",
        "INSERT INTO tenant_catalog AS t (tenant, version, tools)"
        " VALUES (:tenant, :seen + 1, :tools)"
        " ON CONFLICT (tenant) DO UPDATE SET version = EXCLUDED.version, tools = EXCLUDED.tools"
        " WHERE t.version = :seen",
    ],
)
def test_tenant_write_accepts_every_correct_form(on_server: str, sql: str) -> None:
    fb = exs.tenant_write_ex.check(sql)
    assert fb.passed, fb
    assert "per tenant" in fb.message


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("sql", "needles"),
    [
        (  # the first exercise's answer, copied: no tenant in the WHERE
            "UPDATE tenant_catalog SET version = :seen + 1, tools = :tools WHERE version = :seen",
            ("worker A's write for tenant 'acme'", "row of tenant 'zenith'", "was lost"),
        ),
        (
            "UPDATE tenant_catalog SET version = :seen + 1, tools = :tools WHERE tenant = :tenant",
            ("worker A read version 5", "replaced that answer", "lost update"),
        ),
        (
            "UPDATE tenant_catalog SET version = :seen + 1, tools = :tools WHERE tenant = :tenant"
            " AND (SELECT version FROM tenant_catalog WHERE tenant = :tenant) = :seen",
            ("of tenant 'acme'", "A's answer was lost", "subquery"),
        ),
        (  # a tenant written in: C's write for 'zenith' never finds its row
            "UPDATE tenant_catalog SET version = :seen + 1, tools = :tools"
            " WHERE tenant = 'acme' AND version = :seen",
            ("worker C's write for tenant 'zenith' changed nothing", "never uses :tenant"),
        ),
        (
            "UPDATE tenant_catalog SET version = :seen + 1, tools = :tools"
            " WHERE tenant = 'zenith' AND version = :seen",
            ("overwrote the row of tenant 'zenith'", "never uses :tenant"),
        ),
    ],
)
def test_tenant_write_wrong_answers_name_whose_update_and_why(
    on_server: str, sql: str, needles: tuple[str, ...]
) -> None:
    wrong("tenant_write_ex", sql, *needles)


@pytest.mark.parametrize(
    ("sql", "needles"),
    [
        (
            TENANT.replace(":tenant", ":tenant_id"),
            (
                "uses :tenant_id, which the check does not bind; the parameters are :seen, "
                ":tools, :tenant",
            ),
        ),
        (TENANT.replace(":tenant", "':tenant'"), ("':tenant' in quotes",)),
    ],
)
def test_tenant_write_malformed_answers_say_what_is_off(sql: str, needles: tuple[str, ...]) -> None:
    message = wrong("tenant_write_ex", sql, *needles)
    assert message.count(":seen") == 1 or "quotes" in message  # each parameter listed once


@pytest.mark.postgres
def test_a_failing_trial_is_named_by_its_place_and_kind(on_server: str) -> None:
    """'in the current trial' read as 'this trial': the stage is named as the first one."""
    wrong(
        "guarded_write_ex",
        UNGUARDED + " AND version = CAST(:tools AS bigint)",
        "in the first trial (a current read), PostgreSQL could not run your statement",
    )


def _races(
    race: catalog_pg.Race, sql: str, dsn: str
) -> list[tuple[catalog_pg.Stage, dict[str, Any]]]:
    rendered = pg_sandbox.learner_sql(sql, "it", ("update",), ("seen", "tools"))
    return [(s, out) for s, out in catalog_pg.race_write(race, rendered, dsn) if s.how != "alone"]


@pytest.mark.postgres
def test_racing_real_connections_catches_an_unguarded_write(on_server: str) -> None:
    """Every race (held and free) lets all three unguarded writes report success on one read,
    and the catalog keeps one answer; the guarded write lets exactly one win every time."""
    for stage, out in _races(catalog_pg.NAIVE, UNGUARDED, on_server):
        assert out["error"] is None
        assert sorted(out["counts"].items()) == [("A", 1), ("B", 1), ("C", 1)], stage.name
        assert out["rows"][1][0] == catalog_pg.START_VERSION + 1
        start = {1: [catalog_pg.START_VERSION, "answer 5"]}
        with pytest.raises(Wrong, match="lost without an error"):
            catalog_pg._judge_race(catalog_pg.NAIVE, stage, out, start, turns_ok=False)
    for stage, out in _races(catalog_pg.NAIVE, GUARDED, on_server):
        assert sorted(out["counts"].values()) == [0, 0, 1], stage.name
        (winner,) = [w for w, n in out["counts"].items() if n]
        assert out["rows"][1] == [catalog_pg.START_VERSION + 1, f"answer of {winner}"]


@pytest.mark.postgres
def test_only_the_held_race_catches_a_guard_read_through_a_subquery(on_server: str) -> None:
    """The subquery guard passes both lone trials; in the held race the first writer holds the
    row while the others wait, and the waiting UPDATEs' subquery still sees version 5."""
    stages = catalog_pg.race_write(
        catalog_pg.NAIVE,
        pg_sandbox.learner_sql(SUBQUERY_GUARD, "it", ("update",), ("seen", "tools")),
        on_server,
    )
    alone = {s.name: out for s, out in stages if s.how == "alone"}
    assert alone["current"]["counts"] == {"A": 1} and alone["stale"]["counts"] == {"A": 0}
    (held,) = [out for s, out in stages if s.how == "held"]
    assert held["order"][0] == "A" and sorted(held["counts"].values()) == [1, 1, 1]
    # the stored row names the last commit (the threads' order of returning may not)
    assert held["rows"][1][1] in ("answer of B", "answer of C")
