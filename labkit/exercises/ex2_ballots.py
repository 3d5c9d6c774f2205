"""Exercise set two, ballots and the catalog watermark (notebooks 04-06): predict
`WatermarkLoop`'s verdicts, fool last-write-wins, answer seed two's closing question and fix a
broken apply rule. Every check drives the real `WatermarkLoop` and `labkit.arrivals`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from labkit.arrivals import DELIVER, ScheduleError, ScheduleResult, run_schedule
from labkit.db import connect
from labkit.exercises.kit import Exercise, Wrong, learner_call, listing
from labkit.watermark_loop import REASONS, Response, WatermarkLoop

COMMIT = "commit"

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
    loop = WatermarkLoop(connect(), window=3)
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
    return "; ".join(f"{o.label} -> v{o.head}" for o in res.outcomes)


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
    done = next(
        (k for k, o in enumerate(res.outcomes) if o.request_id == rid and o.committed), None
    )
    if done is None:
        return None, set()
    after = {o.request_id for o in res.outcomes[done + 1 :] if o.kind == DELIVER}
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
            f"after 13 committed, your schedule never delivers {listing(lacking)}; both 12 and "
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
    if safe.rewinds:  # the ballot invariant: a labkit bug, whatever the schedule
        raise RuntimeError(f"the ballot design rewound: {_trace(safe)}")
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
    loop = WatermarkLoop(connect(), rng.randint(1, 3))
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
            said = learner_call(f"{state}: your rule", rule, dict(inflight), head, resp)
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


exercises: list[Exercise] = [
    rejection_reasons_ex,
    lww_rewind_ex,
    closing_question_ex,
    apply_rule_ex,
]
