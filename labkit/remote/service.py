"""The planner service: a real HTTP server on 127.0.0.1 (aiohttp) that answers plan requests
late, out of order and at least once, with the simulator's latency draw and fault classes.

Endpoints: `POST /loops/{name}` registers a loop's callback URL (a restarted loop registers
again and is then owed what its dead predecessor was; a fresh one starts from nothing);
`DELETE /loops/{name}` is a loop's goodbye (what it is still owed is dropped); `POST /plan`
accepts a request (202, with the host and the fault it drew) and the answer is POSTed to the
loop's callback when it is ready; `GET`/`PUT /faults` reads or switches the faults while
running; `GET /config` the knobs; `GET /status` what happened so far.

Delivery is at-least-once: an answer whose callback does not respond (the loop is down) is
tried again every `retry_every` seconds for `redeliver_for` seconds, then dropped; a 4xx from
the callback is a refusal and final. `duplicate` is injected by the service itself, as a
second POST of the same answer after its own latency: the webhook way an at-least-once planner
delivers twice, chosen over a client-side retry so that the service seeds and decides it.

A bad request gets a 4xx and one line, and changes nothing: a body that is not strict JSON
(`labkit.remote.wire.load_json`: no NaN, no Infinity, nested at most `MAX_DEPTH` deep), a plan
whose tools the catalog could not store, a body cut short. A client's fault costs at most one
line of log, never a traceback (`labkit.remote.serving`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import threading
import time
from collections import Counter
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

import labkit.remote.knobs as knobs
from labkit import validation
from labkit.catalog.loop import Response
from labkit.designs.design import Request
from labkit.designs.planner import draw_latency, host_skews, respond
from labkit.designs.simulator import PlannerConfig
from labkit.remote.control import check_loopback
from labkit.remote.faults import FaultSwitch
from labkit.remote.serving import BodyRefused, QuietServerLog, read_body
from labkit.remote.wire import answer_body, load_json, read_request

HOST = "127.0.0.1"
START_TIMEOUT_S = 10.0
MAX_REQUEST_BYTES = 1024 * 1024  # a request body longer than this is refused (413) unread
MAX_SIGMA = 10.0  # the latency draw's shape: far wider ones overflow the draw


@dataclass
class _Loop:
    """What the service knows of one loop: where to call it back, its seed, the highest base
    its requests named (the head as the planner can see it) and the tools at each base (the
    cache a stale body is answered from)."""

    callback: str | None = None
    closed: bool = False  # the loop said goodbye: what it is still owed is dropped
    seed: int = 0
    head: int = 0
    tools: dict[int, tuple[Any, ...]] = field(default_factory=dict)

    def tools_at(self, version: int) -> tuple[Any, ...]:
        """The cached tools at `version` (what `respond` builds a stale body from)."""
        return self.tools.get(version, ())


@dataclass
class _Held:
    """An answer the planner sits on until the loop's head reaches `until`."""

    loop: _Loop
    until: int
    req: Request
    resp: Response
    fault: str
    rng: random.Random


class Planner:
    """The service's state and behaviour; runs inside the server's event loop."""

    def __init__(
        self,
        cfg: PlannerConfig,
        switch: FaultSwitch,
        skews: list[float],
        retry_every: float,
        redeliver_for: float,
    ) -> None:
        self.cfg, self.switch = cfg, switch
        self.skews = skews
        self.fast_host = max(range(cfg.hosts), key=self.skews.__getitem__)
        self.retry_every, self.redeliver_for = retry_every, redeliver_for
        self.loops: dict[str, _Loop] = {}
        self.held: list[_Held] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.counts: Counter[str] = Counter()
        self.session: aiohttp.ClientSession | None = None

    def accept(self, name: str, req: Request) -> tuple[int, str | None]:
        """Take one plan request: draw its host and latency, decide its faults, schedule its
        answer(s). Returns the host and the fault it carries (as the simulator's send row)."""
        self.counts["requests"] += 1
        loop = self.loops.setdefault(name, _Loop())
        loop.head = max(loop.head, req.base_version)
        loop.tools.setdefault(req.base_version, req.tools)
        rng = random.Random(f"{loop.seed}:{req.request_id}")
        host = rng.randrange(self.cfg.hosts)
        latency = draw_latency(rng, self.cfg.latency, self.cfg.sigma)
        latency2 = draw_latency(rng, self.cfg.latency, self.cfg.sigma)
        dup = self.switch.on("duplicate") and rng.random() < self.cfg.duplicate_rate
        base = req.base_version
        stale = base >= 1 and base - 1 in loop.tools and self.switch.take("stale_body", base, name)
        fault = "stale_body" if stale else None
        if self.switch.take("inverted", base, name):
            resp = respond(loop, req, None, stale=stale)  # type: ignore[arg-type]
            self.held.append(_Held(loop, resp.base_version + 2, req, resp, "inverted", rng))
            fault = "inverted"
        else:
            stamp = time.time() + latency + self.skews[host]
            resp = respond(loop, req, stamp, stale=stale)  # type: ignore[arg-type]
            if self.switch.take("stall", base, name):
                fault = "stall"
                self.later(loop, latency + self.cfg.stall_, req, resp, host, fault)
            else:
                self.later(loop, latency, req, resp, host, fault)
            if dup:
                self.later(loop, latency2, req, resp, host, "duplicate")
            if self.switch.take("retry_after_commit", base, name):
                fault = fault or "retry_after_commit"
                self.held.append(
                    _Held(loop, resp.base_version + 2, req, resp, "retry_after_commit", rng)
                )
        self.release(loop)
        return host, fault

    def release(self, loop: _Loop) -> None:
        """Send the held answers of `loop` whose head has moved far enough."""
        ready = [h for h in self.held if h.loop is loop and loop.head >= h.until]
        self.held = [h for h in self.held if h not in ready]
        for h in ready:
            delay = draw_latency(h.rng, self.cfg.latency, self.cfg.sigma)
            resp, host = h.resp, None
            if h.fault == "inverted":  # finished late, stamped late by the fastest clock
                host = self.fast_host
                resp = dataclasses.replace(resp, updated_at=time.time() + delay + self.skews[host])
            self.later(loop, delay, h.req, resp, host, h.fault)

    def close(self, loop: _Loop) -> None:
        """`loop` is gone for good: what it is still owed is dropped, held answers included."""
        loop.callback, loop.closed = None, True
        self.held = [h for h in self.held if h.loop is not loop]

    def later(
        self,
        loop: _Loop,
        delay: float,
        req: Request,
        resp: Response,
        host: int | None,
        fault: str | None,
    ) -> None:
        """Deliver one answer to `loop` after `delay` seconds (at least once)."""
        task = asyncio.get_running_loop().create_task(
            self.deliver(loop, delay, answer_body(req.request_id, resp, host, fault))
        )
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def deliver(self, loop: _Loop, delay: float, body: bytes) -> None:
        """POST `body` to the loop's current callback (a restarted loop's, if it died and came
        back); retry while it does not respond; drop it once the loop said goodbye."""
        await asyncio.sleep(delay)
        give_up = time.monotonic() + self.redeliver_for
        while True:
            if loop.closed:
                self.counts["dropped"] += 1
                return
            status = await self.post(loop.callback, body)
            if status is not None and 200 <= status < 300:
                self.counts["delivered"] += 1
                return
            if status is not None and 400 <= status < 500:
                self.counts["refused"] += 1
                return
            if time.monotonic() >= give_up:
                self.counts["dropped"] += 1
                return
            self.counts["retried"] += 1
            await asyncio.sleep(self.retry_every)

    async def post(self, url: str | None, body: bytes) -> int | None:
        """The callback's HTTP status, or None if there is none or it did not respond."""
        if url is None or self.session is None:
            return None
        try:
            async with self.session.post(
                url,
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=max(1.0, 4 * self.cfg.latency)),
            ) as reply:
                return reply.status
        except (TimeoutError, aiohttp.ClientError, OSError):
            return None

    def status(self) -> dict[str, int]:
        """Counts so far, and the answers not yet delivered (`pending`)."""
        keys = ("requests", "delivered", "refused", "retried", "dropped")
        return {**{k: self.counts[k] for k in keys}, "pending": len(self.tasks) + len(self.held)}

    def config(self) -> dict[str, Any]:
        """The knobs a loop needs (its default timeout is the simulator's: 3 mean latencies)."""
        c = self.cfg
        return {
            "latency": c.latency,
            "sigma": c.sigma,
            "duplicate_rate": c.duplicate_rate,
            "clock_skew": c.clock_skew,
            "hosts": c.hosts,
            "stall_time": c.stall_,
            "timeout": c.timeout_,
            "span": self.switch.span,
        }


def _app(planner: Planner) -> web.Application:
    """The HTTP face of `planner`; a bad body gets 400 and one line."""
    routes = web.RouteTableDef()

    async def body_of(request: web.Request) -> dict[str, Any]:
        try:
            body = load_json(await read_body(request, MAX_REQUEST_BYTES), "request body")
        except BodyRefused as exc:
            raise exc.http() from None
        except ValueError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(text="request body must be a JSON object")
        return body

    @routes.post("/loops/{name}")
    async def register(request: web.Request) -> web.Response:
        body = await body_of(request)
        callback, seed = body.get("callback"), body.get("seed", 0)
        try:
            check_loopback(callback, path=True)
        except ValueError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        if not validation.is_int(seed):
            raise web.HTTPBadRequest(text=f"'seed' must be an integer, got {seed!r}")
        name = request.match_info["name"]
        if body.get("fresh") and name in planner.loops:  # a new run under an old name
            planner.close(planner.loops.pop(name))  # owes nothing of the old one's
            planner.switch.forget(name)
        loop = planner.loops.setdefault(name, _Loop())
        loop.callback, loop.seed, loop.closed = callback, seed, False
        return web.Response(status=204)

    @routes.delete("/loops/{name}")
    async def goodbye(request: web.Request) -> web.Response:
        loop = planner.loops.get(request.match_info["name"])
        if loop is not None:
            planner.close(loop)
        return web.Response(status=204)

    @routes.post("/plan")
    async def plan(request: web.Request) -> web.Response:
        try:
            name, req = read_request(await body_of(request))
        except ValueError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        host, fault = planner.accept(name, req)
        return web.json_response({"host": host, "fault": fault}, status=202)

    @routes.get("/faults")
    async def faults(request: web.Request) -> web.Response:
        sw = planner.switch
        return web.json_response({"faults": sorted(sw.faults), "seed": sw.seed})

    @routes.put("/faults")
    async def switch(request: web.Request) -> web.StreamResponse:
        body = await body_of(request)
        heads = {name: loop.head for name, loop in planner.loops.items()}
        try:
            seed = body.get("seed", planner.switch.seed)
            if not validation.is_int(seed):
                raise ValueError(f"'seed' must be an integer, got {seed!r}")
            planner.switch.arm(body.get("faults", ()), seed, heads)
        except ValueError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        return await faults(request)

    @routes.get("/config")
    async def config(request: web.Request) -> web.Response:
        return web.json_response(planner.config())

    @routes.get("/status")
    async def status(request: web.Request) -> web.Response:
        return web.json_response(planner.status())

    app = web.Application()
    app.add_routes(routes)
    return app


class _ServerThread(threading.Thread):
    """The server's own event loop in a daemon thread (so an interrupted kernel never hangs)."""

    def __init__(self, planner: Planner) -> None:
        super().__init__(name="labkit-planner", daemon=True)
        self.planner = planner
        self.url: str | None = None
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopping: asyncio.Event | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to the thread that waits in `start`
            self.error = exc
            self.ready.set()

    async def _main(self) -> None:
        self.loop, self.stopping = asyncio.get_running_loop(), asyncio.Event()
        runner = web.AppRunner(_app(self.planner), access_log=None, logger=QuietServerLog())
        await runner.setup()
        self.planner.session = aiohttp.ClientSession()
        try:
            site = web.TCPSite(runner, HOST, 0)
            await site.start()
            self.url = f"http://{HOST}:{runner.addresses[0][1]}"
            self.ready.set()
            await self.stopping.wait()
        finally:
            for task in list(self.planner.tasks):
                task.cancel()
            await asyncio.gather(*self.planner.tasks, return_exceptions=True)
            await self.planner.session.close()
            await runner.cleanup()

    def start_serving(self) -> str:
        self.start()
        if not self.ready.wait(START_TIMEOUT_S) or self.url is None:
            self.stop()
            raise RuntimeError(f"planner service did not start: {self.error or 'timed out'}")
        return self.url

    def stop(self) -> None:
        if self.loop is not None and self.stopping is not None and not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self.stopping.set)
            except RuntimeError:  # the loop closed in between: nothing left to stop
                pass
        self.join(START_TIMEOUT_S)


@contextmanager
def serve(
    faults: Collection[str] = (),
    seed: int = 0,
    hosts: int = 3,
    *,
    latency: float = 0.02,
    sigma: float = 0.5,
    duplicate_rate: float = 0.25,
    clock_skew: float | None = None,
    stall_time: float | None = None,
    span: int = 5,
    retry_every: float | None = None,
    redeliver_for: float = 10.0,
) -> Iterator[str]:
    """A planner service on 127.0.0.1 for the `with` block; yields its base URL.

    Times are seconds: `latency` is the mean of the simulator's lognormal draw (shape `sigma`),
    `clock_skew` each host's clock offset bound (default half a latency, as the simulator's
    0.5 units), `stall_time` the extra delay of `stall` (default 8 latencies). `faults` are the
    simulator's classes but `crash`; `seed` draws the hosts' skews and the fault targets, each
    within `span` versions of the start (with `span` = ticks - 3 and a `run` of the same seed,
    the very targets, hosts and latencies `simulate` draws). An undelivered answer is tried
    again every `retry_every` seconds (default a latency, at least `knobs.MIN_INTERVAL_S`) for
    `redeliver_for` seconds (0: tried once). The server stops when the block ends, by an error
    or an interrupt too. A bad knob is refused in one line naming it, before anything starts.
    """
    seed = validation.int_arg(seed, "serve(): seed")
    hosts = knobs.count(hosts, "serve(): hosts", high=knobs.MAX_HOSTS)
    span = knobs.count(span, "serve(): span", high=knobs.MAX_SPAN)
    latency = knobs.seconds(latency, "serve(): latency")
    sigma = validation.number_arg(sigma, "serve(): sigma", at_least=0.0, at_most=MAX_SIGMA)
    duplicate_rate = validation.number_arg(
        duplicate_rate, "serve(): duplicate_rate", at_least=0.0, at_most=1.0
    )
    if clock_skew is not None:
        clock_skew = knobs.seconds(clock_skew, "serve(): clock_skew", zero=True)
    if stall_time is not None:
        stall_time = knobs.seconds(stall_time, "serve(): stall_time", zero=True)
    every = (
        max(latency, knobs.MIN_INTERVAL_S)
        if retry_every is None
        else knobs.interval(retry_every, "serve(): retry_every")
    )
    redeliver_for = knobs.seconds(redeliver_for, "serve(): redeliver_for", zero=True)
    cfg = PlannerConfig(
        latency=latency,
        sigma=sigma,
        duplicate_rate=duplicate_rate,
        hosts=hosts,
        clock_skew=0.5 * latency if clock_skew is None else clock_skew,
        stall_time=stall_time,
    )
    rng = random.Random(seed)  # skews, then the first targets: the simulator's order
    skews = host_skews(rng, cfg.hosts, cfg.clock_skew)
    switch = FaultSwitch(faults, seed, span, rng=rng)
    server = _ServerThread(Planner(cfg, switch, skews, every, redeliver_for))
    url = server.start_serving()
    try:
        yield url
    finally:
        server.stop()
