"""A schedule step is a small type: read from text only where a person typed it (strictly),
written back as the same text, and passed between modules as itself."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labkit.designs import schedules
from labkit.designs.arrival_orders import run_schedule
from labkit.designs.schedule_builder import StepError, parse_schedule
from labkit.designs.schedules import (
    Kind,
    ScheduleError,
    Step,
    as_steps,
    format_schedule,
    parse_step,
)

STEPS = st.one_of(
    st.builds(Step, st.sampled_from(["deliver", "dup", "stale"]), st.integers(0, 10**9 - 1)),
    st.builds(Step.timeout, st.none() | st.integers(0, 10**9 - 1)),
    st.just(Step.crash()),
)


@given(STEPS)
def test_a_step_prints_as_the_text_that_reads_back_as_it(step: Step) -> None:
    assert type(str(step)) is str and parse_step(str(step)) == step


@pytest.mark.parametrize(
    ("text", "step"),
    [
        ("deliver 3", Step.deliver(3)),
        ("3", Step.deliver(3)),
        ("r3", Step.deliver(3)),
        (" DELIVER:  3 ", Step.deliver(3)),
        ("dup 1", Step.dup(1)),
        ("stale 2", Step.stale(2)),
        ("timeout", Step.timeout()),
        ("Timeout 4", Step.timeout(4)),
        ("crash", Step.crash()),
    ],
)
def test_what_a_person_types_reads_as_a_step(text: str, step: Step) -> None:
    assert parse_step(text) == step


@pytest.mark.parametrize(
    "text",
    [
        "deliver \u00b2",  # superscript two: str.isdigit() says yes, int() says no
        "deliver \u0663",  # Arabic-Indic three: int() would read it
        "\u00b2",
        "deliver\u20033",  # an em space is not a separator
        "deliver 1234567890",
        "rr5",
        "deliver",
        "crash 1",
        "deliver 1 2",
        "jump 1",
        "",
        "deliver " + "1" * 40,
    ],
)
def test_anything_else_is_one_clean_schedule_error(text: str) -> None:
    with pytest.raises(ScheduleError, match="not a step|longer than 40") as refused:
        parse_step(text)
    assert refused.value.text == text and len(str(refused.value)) < 200


@given(st.text(max_size=60))
def test_no_text_raises_anything_but_a_schedule_error(text: str) -> None:
    try:
        step = parse_step(text)
    except ScheduleError:
        return
    assert step.kind in Kind and parse_step(str(step)) == step


def test_a_step_refuses_to_be_built_wrong() -> None:
    for kind, request in [("deliver", None), ("crash", 1), ("jump", 1), ("stale", "2")]:
        with pytest.raises(ValueError):
            Step(kind, request)  # type: ignore[arg-type]
    assert Step("crash") == Step.crash() and Step.crash().kind is Kind.CRASH
    assert str(Step.timeout()) == "timeout"


def test_steps_made_by_name_are_shared_and_still_checked() -> None:
    """The searches make the same few steps millions of times: `Step.deliver(3)` is one object
    (steps are frozen), in a bounded table; what is no request is still refused, so `True`
    never passes for request 1."""
    assert Step.deliver(3) is Step.deliver(3) and Step.crash() is Step.crash()
    assert Step.timeout() is Step.timeout() and Step.stale(2) is not Step.dup(2)
    assert Step.deliver(1) == Step(Kind.DELIVER, 1)
    for bad in (True, "2", 2.0):
        with pytest.raises(ValueError, match="request is an int"):
            Step.deliver(bad)  # type: ignore[arg-type]
    for rid in range(3 * schedules._MADE_MAX):
        assert Step.timeout(rid).request == rid
    assert len(schedules._MADE) <= schedules._MADE_MAX


def test_steps_sort_by_kind_then_request_number() -> None:
    steps = [Step.timeout(), Step.deliver(10), Step.deliver(2), Step.crash(), Step.timeout(1)]
    assert format_schedule(sorted(steps)) == ("crash; deliver 2; deliver 10; timeout; timeout 1")


def test_run_schedule_takes_steps_or_the_text_a_person_types() -> None:
    text = ["timeout", "deliver 2", "deliver 3", "deliver 1"]
    typed = run_schedule("callback", text)
    assert typed.steps == as_steps(text) and typed.heads == [0, 1, 2, 1]
    assert run_schedule("callback", as_steps(text)).outcomes == typed.outcomes
    with pytest.raises(ScheduleError, match="a list of steps"):
        run_schedule("callback", "deliver 1")  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match="'deliver \u00b2': not a step"):
        run_schedule("callback", ["deliver \u00b2"])


def test_a_typed_schedule_names_the_entry_that_is_no_step() -> None:
    assert parse_schedule("1; dup 1\ntimeout") == [Step.deliver(1), Step.dup(1), Step.timeout()]
    with pytest.raises(StepError, match=r"step 2 \('deliver \u00b2'\): not a step"):
        parse_schedule("deliver 1; deliver \u00b2")


@pytest.mark.parametrize("design", ["ballot", "fenced", "pipelined"])
@pytest.mark.parametrize("steps", [["crash"], ["deliver 12", "crash"], ["crash", "crash"]])
def test_settling_after_a_crash_delivers_the_dead_process_calls(design: str, steps) -> None:
    """After a restart the loop awaits ballots rebuilt from its store; settling delivers the
    answers to the calls the dead process sent for them (it said 'request -1 has not been
    sent'), and every tick commits."""
    result = run_schedule(design, steps, window=2, ticks=2, first_request=12, settle=True)
    labels = [o.label for o in result.outcomes]
    assert "12:commit" in labels and result.outcomes[-1].head == 2
    assert not any(o.rewind for o in result.outcomes)
