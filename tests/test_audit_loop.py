"""`python -m labkit audit loop MODULE:FACTORY`: loops written the way a reader writes them get
their shortest falling schedule (exit 1), careful loops and labkit's own get none (exit 0), the
printed schedule replays to a fall, and a bad target, a raising or a hanging loop end in one
line (exit 2)."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest

from labkit.__main__ import main
from labkit.audit.loop import FIXTURE
from labkit.audit.loop_design import load_factory, play
from labkit.designs.arrival_orders import explore, run_schedule

# A reader's module: loops as a reader writes them, state in Python, the connection ignored.
READER_LOOPS = '''
from types import SimpleNamespace as NS
import time


class CallbackLoop:
    """Writes each answer into the catalog as it arrives: version = the body's base + 1."""

    def __init__(self, conn):
        self.head, self.next = 0, 1

    def reserve(self):
        head = self.head_version()
        b = NS(ballot_id=self.next, watermark=head, base_version=head)
        self.next += 1
        return b

    def apply(self, r):
        self.head = r.base_version + 1
        return NS(committed=True, reason=None)

    def head_version(self):
        return self.head

    def abandon(self, ballot_id):
        return True


class AnyAnswerLoop(CallbackLoop):
    """Checks that a ballot is its own and echoes its fence, and commits fence + 1: but it
    forgets that it gave a ballot up, so any answer of one of its ballots commits."""

    def __init__(self, conn):
        super().__init__(conn)
        self.issued = {}

    def reserve(self):
        b = super().reserve()
        self.issued[b.ballot_id] = b.watermark
        return b

    def apply(self, r):
        fence = self.issued.pop(r.ballot_id, None)
        if fence is None or r.observed_watermark != fence:
            return NS(committed=False, reason="unknown_ballot")
        self.head = fence + 1
        return NS(committed=True, reason=None)


class CarefulLoop(AnyAnswerLoop):
    """A ballot loop: commits only a ballot in flight whose fence and base are the head."""

    def apply(self, r):
        fence = self.issued.pop(r.ballot_id, None)
        current = fence == self.head == r.observed_watermark == r.base_version
        if not current:
            return NS(committed=False, reason="stale")
        self.head += 1
        return NS(committed=True, reason=None)

    def abandon(self, ballot_id):
        return self.issued.pop(ballot_id, None) is not None


class RaisingLoop(CallbackLoop):
    def apply(self, r):
        if r.ballot_id == 2:
            raise KeyError("ballot 2 not found")
        return super().apply(r)


class HangingLoop(CallbackLoop):
    def apply(self, r):
        while True:
            time.sleep(0.05)


class OwnConnectionLoop(CallbackLoop):
    """The callback loop with its head in a database of its own and a lock: no deep copy."""

    def __init__(self, conn):
        import sqlite3
        import threading

        super().__init__(conn)
        self.lock = threading.Lock()
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE TABLE head (v INTEGER)")
        self.db.execute("INSERT INTO head VALUES (0)")

    def apply(self, r):
        with self.lock:
            self.db.execute("UPDATE head SET v = ?", (r.base_version + 1,))
        return NS(committed=True, reason=None)

    def head_version(self):
        return self.db.execute("SELECT v FROM head").fetchone()[0]


NOT_A_FACTORY = 42
'''


@pytest.fixture
def reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The module `readerloops` on the path (the child process forks with it)."""
    (tmp_path / "readerloops.py").write_text(textwrap.dedent(READER_LOOPS))
    (tmp_path / "broken_module.py").write_text("import no_such_package_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "readerloops"
    for name in ("readerloops", "broken_module"):
        sys.modules.pop(name, None)


def _audit(capsys: pytest.CaptureFixture[str], target: str, *more: str) -> tuple[int, list, str]:
    code = main(["audit", "loop", target, "--json", *more])
    out = capsys.readouterr()
    return code, [json.loads(line) for line in out.out.splitlines()], out.err


def _fall(objs: list[dict]) -> dict:
    (fall,) = [o for o in objs if o["kind"] == "fall"]
    return fall


def test_a_loop_writing_in_its_callback_gets_the_shortest_fall(
    reader: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, objs, err = _audit(capsys, f"{reader}:CallbackLoop")
    assert (code, err) == (1, "")
    fall = _fall(objs)
    assert fall["schedule"] == ["deliver 1", "deliver 2", "deliver 1"]
    assert fall["heads"] == [1, 2, 1]
    # Independent: the workbook's model search finds the same shortest schedule for its own
    # callback design, and the schedule falls when replayed on that design.
    assert [str(s) for s in explore("callback", 4).shortest or []] == fall["schedule"]
    assert run_schedule("callback", fall["schedule"]).rewinds
    summary = objs[-1]
    assert summary["kind"] == "summary" and summary["rewinding"] >= 1


def test_a_loop_that_cannot_be_copied_is_replayed_and_still_falls(
    reader: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, objs, err = _audit(capsys, f"{reader}:OwnConnectionLoop")
    assert (code, err) == (1, "")
    assert _fall(objs)["schedule"] == ["deliver 1", "deliver 2", "deliver 1"]
    assert objs[-1]["orders"] == _audit(capsys, f"{reader}:CallbackLoop")[1][-1]["orders"]


def test_the_search_is_bounded_by_n(reader: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The callback loop's shortest fall takes three deliveries: n = 2 finds none, 3 finds it."""
    assert _audit(capsys, f"{reader}:CallbackLoop", "--n", "2")[0] == 0
    assert _audit(capsys, f"{reader}:CallbackLoop", "--n", "3")[0] == 1


def test_a_loop_that_forgets_given_up_ballots_falls_and_the_schedule_replays(
    reader: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, objs, _ = _audit(capsys, f"{reader}:AnyAnswerLoop")
    assert code == 1
    fall = _fall(objs)
    assert fall["schedule"][0] == "timeout" and fall["schedule"][-1] == "deliver 1"
    assert objs[-1]["fixture"] == "holds"  # Article 2's fixture alone does not catch it
    # The printed schedule, fed back through the explorer's runner on a new loop, falls at
    # its last step, and none of its prefixes does.
    again = play(load_factory(f"{reader}:AnyAnswerLoop"), fall["schedule"])
    assert again["first_fall"] == len(fall["schedule"]) - 1
    assert again["heads"] == fall["heads"]
    assert again["heads"][-1] < max(again["heads"][:-1])


@pytest.mark.parametrize("target", ["CarefulLoop", "labkit.catalog.loop:WatermarkLoop"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_careful_loops_never_fall(
    reader: str, capsys: pytest.CaptureFixture[str], target: str, n: int
) -> None:
    full = target if ":" in target else f"{reader}:{target}"
    code, objs, err = _audit(capsys, full, "--n", str(n))
    assert (code, err) == (0, "")
    (summary,) = objs
    assert summary["rewinding"] == 0 and summary["orders"] > 0
    assert summary["fixture"] == "holds"
    assert summary["fixture_schedule"] == [str(s) for s in FIXTURE]


@pytest.mark.parametrize("target", ["CallbackLoop", "CarefulLoop"])
def test_n_4_takes_well_under_a_minute(
    reader: str, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    began = time.monotonic()
    _audit(capsys, f"{reader}:{target}", "--n", "4")
    assert time.monotonic() - began < 60


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("readerloops", "write MODULE:FACTORY"),
        ("no_such_module_xyz:Loop", "cannot import no_such_module_xyz: ModuleNotFoundError"),
        ("broken_module:Loop", "cannot import broken_module: ModuleNotFoundError"),
        ("readerloops:NoSuchLoop", "readerloops has no NoSuchLoop"),
        ("readerloops:NOT_A_FACTORY", "NOT_A_FACTORY is a int, not callable"),
    ],
)
def test_a_bad_target_is_one_line_and_exit_2(
    reader: str, capsys: pytest.CaptureFixture[str], target: str, said: str
) -> None:
    code = main(["audit", "loop", target])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    assert out.err.count("\n") == 1 and target in out.err and said in out.err


def test_a_raising_loop_is_one_line_naming_the_step(
    reader: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["audit", "loop", f"{reader}:RaisingLoop"])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    assert out.err.count("\n") == 1
    assert "the loop raised KeyError" in out.err and "deliver 2" in out.err


def test_a_hanging_loop_is_stopped_by_the_wall(
    reader: str, capsys: pytest.CaptureFixture[str]
) -> None:
    began = time.monotonic()
    code = main(["audit", "loop", f"{reader}:HangingLoop", "--seconds", "1"])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    assert out.err.count("\n") == 1 and "ran longer than 1 s, so it was stopped" in out.err
    assert time.monotonic() - began < 20


@pytest.mark.parametrize("n", ["0", "9"])
def test_n_out_of_range_is_refused(reader: str, capsys: pytest.CaptureFixture[str], n: str) -> None:
    assert main(["audit", "loop", f"{reader}:CarefulLoop", "--n", n]) == 2
    assert "--n" in capsys.readouterr().err


# `--service VERSIONS`: the loop runs for real against the planner service (every planner fault
# on) and a second reader process counts the falls against its reads: Article 2's denominator.


def _service(objs: list[dict]) -> tuple[list[dict], dict]:
    seen = [o for o in objs if o.get("observer") == "reader process"]
    return seen, objs[-1]["service"]


def test_on_the_service_a_callback_loop_falls_and_each_fall_is_one_the_reader_read(
    reader: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, objs, err = _audit(capsys, f"{reader}:CallbackLoop", "--service", "12")
    assert (code, err) == (1, "")
    seen, run = _service(objs)
    assert run["finished"] and run["head"] == 12 and run["reader_failure"] is None
    assert run["falls"] == len(seen) >= 1 and run["reads"] > run["falls"]
    assert run["falls_per_1000_reads"] == round(1000 * run["falls"] / run["reads"], 3)
    # Each fall is a change of the head the reader process read, to a lower version, and the
    # reader's changes chain: each starts where the one before it ended.
    changes = run["changes"]
    assert [[f["at"], f["before"], f["after"]] for f in seen] == [c for c in changes if c[2] < c[1]]
    assert [c[1] for c in changes] == [run["first"], *(c[2] for c in changes[:-1])]
    # The search's own finding, the shortest falling schedule, is still there.
    assert [o["schedule"] for o in objs if "schedule" in o] == [
        ["deliver 1", "deliver 2", "deliver 1"]
    ]


@pytest.mark.parametrize("target", ["CarefulLoop", "labkit.catalog.loop:WatermarkLoop"])
def test_on_the_service_a_careful_loop_reaches_its_versions_and_never_falls(
    reader: str, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    full = target if ":" in target else f"{reader}:{target}"
    code, objs, err = _audit(capsys, full, "--service", "12")
    assert (code, err) == (0, "")
    (summary,) = objs
    run = summary["service"]
    assert (run["falls"], run["head"], run["finished"]) == (0, 12, True)
    assert run["reads"] > 0 and run["changes"] and all(c[2] > c[1] for c in run["changes"])


def test_the_service_falls_are_in_the_text_and_the_figure(
    reader: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    figure = tmp_path / "loop.svg"
    args = ["audit", "loop", f"{reader}:CallbackLoop", "--service", "12", "--figure", str(figure)]
    assert main(args) == 1
    text = capsys.readouterr().out
    verdict = text.splitlines()[-1]
    assert "on the service" in verdict and "reads" in verdict
    falls = [line for line in text.splitlines() if "reader process saw the head fall" in line]
    svg = figure.read_text()
    assert falls and all(f'id="fall-service-{k}"' in svg for k in range(1, len(falls) + 1))
    assert f'id="fall-service-{len(falls) + 1}"' not in svg


@pytest.mark.parametrize("versions", ["0", "1001"])
def test_service_out_of_range_is_refused(
    reader: str, capsys: pytest.CaptureFixture[str], versions: str
) -> None:
    assert main(["audit", "loop", f"{reader}:CarefulLoop", "--service", versions]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--service" in err


def test_the_driver_refuses_a_design_that_is_not_one() -> None:
    from labkit.remote.driver import run

    with pytest.raises(TypeError, match="a design's name or a callable"):
        run(42, "http://127.0.0.1:1", ticks=1)  # type: ignore[arg-type]


def test_the_driver_refuses_a_made_design_missing_a_method_in_one_line() -> None:
    from labkit.remote.driver import run
    from labkit.remote.service import serve

    with serve() as url, pytest.raises(TypeError, match=r"^run\(\): the design made .* lacks "):
        run(object, url, ticks=1, deadline=5)
