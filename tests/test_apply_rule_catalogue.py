"""The commit-rule exercise must reject every known-wrong rule with a concrete counterexample,
and its boundary cases must cover every combination, whatever the random runs happen to hold."""

from __future__ import annotations

import re

import pytest
from apply_rules import WRONG_RULES, Rule, decide

from labkit import exercises as exs
from labkit.exercises import catalog

COUNTEREXAMPLE = re.compile(
    r"\[(?P<label>[^\]]+)\] with head (?P<head>\d+) and ballots in flight \{[^}]*\} .*"
    r"the response \(ballot (?P<ballot>\d+), observed watermark -?\d+, base -?\d+\): "
    r"your rule said '(?P<said>\w+)'"
)


def test_the_right_rule_passes() -> None:
    fb = exs.apply_rule_ex.check(decide)
    assert fb.passed, fb


@pytest.mark.parametrize("name", WRONG_RULES)
def test_every_wrong_rule_is_rejected_with_a_counterexample(name: str) -> None:
    rule: Rule = WRONG_RULES[name]
    fb = exs.apply_rule_ex.check(rule)
    assert fb.status == "incorrect", (name, fb)
    match = COUNTEREXAMPLE.search(fb.message)
    assert match, (name, fb.message)
    # every wrong rule in the catalogue fails on a boundary case, not by luck of a random run
    assert not match["label"].startswith("random"), (name, fb.message)


def test_the_catalogue_is_big_enough_and_covers_the_reported_holes() -> None:
    assert len(WRONG_RULES) >= 8
    msg = exs.apply_rule_ex.check(
        WRONG_RULES["base >= head accepted (a body from the future commits)"]
    ).message
    assert (
        "base above the head" in msg and "the body is based on version 3, but the head is 2" in msg
    )
    assert not re.search(r"\bstale_base\b", msg)  # the cause, never the expected decision
    msg = exs.apply_rule_ex.check(WRONG_RULES["echo <= observed accepted"]).message
    assert "echo below" in msg
    msg = exs.apply_rule_ex.check(WRONG_RULES["echo >= observed accepted"]).message
    assert "echo above" in msg
    msg = exs.apply_rule_ex.check(WRONG_RULES["evicts on stale_base"]).message
    assert "which is right, but it took ballot 5 out of flight, where it must stay" in msg


def test_boundary_cases_cover_every_combination_and_every_verdict() -> None:
    cases = list(catalog.boundary_cases())
    n = len(catalog.BALLOT_CASES) * len(catalog.ECHO_CASES) * len(catalog.BASE_CASES)
    assert len({c.label for c in cases}) == len(cases) == n
    assert {c.verdict for c in cases} == {
        "commit",
        "unknown_ballot",
        "stale_watermark",
        "stale_base",
    }
    (owner,) = [c for c in cases if c.verdict == "commit"]
    assert owner.label == "ballot in flight, owns the watermark, echo equal, base equal to the head"
    above = [
        c
        for c in cases
        if "owns" in c.label and "base above" in c.label and "echo equal" in c.label
    ]
    assert [c.verdict for c in above] == ["stale_base"]
    assert {c.head for c in cases} == {2}
    # which ballot states exist in the fixed loop, as the labels claim
    first = cases[0]
    assert first.inflight == {3: 1, 5: 2}
