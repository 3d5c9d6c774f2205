"""Part two's exercises, ballots and the catalog watermark: predict `WatermarkLoop`'s verdicts
and fix a broken commit rule (after notebook 04), fool last-write-wins under skewed host clocks
and answer Article 2's closing question with other numbers (05), and predict what survives a
restart (06). Every answer is judged by the real `WatermarkLoop` and
`labkit.designs.arrival_orders`; a verdict scenario is played once, when its variant is drawn (or
at the first check of the notebook's own), since the loop's decisions for it never change.
"""

from __future__ import annotations

import functools
import random
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from labkit.catalog.loop import Response, WatermarkLoop
from labkit.catalog.rule import REASONS
from labkit.db import connect
from labkit.designs.arrival_orders import ScheduleResult, run_schedule
from labkit.designs.schedules import Kind, ScheduleError
from labkit.exercises.kit import (
    Call,
    Exercise,
    Variant,
    Wrong,
    by_label,
    learner_calls,
    learner_items,
    listing,
    shown,
    whole,
    word_choice,
)

COMMIT = "commit"


def _normalize_reason(value: Any, label: str) -> str:
    """A decision as the learner wrote it, in any form notebook 04 prints one (None or
    'commit' for a commit, a reason string in any case, an `Outcome`), as 'commit' or a
    reason; `Wrong` naming the type or the unknown word otherwise."""
    if hasattr(value, "committed") and hasattr(value, "reason"):  # an Outcome from apply()
        value = None if value.committed else value.reason
    if value is None:
        return COMMIT
    if isinstance(value, bool):
        raise Wrong(f"{label}: {value} is a bool; write 'commit' (or None) or a reason string")
    if not isinstance(value, str):
        raise Wrong(
            f"{label}: a decision is a string ('commit' or a reason) or None, not a "
            f"{type(value).__name__}"
        )
    word = word_choice(value, (COMMIT, *REASONS))
    if word is not None:
        return word
    raise Wrong(
        f"{label}: {shown(value)} is not a decision; "
        f"use 'commit' (or None) or one of {list(REASONS)}"
    )


def _inflight(loop: WatermarkLoop) -> dict[int, int]:
    """In-flight ballot id -> the watermark it observed."""
    return {b.ballot_id: b.watermark for b in loop.inflight()}


# apply()'s questions in the order the rule asks them (rule.REASONS); a decision is the first
# question a response fails, and a commit passes them all.
_RANK = {**{reason: i for i, reason in enumerate(REASONS)}, COMMIT: len(REASONS)}


_NTH = ("first", "second", "third")


def _recheck(said: str, actual: str, restart: bool) -> str:
    """For a predicted verdict: which of apply()'s questions to re-check, as the idea behind
    it; it names neither the response nor the decision, and every question is reached from
    more than one pair of decisions (the earlier question of the two the answers stop at)."""
    question = min(_RANK[said], _RANK[actual])
    if question == 0:
        out = "its answer written; a refusal once the head has passed its watermark; abandon" + (
            "; a restart's abandon too" if restart else ""
        )
        idea = (
            "the first question, whether the ballot is in flight: which events take a ballot "
            f"out of flight ({out}), and which ids were ever reserved"
        )
    elif question == 1:
        idea = (
            "the second question, whether the ballot still owns the watermark: the watermark "
            "it observed against the head when its response arrives, and the watermark the "
            "response echoes"
        )
    else:
        idea = (
            "the third question, whether the body is based on the head: count the commits "
            "before each response"
        )
    return (
        f"at least one decision is not apply()'s. Re-check {idea}, for each response in "
        "order: each decision changes the state the next response meets"
    )


def _mistake(said: str, actual: str, resp: Response, head: int, inflight: dict, past: dict) -> str:
    """Which of apply()'s three questions a wrong decision `said` answered wrongly, and why,
    in terms of the ballot, the head and the response; never naming the `actual` decision."""
    b = resp.ballot_id
    question = min(_RANK[said], _RANK[actual])
    if question == 0:
        if actual == "unknown_ballot":
            if b in past:
                return f"ballot {b} is no longer in flight ({past[b]}); look at the first question"
            return f"ballot {b} is not in flight: it was never reserved"
        return (
            f"ballot {b} is still in flight when this response arrives: nothing before it took "
            "the ballot out of flight (a refusal does that only once the head has passed the "
            "ballot's watermark)"
        )
    observed = inflight[b]
    if question == 1:
        if actual != "stale_watermark":
            return (
                f"ballot {b} still owns the watermark: it observed {observed}, the head is still "
                f"{head}, and the response echoes {resp.observed_watermark}. That question "
                "passes; look at the next one"
            )
        if observed != head:
            return (
                f"ballot {b} observed watermark {observed}, but the head has moved to {head}: "
                "it no longer owns the watermark"
            )
        return (
            f"the response echoes watermark {resp.observed_watermark}, but ballot {b} observed "
            f"{observed}: the echo must match"
        )
    if actual == "stale_base":
        return f"the body is based on version {resp.base_version}, but the head is {head}"
    return (
        f"the body is based on version {resp.base_version}, which is the head: every question "
        "passes"
    )


# --- predicting verdicts: lesson 04 (no crash) and lesson 06 (a restart in the middle) --------


@dataclass(frozen=True)
class VerdictScenario:
    """A loop brought into a known state, then labelled responses applied in order."""

    setup: str
    responses: dict[str, Response]
    build: Callable[[Path], tuple[WatermarkLoop, dict[int, str]]]
    new_ballot_key: str | None = None  # if set, the answer also predicts the next ballot id
    restart: bool = False  # the loop was reopened from its file in the setup


def _reject_loop(_: Path) -> tuple[WatermarkLoop, dict[int, str]]:
    loop = WatermarkLoop(connect(), window=3)
    loop.reserve()
    loop.reserve()
    loop.apply(Response(1, 0, 0, ("search",)))
    loop.reserve()
    loop.reserve()
    return loop, {1: "ballot 1's commit of version 1"}


REJECT = VerdictScenario(
    setup=(
        "WatermarkLoop(conn, window=3): reserve ballots 1 and 2 (both observe watermark 0); "
        "ballot 1's response commits version 1; reserve ballots 3 and 4 (both observe 1)."
    ),
    responses={
        "A": Response(1, 0, 0, ("search",)),
        "B": Response(3, 1, 0, ("search", "mail")),
        "C": Response(4, 1, 1, ("search", "calendar")),
        "D": Response(2, 0, 0, ("search", "files")),
        "E": Response(3, 1, 1, ("search", "mail")),
    },
    build=_reject_loop,
)


def _crash_loop(tmp: Path) -> tuple[WatermarkLoop, dict[int, str]]:
    path = tmp / "catalog.db"
    conn = connect(path)
    loop = WatermarkLoop(conn, window=3)
    loop.reserve()
    loop.reserve()
    loop.apply(Response(1, 0, 0, ("search",)))
    loop.reserve()
    conn.close()  # the process dies here; nothing of it survives but the file
    loop = WatermarkLoop(connect(path), window=3)
    loop.abandon(2)
    return loop, {
        1: "ballot 1's commit of version 1",
        2: "the restart, when the new loop abandoned ballot 2",
    }


CRASH = VerdictScenario(
    setup=(
        "WatermarkLoop on a database FILE, window=3: reserve ballots 1 and 2 (both observe 0); "
        "ballot 1's response commits version 1; reserve ballot 3 (observes 1). The process is "
        "killed and a new loop opens the same file; it abandons ballot 2 (stalled too long) and "
        "reserves one new ballot, X."
    ),
    responses={
        "A": Response(2, 0, 0, ("search", "files")),
        "B": Response(3, 1, 1, ("search", "mail")),
        "C": Response(4, 1, 1, ("search", "calendar")),
        "D": Response(3, 1, 1, ("search", "mail")),
    },
    build=_crash_loop,
    new_ballot_key="X",
    restart=True,
)


def _new_ballot_mistake(key: str, said: Any, ballot_id: int) -> str:
    """Why `said` is not the id the restarted loop's first reservation got; never names it."""
    said = whole(said, key)
    before = ballot_id - 1
    if 0 < said <= before:
        return (
            f"{key}: ballot {said} was handed out before the crash. Ballot ids live in the "
            "store, not in the process: a restart never reuses one"
        )
    if said > ballot_id:
        return (
            f"{key} is too high: count the reservations since the first ballot, across the "
            "restart; the store's counter moves by one per reservation"
        )
    return f"{key}: ballot ids start at 1 and only grow"


def _check_verdicts(scenario: VerdictScenario, decided: Decided, answer: Any) -> str:
    """The answer against what the real loop decided for `scenario`, label by label in order:
    `Wrong` at the first mismatch (the new ballot's id first, if asked)."""
    if not isinstance(answer, Mapping):
        raise Wrong(
            f"give a dict from label to decision, shaped like {{'P': 'stale_base', 'Q': "
            f"'commit'}} (other labels), not a {type(answer).__name__}"
        )
    answer = by_label(answer)
    keys = [*([scenario.new_ballot_key] if scenario.new_ballot_key else []), *scenario.responses]
    missing = [k for k in keys if k not in answer]
    if missing:
        raise Wrong(f"give an entry for every label; missing: {', '.join(missing)}")
    if scenario.new_ballot_key and decided.new_ballot is not None:
        key = scenario.new_ballot_key
        said = answer[key]
        if isinstance(said, bool) or whole(said, key) != decided.new_ballot:
            raise Wrong(_new_ballot_mistake(key, said, decided.new_ballot))
    for label in scenario.responses:
        said = _normalize_reason(answer[label], label)
        if said != decided.decisions[label]:
            raise Wrong(_recheck(said, decided.decisions[label], scenario.restart))
    return f"all {len(keys)} match; the head ended at version {decided.head}, never lower."


def _table(responses: Mapping[str, Response]) -> str:
    return "; ".join(
        f"{k}: ({r.ballot_id}, {r.observed_watermark}, {r.base_version})"
        for k, r in responses.items()
    )


@dataclass(frozen=True)
class Decided:
    """What the real loop decided for a scenario: the restarted loop's first ballot id (if the
    scenario asks for it), each response's decision ('commit' or a reason) and the final head."""

    new_ballot: int | None
    decisions: dict[str, str]
    head: int


def _play_verdicts(
    base: VerdictScenario, respond: Callable[[WatermarkLoop, str], Response]
) -> tuple[dict[str, Response], Decided]:
    """Build `base`'s loop, reserve the new ballot if asked, then apply `respond(loop, label)`
    for each label in order: the responses applied and what the loop decided."""
    responses: dict[str, Response] = {}
    decisions: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        loop, _ = base.build(Path(tmp))
        try:
            new_ballot = loop.reserve().ballot_id if base.new_ballot_key else None
            for label in base.responses:
                responses[label] = respond(loop, label)
                out = loop.apply(responses[label])
                decisions[label] = COMMIT if out.committed else str(out.reason)
            head = loop.head_version()
        finally:
            loop.conn.close()
    return responses, Decided(new_ballot, decisions, head)


def _decisions(scenario: VerdictScenario) -> Decided:
    """What the real loop decides for `scenario`'s own responses."""
    return _play_verdicts(scenario, lambda _, label: scenario.responses[label])[1]


VARIANT_TOOLS = ("mail", "files", "calendar", "maps", "notes")


def _plausible_response(rng: random.Random, loop: WatermarkLoop, top: int) -> Response:
    """A response a planner might send to `loop` now: mostly a reserved ballot echoing what it
    observed, based on a recent version; sometimes stale, echoed wrongly or never reserved."""
    head, inflight = loop.head_version(), _inflight(loop)
    b = rng.choice(sorted(inflight)) if inflight and rng.random() < 0.5 else rng.randint(1, top)
    observed = inflight[b] if b in inflight and rng.random() < 0.75 else rng.randint(0, head)
    base = head if rng.random() < 0.55 else rng.randint(max(0, head - 2), head + 1)
    return Response(b, observed, base, ("search", rng.choice(VARIANT_TOOLS)))


def _verdict_variant(base: VerdictScenario, rng: random.Random) -> tuple[VerdictScenario, Decided]:
    """The same setup, new responses to it (as many as `base` has), drawn until at least three
    different decisions occur; the decisions themselves are the real loop's."""
    while True:
        responses, decided = _play_verdicts(
            base, lambda loop, _: _plausible_response(rng, loop, VARIANT_TOP)
        )
        if len(set(decided.decisions.values())) >= 3:
            return replace(base, responses=responses), decided


VARIANT_TOP = 5  # variants use ballot ids 1..5: the reserved ones and one never reserved


def _solution(decided: Decided, new_ballot_key: str | None) -> str:
    answer: dict[str, Any] = {new_ballot_key: decided.new_ballot} if new_ballot_key else {}
    pairs = ", ".join(f"{k!r}: {v!r}" for k, v in {**answer, **decided.decisions}.items())
    return f"apply() decides, in order: answer = {{{pairs}}}"


def _verdict_checker(scenario: VerdictScenario) -> Callable[[Any], str]:
    """A check of answers for `scenario`: the real loop plays it once, at the first check."""
    decided = functools.cache(lambda: _decisions(scenario))
    return lambda answer: _check_verdicts(scenario, decided(), answer)


def _verdict_exercise_variant(
    base: VerdictScenario, question: Callable[[VerdictScenario], str]
) -> Callable[[random.Random], Variant]:
    def draw(rng: random.Random) -> Variant:
        scenario, decided = _verdict_variant(base, rng)
        return Variant(
            question(scenario),
            lambda answer: _check_verdicts(scenario, decided, answer),
            _solution(decided, scenario.new_ballot_key),
        )

    return draw


def _reject_question(scenario: VerdictScenario) -> str:
    return (
        scenario.setup
        + " Then these responses arrive in order, as Response(ballot_id, observed_watermark, "
        f"base_version, tools): {_table(scenario.responses)}. For each, what does apply() "
        "decide: 'commit', 'unknown_ballot', 'stale_watermark' or 'stale_base'? Answer a dict "
        "from each label A-E to its decision (None also means commit), shaped like "
        "{'P': 'stale_base', 'Q': 'commit'} (other labels)."
    )


def _crash_question(scenario: VerdictScenario) -> str:
    return (
        scenario.setup
        + f" Then these responses arrive in order: {_table(scenario.responses)}. Answer a dict: "
        "X (the new ballot's id, a whole number) and each response's decision, as for notebook "
        "04's verdicts, shaped like {'X': 9, 'A': 'commit', 'B': 'stale_base', 'C': "
        "'commit', 'D': 'stale_base'} (other values)."
    )


rejection_reasons_ex = Exercise(
    name="Predict the verdicts",
    question=_reject_question(REJECT),
    checker=_verdict_checker(REJECT),
    hints=(
        "apply() asks three questions in a fixed order, and each decision changes the state "
        "the next response meets. Which ballots are in flight after each step?",
        "The questions, in order: is the ballot in flight? Does it still own the watermark "
        "(the watermark it observed is the head, and the response echoes it unchanged)? Is "
        "the body based on the head? The first 'no' is the decision. A commit takes the "
        "ballot out of flight; a refusal does so only when the head has passed the ballot's "
        "watermark, so a bad body does not evict it.",
        "Keep a small table as you go: the head, and each ballot in flight with the "
        "watermark it observed. For each response ask the three questions in order, write "
        "the first 'no', then update the table: which decisions change the head, and which "
        "take the ballot out of ____?",
    ),
    solution_text=(
        "A unknown_ballot (1 already committed); B stale_base (base 0, head 1); C commit "
        "(version 2); D stale_watermark (observed 0, head 2); E stale_watermark (B's bad body "
        "left ballot 3 in flight, but C moved the head to 2, past the 1 it observed: its work "
        "needs a new ballot). answer = {'A': 'unknown_ballot', 'B': 'stale_base', "
        "'C': 'commit', 'D': 'stale_watermark', 'E': 'stale_watermark'}"
    ),
    variants=_verdict_exercise_variant(REJECT, _reject_question),
)

crash_verdicts_ex = Exercise(
    name="What survives a restart",
    question=_crash_question(CRASH),
    checker=_verdict_checker(CRASH),
    hints=(
        "Everything the loop knows lives in the database file. What did the file hold when "
        "the process died: which ballots, which next ballot id, which head?",
        "Reopening the file keeps what was written to it: the head, the ballots in flight "
        "with the watermarks they observed, and the counter of ballot ids; an abandoned "
        "ballot is gone for good. Then each response meets apply()'s three questions, in "
        "order, and each decision changes the state the next one meets.",
        "Write the file's state at the moment of the kill (head, ballots in flight with "
        "their watermarks, the next ballot id), then apply what the restart did to it. X "
        "comes from the id counter, which ____; the responses then go as in notebook 04, "
        "one table update per response.",
    ),
    solution_text=(
        "X = 4 (ids are never reused). A unknown_ballot (2 was abandoned); B commit (3 survived "
        "in flight and still owns watermark 1: version 2); C stale_watermark (4 observed 1, the "
        "head is now 2); D unknown_ballot (3 already committed). "
        "answer = {'X': 4, 'A': 'unknown_ballot', 'B': 'commit', 'C': 'stale_watermark', "
        "'D': 'unknown_ballot'}"
    ),
    variants=_verdict_exercise_variant(CRASH, _crash_question),
)


# --- lesson 05: an arrival order that rewinds last-write-wins under skewed host clocks -------

# Odd requests go to planner host A, whose clock runs 10 behind; even ones to host B, on time.
# Notebook 05's counterexample (the late body of request 1) does not work here.
HOST_SKEWS: dict[int, float] = {rid: -10.0 for rid in range(1, 40, 2)}


MOST_STEPS = 20  # a counterexample needs far fewer


def _steps(answer: Any, what: str = "the schedule") -> list[str]:
    """A schedule as a list of step texts: a list or tuple of strings or `Step`s, or one string
    with the steps separated by ';' as `format_schedule` prints them (',' or new lines too: no
    step holds one)."""
    if isinstance(answer, str) and re.search(r"[;,\n]", answer):
        answer = [step.strip() for step in re.split(r"[;,\n]", answer) if step.strip()]
    if isinstance(answer, str):
        raise Wrong(
            f"{what} {shown(answer)} is one step; give a list of steps, e.g. ['deliver 1', "
            "'timeout', ...], or one string with ';' (or ',' or a new line) between the steps"
        )
    if not isinstance(answer, Iterable) or isinstance(answer, Mapping | bytes | set | frozenset):
        raise Wrong(
            f"give {what} as a list of steps, e.g. ['deliver 1', 'timeout', ...], not a "
            f"{type(answer).__name__}"
        )  # an ordered collection of any kind is read: a NumPy array of strings too
    count = len(cast(list[Any], answer)) if type(answer) in (list, tuple) else 0
    if count > MOST_STEPS:
        raise Wrong(f"{what} has {count} steps; a counterexample needs far fewer")
    steps = learner_items(answer, what, str, most=MOST_STEPS, noun="steps")
    if not steps:
        raise Wrong(f"{what} is empty")
    return steps


def _play(design: str, steps: list[str], **kwargs: Any) -> ScheduleResult:
    try:
        return run_schedule(design, steps, **kwargs)
    except ScheduleError as exc:
        raise Wrong(f"the {design} design cannot play that: {exc}") from exc


def _trace(res: ScheduleResult) -> str:
    return "; ".join(f"{o.label} -> v{o.head}" for o in res.outcomes)


def _why_no_rewind(lww: ScheduleResult) -> str:
    """Why a schedule did not rewind lww, in terms of what a rewind needs: a late body, from
    the on-time host, landing after newer requests committed."""
    given_up = {o.request_id for o in lww.outcomes if o.kind == Kind.TIMEOUT and o.request_id}
    late = [
        k for k, o in enumerate(lww.outcomes) if o.kind == Kind.DELIVER and o.request_id in given_up
    ]
    if not late:
        return (
            "no body in your schedule lands after the loop gave up on its request, so each "
            "body that landed was computed from the head it replaced. A rewind needs a late "
            "body, computed from an old head."
        )

    def commits_after_request(k: int) -> int:
        rid = lww.outcomes[k].request_id or 0
        return sum(
            1
            for o in lww.outcomes[:k]
            if o.kind == Kind.DELIVER and o.committed and (o.request_id or 0) > rid
        )

    if all(commits_after_request(k) == 0 for k in late):
        return (
            "your late bodies land before any newer request has committed, so the head they "
            "overwrite is no newer than the one they were computed from."
        )
    if any(lww.outcomes[k].committed for k in late):
        return (
            "a late body won, but the version it wrote was no lower than the one a reader had "
            "already seen: a body computed from the head just before is one version behind at "
            "most. How far behind must the head have moved before it lands?"
        )
    return (
        "lww keeps the body with the newest updated_at; your late bodies were stamped older "
        "than what they met, so lww kept the newer write. Which host stamps on time, and "
        "which requests go to it?"
    )


def _check_lww(answer: Any) -> str:
    steps = _steps(answer)
    lww = _play("lww", steps, skews=HOST_SKEWS)
    if not lww.rewinds:
        on_time = _play("lww", steps)
        extra = ""
        if on_time.rewinds:
            extra = (
                " With every clock on time it would rewind, but here the late body came from "
                "host A, whose stamps run 10 behind, so lww refused it as older."
            )
        raise Wrong(
            f"under lww the reader never saw the head fall: {_why_no_rewind(lww)}{extra} "
            f"The trace: {_trace(lww)}."
        )
    ballot = _play("ballot", steps, skews=HOST_SKEWS)
    k = lww.first_rewind or 0
    saw = max(lww.heads[:k]) if k else 0
    return (
        f"at step {k + 1} ({steps[k]!r}) the reader saw version {lww.heads[k]} after {saw}: the "
        f"late body came from host B and carried the newest updated_at. The ballot design on "
        f"the same steps: {_trace(ballot)}."
    )


lww_rewind_ex = Exercise(
    name="Fool last-write-wins, skewed clocks",
    question=(
        "Two planner hosts: odd-numbered requests go to host A, whose clock runs 10 behind "
        "(labkit.exercises.HOST_SKEWS); even ones to host B, on time. Find a "
        "schedule ('deliver N', 'stale N', 'timeout [N]', 'crash'; requests numbered from 1) "
        "under which run_schedule('lww', steps, skews=HOST_SKEWS) rewinds: an independent "
        "reader sees the head fall. Answer a list of steps, shaped like ['deliver 2', "
        "'timeout 3', 'crash'] (another schedule)."
    ),
    checker=_check_lww,
    hints=(
        "Try notebook 05's counterexample with skews=HOST_SKEWS first and read .labels: why "
        "does the late body lose now? Which host must the late body come from?",
        "lww keeps the body with the newest updated_at, whatever version it was computed "
        "from. A rewind needs a body computed from an old head but stamped newest: the loop "
        "gives up on it, newer requests commit, and it is produced last, on the host whose "
        "clock is right.",
        "Build it in three moves: give up on a request whose host stamps on time (which "
        "requests go to it?); let newer requests commit until the head is ____ versions past "
        "the one that request's body was computed from; then let the given-up body land. "
        "Check each move with .labels before adding the next.",
    ),
    solution_text=(
        "['deliver 1', 'timeout', 'deliver 3', 'deliver 4', 'deliver 2']: 1 commits version 1; "
        "the loop gives up on 2; 3 and 4 commit versions 2 and 3; request 2's body, based on "
        "version 1 and produced last on the on-time host, has the newest updated_at and "
        "writes version 2 over version 3. "
        "answer = ['deliver 1', 'timeout', 'deliver 3', 'deliver 4', 'deliver 2']"
    ),
)


# --- lesson 05: Article 2's closing question, with other numbers and two give-ups ------------

CLOSING = {"window": 2, "ticks": 3, "first_request": 20}
GIVEN_UP = (20, 21)
FIRST_COMMIT = 22
LATE = frozenset({20, 21, 23})
# What notebook 05 teaches: a replay is a new request for work still wanted, compensation
# undoes a write that was made. In this story both replays go out before any late answer
# lands and no late body is written, so one decision fits and the check accepts that one.
RIGHT_DECISION = "reject"
DECISIONS = (RIGHT_DECISION, "reject, then replay", "replay", "compensate")


def _committed_at(res: ScheduleResult, rid: int) -> int | None:
    """The step at which request `rid` committed, if it did."""
    return next(
        (k for k, o in enumerate(res.outcomes) if o.request_id == rid and o.committed), None
    )


def _closing_parts(answer: Any) -> tuple[Any, Any]:
    if isinstance(answer, Mapping) and "schedule" in answer and "decision" in answer:
        return answer["schedule"], answer["decision"]
    if isinstance(answer, tuple | list) and len(answer) == 2 and isinstance(answer[1], str):
        return answer[0], answer[1]
    raise Wrong(
        "give a dict with a 'schedule' (a list of steps) and a 'decision' (one of "
        f"{list(DECISIONS)}), shaped like {{'schedule': ['timeout', 'deliver 21'], "
        "'decision': 'compensate'}"
    )


def _check_closing(answer: Any) -> str:
    schedule, decision = _closing_parts(answer)
    steps = _steps(schedule)
    lww = _play("lww", steps, **CLOSING)
    given_up = [o.request_id for o in lww.outcomes if o.kind != Kind.DELIVER]
    done = _committed_at(lww, FIRST_COMMIT)
    if done is None or given_up[: len(GIVEN_UP)] != list(GIVEN_UP):
        raise Wrong(
            f"the story starts with the loop giving up on {listing(GIVEN_UP)} and then "
            f"{FIRST_COMMIT} committing; under lww your schedule did: {_trace(lww)}"
        )
    after = {o.request_id for o in lww.outcomes[done + 1 :] if o.kind == Kind.DELIVER}
    if not LATE <= after:
        raise Wrong(
            f"after {FIRST_COMMIT} committed, your schedule never delivers "
            f"{listing(sorted(LATE - after))}; all of {listing(sorted(LATE))} must arrive then"
        )
    if not lww.rewinds:
        callback = _play("callback", steps, **CLOSING)
        extra = f" (callback does: {_trace(callback)})" if callback.rewinds else ""
        raise Wrong(
            f"lww never rewinds on that order: {_trace(lww)}{extra}. Which late body carries "
            "the newest updated_at, and what must have committed before it lands?"
        )
    safe = _play("ballot", steps, settle=True, **CLOSING)
    if safe.rewinds:  # the ballot invariant: a labkit bug, whatever the schedule
        raise RuntimeError(f"the ballot design rewound: {_trace(safe)}")
    if not isinstance(decision, str):
        raise Wrong(
            f"the decision is a string, one of {list(DECISIONS)}, not a {type(decision).__name__}"
        )
    said = word_choice(decision, DECISIONS)
    if said is None:
        raise Wrong(f"the decision must be one of {list(DECISIONS)}, not {shown(decision)}")
    if said == "compensate":
        raise Wrong(
            "there is nothing to compensate: under the ballot design the late bodies never "
            f"touched the catalog ({_trace(safe)}). Compensation undoes a write already made."
        )
    if said == "replay":
        raise Wrong(
            "a late body is never applied, neither now nor later: under the ballot design it "
            f"never reaches the catalog ({_trace(safe)}). And the work 20 and 21 stood for was "
            "already asked for again, each as a new request the moment the loop gave up on it "
            "(that is how 21 and 22 were sent), before their late answers landed"
        )
    if said != RIGHT_DECISION:
        raise Wrong(
            "look at the order of events: when the loop gave up on 20 and on 21 it asked for "
            "each one's work again at once, as a new request (that is how 21 and 22 were sent), "
            f"so both replays went out before any late answer landed ({_trace(safe)}). A replay "
            "is a new request for work still wanted; after the late answers none is left"
        )
    k = lww.first_rewind or 0
    return (
        f"lww rewound at step {k + 1} ({steps[k]!r}); the ballot design: {_trace(safe)}, with "
        f"{safe.replays} replay(s), each a new ballot. Reject; replay only work still wanted."
    )


closing_question_ex = Exercise(
    name="The closing question, renumbered",
    question=(
        "Article 2 ends by asking what to do when late ticks return after a newer one "
        "committed. Here: request 20 is out; the loop gives up on 20, then on 21; request 22 "
        "commits; afterwards 20, 21 and 23 all arrive (some maybe twice). Give a schedule "
        "(run_schedule(design, steps, window=2, ticks=3, first_request=20)) that makes 'lww' "
        "rewind, and what the safe loop does with the late responses: 'reject', 'reject, then "
        "replay', 'replay' or 'compensate'. Answer a dict with a 'schedule' (a list of steps) "
        "and a 'decision' (one of those four strings), shaped like {'schedule': ['timeout', "
        "'deliver 21'], 'decision': 'compensate'} (another answer)."
    ),
    checker=_check_closing,
    hints=(
        "Start with 'timeout', 'timeout', 'deliver 22'. Under lww the newest stamp wins: a "
        "body produced late wins even if it was computed from an old head. Which late "
        "request has the oldest base, and what must commit before it lands?",
        "For lww, let the head move twice before a given-up request lands for the first time: "
        "its body is based on version 0 but stamped last. For the decision, read the ballot "
        "design's trace of your schedule: did a late body ever reach the catalog, and when "
        "was the work it stood for asked for again: before or after it landed?",
        "Schedule: ['timeout', 'timeout', 'deliver 22', ____, 'deliver 20', 'deliver 21']. "
        "Decision: compensation undoes a write that was made, and a replay is a new request "
        "for work still wanted; which of the four is left when neither applies?",
    ),
    solution_text=(
        "{'schedule': ['timeout', 'timeout', 'deliver 22', 'deliver 23', 'deliver 20', "
        "'deliver 21'], 'decision': 'reject'}: lww writes 20's version-0 body, stamped last, "
        "over version 2, so the head falls to 1; the ballot loop answers unknown_ballot to 20 "
        "and 21 and keeps its head. Nothing is replayed after that: the work 20 and 21 stood "
        "for was sent again (as 21 and 22) when the loop gave up on each, before either late "
        "answer landed, and nothing is compensated because no late body was written. "
        "answer = {'schedule': ['timeout', 'timeout', 'deliver 22', 'deliver 23', "
        "'deliver 20', 'deliver 21'], 'decision': 'reject'}"
    ),
)


# --- lesson 04: fix a broken commit rule, boundaries first -----------------------------------

RULE_SEEDS = 20
RULE_STEPS = 30
RULE_WINDOW = 4

# Every boundary, applied to a loop in one fixed state (head 2): which ballot answers ...
BALLOT_CASES: dict[str, int] = {
    "in flight, owns the watermark": 5,
    "in flight, overtaken (the head has passed its fence)": 3,
    "fenced out earlier": 4,
    "abandoned": 6,
    "already committed": 2,
    "never reserved": 9,
}
# ... what it echoes, relative to the watermark the ballot observed (the head, if none) ...
ECHO_CASES = {"echo below": -1, "echo equal": 0, "echo above": 1}
# ... and what its body is based on, relative to the head.
BASE_CASES = {"base below the head": -1, "base equal to the head": 0, "base above the head": 1}


def _boundary_loop() -> WatermarkLoop:
    """Head 2; in flight: ballot 3 (observed 1, overtaken) and 5 (observed 2, owns the watermark);
    ballot 4 fenced out, 6 abandoned, 1 and 2 committed; 9 never reserved."""
    loop = WatermarkLoop(connect(), window=RULE_WINDOW)
    loop.reserve()
    loop.apply(Response(1, 0, 0, ("v1",)))
    for _ in range(3):
        loop.reserve()
    loop.apply(Response(2, 1, 1, ("v2",)))
    loop.apply(Response(4, 1, 1, ("late",)))
    loop.reserve()
    loop.abandon(loop.reserve().ballot_id)
    return loop


@dataclass(frozen=True)
class RuleCase:
    """One response to a loop in a known state, and what the real loop did with it."""

    label: str
    head: int
    inflight: dict[int, int]
    response: Response
    verdict: str
    inflight_after: dict[int, int]


def _apply_case(loop: WatermarkLoop, resp: Response, label: str) -> RuleCase:
    head, inflight = loop.head_version(), _inflight(loop)
    out = loop.apply(resp)
    verdict = COMMIT if out.committed else str(out.reason)
    return RuleCase(label, head, inflight, resp, verdict, _inflight(loop))


def boundary_cases() -> Iterator[RuleCase]:
    """Every (ballot state, echo, base) combination, each on a fresh loop in the same state."""
    for ballot_label, ballot in BALLOT_CASES.items():
        for echo_label, echo in ECHO_CASES.items():
            for base_label, base in BASE_CASES.items():
                loop = _boundary_loop()
                head = loop.head_version()
                observed = _inflight(loop).get(ballot, head)
                resp = Response(ballot, observed + echo, head + base, (f"body-{ballot}",))
                label = f"ballot {ballot_label}, {echo_label}, {base_label}"
                yield _apply_case(loop, resp, label)


def _random_response(
    rng: random.Random, loop: WatermarkLoop, known: list[int], next_id: int
) -> Response:
    head = loop.head_version()
    inflight = _inflight(loop)
    pick = rng.random()
    if inflight and pick < 0.6:
        b = rng.choice(sorted(inflight))
    elif known and pick < 0.85:
        b = rng.choice(known)
    else:
        b = next_id + rng.randint(0, 3)
    observed = inflight.get(b, head) + (0 if rng.random() < 0.7 else rng.randint(-2, 1))
    base = head + (0 if rng.random() < 0.7 else rng.randint(-2, 1))
    return Response(b, max(0, observed), max(0, base), (f"tool-{b}-{base}",))


def random_cases(seed: int) -> Iterator[RuleCase]:
    """Drive a real WatermarkLoop at random with the given random seed; yield each response."""
    rng = random.Random(seed)
    loop = WatermarkLoop(connect(), rng.randint(1, 3))
    known: list[int] = []
    for _ in range(RULE_STEPS):
        roll = rng.random()
        if roll < 0.35 and len(loop.inflight()) < loop.window:
            known.append(loop.reserve().ballot_id)
        elif roll < 0.4 and loop.inflight():
            loop.abandon(rng.choice(loop.inflight()).ballot_id)
        else:
            resp = _random_response(rng, loop, known, (max(known) if known else 0) + 1)
            yield _apply_case(loop, resp, f"random run, random seed {seed}")


def _judge(case: RuleCase, call: Call) -> str:
    """Judge the learner's rule on one case (its call, already made behind the walls); raise
    `Wrong` naming the case if it disagrees."""
    resp = case.response
    state = (
        f"[{case.label}] with head {case.head} and ballots in flight {case.inflight or '{}'} "
        f"(ballot: watermark it observed), the response (ballot {resp.ballot_id}, observed "
        f"watermark {resp.observed_watermark}, base {resp.base_version})"
    )
    if call.error is not None:
        raise Wrong(f"{state}: your rule {call.error}")
    theirs = call.args[0]
    said = _normalize_reason(call.value, "your rule's answer")
    if said != case.verdict:
        why = _mistake(said, case.verdict, resp, case.head, case.inflight, {})
        raise Wrong(f"{state}: your rule said {said!r}, which is not apply()'s decision: {why}")
    if theirs != case.inflight_after:
        b = resp.ballot_id
        if b in case.inflight_after and b not in theirs:
            why = (
                f"it took ballot {b} out of flight, where it must stay: it still owns the "
                "watermark, so its real answer may yet be written"
            )
        elif b in theirs and b not in case.inflight_after:
            why = f"it left ballot {b} in flight, which this response ends: " + (
                "its answer was written" if said == COMMIT else "the head has passed its watermark"
            )
        else:
            why = "it changed other ballots' entries; only the answering ballot may leave flight"
        raise Wrong(f"{state}: your rule said {said!r}, which is right, but {why}")
    return said


def _cases() -> Iterable[RuleCase]:
    yield from boundary_cases()
    for seed in range(RULE_SEEDS):
        yield from random_cases(seed)


def _check_rule(rule: Any) -> str:
    if not callable(rule):
        raise Wrong(
            f"give a function decide(inflight, head, response), not a {type(rule).__name__}"
        )
    cases = list(_cases())
    calls = learner_calls(rule, [(dict(c.inflight), c.head, c.response) for c in cases])
    seen: dict[str, int] = {}
    for case, call in zip(cases, calls, strict=False):  # calls stop at the first failure
        said = _judge(case, call)
        seen[said] = seen.get(said, 0) + 1
    counts = ", ".join(f"{k} {v}" for k, v in sorted(seen.items()))
    n_edges = len(BALLOT_CASES) * len(ECHO_CASES) * len(BASE_CASES)
    return (
        f"your rule agreed with WatermarkLoop.apply on all {n_edges} boundary cases and "
        f"{sum(seen.values()) - n_edges} random ones ({counts}), in flight included."
    )


apply_rule_ex = Exercise(
    name="Fix the commit rule",
    question=(
        "The starter rule accepts any body whose proposed head is not behind the current one. "
        "Rewrite decide(inflight, head, response) so it agrees with WatermarkLoop.apply. "
        "`inflight` maps each in-flight ballot id to the watermark it observed; `head` is the "
        "committed version. Return None to commit, else 'unknown_ballot', 'stale_watermark' or "
        "'stale_base'; and delete from `inflight` the ballot if this response takes it out of "
        "flight. Answer a function of those three arguments that returns None or one of the "
        "reason strings, like starter_decide in the notebook. The check tries every boundary "
        "(ballot in flight / overtaken / fenced out / decided / abandoned / unknown; echo and "
        "base below, equal, above) and random runs."
    ),
    checker=_check_rule,
    hints=(
        "Three questions, in a fixed order: is the ballot in flight? Is its watermark still "
        "the head, and echoed back unchanged? Is the body based on exactly the head (not "
        "below, not above)? Then: which outcomes mean this ballot can never commit?",
        "Test the questions in that order and return at the first 'no': not in `inflight` is "
        "unknown_ballot; a watermark that is not the head, or an echo that differs from it, "
        "is stale_watermark; a base that is not the head is stale_base; else commit. A "
        "ballot leaves flight when it commits or can never commit again: which of the "
        "refusals are those?",
        "b = response.ballot_id; if b not in inflight: return 'unknown_ballot'. "
        "If inflight[b] != head: ____ and return 'stale_watermark'. "
        "If the echo != inflight[b]: return ____ (does b stay?). "
        "If ____: return 'stale_base'. Otherwise ____ and return None.",
    ),
    solution_text=(
        "def decide(inflight, head, response):\n"
        "    b = response.ballot_id\n"
        "    if b not in inflight:\n"
        "        return 'unknown_ballot'\n"
        "    observed = inflight[b]\n"
        "    if observed != head:\n"
        "        del inflight[b]  # overtaken: fenced out, it can never commit\n"
        "        return 'stale_watermark'\n"
        "    if response.observed_watermark != observed:\n"
        "        return 'stale_watermark'\n"
        "    if response.base_version != head:\n"
        "        return 'stale_base'\n"
        "    del inflight[b]  # committed\n"
        "    return None\n"
        "answer = decide"
    ),
)


exercises: list[Exercise] = [
    rejection_reasons_ex,
    apply_rule_ex,
    lww_rewind_ex,
    closing_question_ex,
    crash_verdicts_ex,
]
# The notebook each exercise practises: notebooks/0N_... -> exercises/solutions/ex0N_...
by_lesson: dict[int, list[Exercise]] = {
    4: [rejection_reasons_ex, apply_rule_ex],
    5: [lww_rewind_ex, closing_question_ex],
    6: [crash_verdicts_ex],
}
