"""The planner and the reader both simulator drivers share.

`labkit.designs.simulator` (seeded, clocked) and `labkit.designs.arrival_orders` (hand-written
schedules) build a planner's response the same way (`respond`) and watch the catalog through the
same independent reader (`HeadReader`), so a rewind means the same thing in both.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import labkit.catalog.versions as catalog
from labkit.catalog.loop import Response
from labkit.designs.design import Design, Request


def draw_latency(rng: random.Random, mean: float, sigma: float) -> float:
    """One planner latency: lognormal with mean `mean` and shape `sigma` (a long right tail,
    as remote calls have). The simulator and the real service (`labkit.remote`) both draw here."""
    return rng.lognormvariate(math.log(mean) - sigma**2 / 2, sigma)


def host_skews(rng: random.Random, hosts: int, clock_skew: float) -> list[float]:
    """Each planner host's clock offset, uniform in [-clock_skew, clock_skew]."""
    return [rng.uniform(-clock_skew, clock_skew) for _ in range(hosts)]


def answer_tools(tools: Sequence[Any], request_id: int) -> tuple[Any, ...]:
    """The body this planner answers request `request_id` with, built on `tools`: the tools
    plus one new tool named after the request. A pipelined loop relies on it to state the
    base its next request builds on (the planner answers on top of its own last answer)."""
    return (*tools, f"tool-r{request_id}")


def respond(
    design: Design,
    request: Request,
    updated_at: float | None,
    *,
    stale: bool = False,
    stamped: bool = False,
) -> Response:
    """The planner's response to `request`: the tools at its base plus one new tool.

    With `stale` the body is computed from the version before the request's base and says so
    (its `base_version` is that older version); with `stamped` as well, the planner read the
    older version but stamps the response with the request's base, so no check on the base's
    version can see that the body is old (its `base_hash`, the hash of the tools it really
    built on, still can). An unguarded design sends no ballot, so its response carries
    the request id in its place.
    """
    base, tools = request.base_version, request.tools
    if stale:
        tools = design.tools_at(base - 1)
        base = base if stamped else base - 1
    ballot_id = request.ballot_id if request.ballot_id is not None else request.request_id
    body = answer_tools(tools, request.request_id)
    return Response(
        ballot_id, request.observed_watermark, base, body, updated_at, catalog.tools_hash(tools)
    )


@dataclass(frozen=True)
class Glance:
    """What the reader saw on one look at the head, compared with its earlier looks."""

    version: int
    rewind: bool  # the head is below the highest version seen before
    overwrite: bool  # same version as last look, different tools
    changed: bool  # version or tools differ from last look


class HeadReader:
    """An independent reader polling a design's head; it remembers what it saw."""

    def __init__(self, design: Design) -> None:
        self.design = design
        self.version, self.digest = design.read_head()
        self.max_seen = self.version

    def look(self) -> Glance:
        """Read the head now and say how it moved since the last look."""
        version, digest = self.design.read_head()
        glance = Glance(
            version=version,
            rewind=version < self.max_seen,
            overwrite=version == self.version and digest != self.digest,
            changed=(version, digest) != (self.version, self.digest),
        )
        self.version, self.digest = version, digest
        self.max_seen = max(self.max_seen, version)
        return glance
