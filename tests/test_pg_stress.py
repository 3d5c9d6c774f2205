"""The concurrent stress test on a real server: Article 1's rule orphans rows, each fix none."""

from __future__ import annotations

import pytest

from labkit.pg import commit_order as co
from labkit.pg import stress as ps

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


# One late commit in five, long enough that other writers commit larger ids meanwhile, so the
# race is there to be lost even on a loaded machine (a busy CI box slows the summarizer too).
DELAYS = ps.Delays(fast_s=0.004, slow_share=0.2, slow_s=0.08)


def stress(pg_dsn: str, rule: str, seed: int = 0, rows_per_writer: int = 500) -> ps.StressResult:
    """One stress run of `rule`: 4 writers x `rows_per_writer` rows. Each test runs its own
    rule, so under pytest-xdist the runs (mostly waiting) go to different workers."""
    return ps.run_stress(
        pg_dsn, rule, writers=4, rows_per_writer=rows_per_writer, delays=DELAYS, seed=seed
    )


def test_article_1_rule_orphans_rows_under_late_commits(pg_dsn: str) -> None:
    naive = stress(pg_dsn, "id_order")
    assert naive.rows == 2000
    # Whether the summarizer runs inside a late commit's window is up to the scheduler: if the
    # first run lost nothing, the same test with the next random seeds must. Quiet, the first
    # run always has; on a machine loaded far past its cores (commits at a fifth of their quiet
    # rate) three runs in a row once lost nothing, so up to five.
    runs = [naive]
    for seed in (1, 2, 3, 4):
        if runs[-1].orphans:
            break
        runs.append(stress(pg_dsn, "id_order", seed=seed))
    assert runs[-1].orphans > 0, runs


# The lock serialises every writer behind a durable commit (a disk flush each), so its run is
# the longest wait of the suite: a thousand rows prove it as well as two thousand.
@pytest.mark.parametrize(("rule", "per_writer"), [("lock", 250), ("horizon", 500)])
def test_each_fix_loses_nothing_over_a_thousand_rows_and_more(
    pg_dsn: str, rule: str, per_writer: int
) -> None:
    result = stress(pg_dsn, rule, rows_per_writer=per_writer)
    assert result.rows == 4 * per_writer and result.orphans == 0


def test_unknown_rule_is_refused(pg_dsn: str) -> None:
    with pytest.raises(ValueError, match="unknown rule 'gap'"):
        ps.run_stress(pg_dsn, "gap")


def test_late_commit_script_orphans_under_id_order_only(pg_dsn: str) -> None:
    with co.CommitOrderLab(pg_dsn) as lab:
        state = lab.run(co.LATE_COMMIT)
    assert state.orphans == {"id_order": (1,), "horizon": ()}
    assert state.held == 1  # the horizon held once: while A's id 1 was still uncommitted
    assert [e.coverage for e in state.events if e.action == "summarize"] == [
        {"id_order": 2, "horizon": 0},
        {"id_order": 2, "horizon": 2},
    ]
    late = state.rows[0]
    assert (late.row_id, late.committed, late.summarized) == (1, 5, {"horizon": 7})


def test_scripted_comparison_is_deterministic(pg_dsn: str) -> None:
    scripts = [co.random_script(30, seed) for seed in range(2)]
    first = co.compare_fixes(pg_dsn, scripts)
    assert first == co.compare_fixes(pg_dsn, scripts)
    by = {o.fix: o for o in first}
    assert by["no-wait frontier (Article 1)"].orphans > 0
    assert by["lock"].orphans == by[co.HORIZON_FIX].orphans == 0
    assert by["lock"].waits > 0 and by[co.HORIZON_FIX].held > 0
    # Notebook 07 explains the row counts: without the lock every insert step writes a row; under
    # it, each wait is an insert step that wrote none.
    inserts = sum(action == "insert" for script in scripts for _, action in script)
    assert by["no-wait frontier (Article 1)"].rows == by[co.HORIZON_FIX].rows == inserts
    assert by["lock"].rows == inserts - by["lock"].waits


def test_insert_returns_the_id_it_took_or_none_while_it_waits(pg_dsn: str) -> None:
    with co.CommitOrderLab(pg_dsn, lock=True) as lab:
        first = lab.insert("A")
        assert first is not None and lab.open["A"] == [first]
        assert lab.insert("B") is None  # A holds the lock: B waits and takes no id
        assert lab.insert("A") == first + 1


def test_lab_refuses_a_bad_step(pg_dsn: str) -> None:
    with co.CommitOrderLab(pg_dsn) as lab:
        with pytest.raises(ValueError, match="needs a writer"):
            lab.step("worker", "insert")
        with pytest.raises(ValueError, match="unknown action"):
            lab.step("A", "vanish")
