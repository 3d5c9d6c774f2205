"""The one planner response and the one independent reader both simulator drivers use."""

from __future__ import annotations

import pytest

from labkit.ballot import Response
from labkit.catalog.versions import tools_hash
from labkit.designs.design import Request
from labkit.designs.planner import HeadReader, respond
from labkit.designs.registry import DESIGNS, check_design, make_design
from labkit.designs.simulator import PlannerConfig


def test_respond_builds_the_body_from_the_base_and_falls_back_to_the_request_id() -> None:
    design = make_design("callback")
    req = Request(7, None, observed_watermark=0, base_version=0, tools=("a",))
    built_on = tools_hash(("a",))  # the planner states the tool list it built on
    assert respond(design, req, 1.5) == Response(7, 0, 0, ("a", "tool-r7"), 1.5, built_on)
    guarded = Request(7, 3, observed_watermark=0, base_version=0, tools=())
    assert respond(design, guarded, None).ballot_id == 3


def test_a_stale_response_is_computed_from_the_version_before_its_base() -> None:
    design = make_design("ballot")
    first = design.start(0.0)[0]
    (second,) = design.on_response(first, respond(design, first, 1.0), 1.0).sends
    assert second.base_version == 1
    stale = respond(design, second, 2.0, stale=True)
    assert stale.base_version == 0 and stale.tools == (f"tool-r{second.request_id}",)
    assert stale.base_hash == tools_hash(()) != respond(design, second, 2.0).base_hash
    assert respond(design, second, 2.0).tools == (
        f"tool-r{first.request_id}",
        f"tool-r{second.request_id}",
    )


def test_the_reader_reports_changes_rewinds_and_overwrites() -> None:
    design = make_design("callback")
    reader = HeadReader(design)
    assert not reader.look().changed
    req = design.start(0.0)[0]
    design.on_response(req, respond(design, req, 1.0), 1.0)
    up = reader.look()
    assert (up.version, up.changed, up.rewind, up.overwrite) == (1, True, False, False)
    design.on_response(req, Response(1, 0, 0, ("other",), 2.0), 2.0)  # v1 again, new body
    same = reader.look()
    assert (same.version, same.changed, same.overwrite, same.rewind) == (1, True, True, False)
    design.on_response(req, Response(1, 0, -1, (), 3.0), 3.0)  # the callback writes v0
    fell = reader.look()
    assert fell.rewind and fell.version == 0
    assert reader.look().rewind  # still below the v1 it saw


def test_design_names_are_checked_by_one_function() -> None:
    assert [check_design(d) for d in DESIGNS] == list(DESIGNS)
    for bad in ("nope", None, ["ballot"]):
        with pytest.raises(ValueError, match="unknown design .*expected one of callback, lww"):
            check_design(bad)
    with pytest.raises(ValueError, match="unknown design 'CAS'"):
        make_design("CAS")  # keys are exact: the fifth design is "cas"
    assert make_design("cas").name == "cas"


def test_stamped_stale_body_keeps_the_request_base_but_the_old_tools() -> None:
    design = make_design("cas")
    first = design.start(0.0)[0]
    design.on_response(first, respond(design, first, 1.0), 1.0)
    (second,) = design.awaited()
    honest = respond(design, second, 2.0, stale=True)
    stamped = respond(design, second, 2.0, stale=True, stamped=True)
    assert (honest.base_version, stamped.base_version) == (0, 1)
    assert honest.tools == stamped.tools == ("tool-r2",)  # read from v0, which had no tools


def test_planner_config_checks_its_own_fields() -> None:
    assert PlannerConfig(ticks=3, timeout=None).timeout_ == 3.0
    with pytest.raises(ValueError, match="^timeout must be a finite number > 0, got 0$"):
        PlannerConfig(timeout=0)
    with pytest.raises(ValueError, match="^hosts must be an integer, got 2.0$"):
        PlannerConfig(hosts=2.0)  # type: ignore[arg-type]
