"""Small blocking calls to a planner service (switch faults, read status and knobs), and the
one rule that keeps all of it on this machine: every URL must be http://127.0.0.1."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Collection
from typing import Any
from urllib.parse import urlsplit

import labkit.remote.knobs as knobs
from labkit import validation
from labkit.remote.faults import check_service_faults

CONTROL_TIMEOUT_S = 5.0


class PlannerUnreachable(ConnectionError):
    """The planner service did not answer; the message is one line naming its URL."""


def check_loopback(url: Any, *, path: bool = False) -> str:
    """`url` if it is an http URL on 127.0.0.1 with a port, and nothing else (a path too with
    `path`: a callback's endpoint); `ValueError` in one line if not."""
    if not isinstance(url, str):
        raise ValueError(f"a URL on http://127.0.0.1 is expected, got {url!r}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        port, parts = None, None
    if (
        parts is None
        or parts.scheme != "http"
        or parts.hostname != "127.0.0.1"
        or port is None
        or parts.netloc != f"127.0.0.1:{port}"  # no user, password or stray characters
        or (parts.path not in ("", "/") and not path)
        or not url.startswith("http://")
        or not 0 < port
        or "?" in url
        or "#" in url
        or not url.isprintable()
        or url != url.strip()
    ):
        raise ValueError(f"{url!r}: only http://127.0.0.1:PORT is allowed (loopback only)")
    return url.rstrip("/")


def call(
    url: str,
    path: str,
    body: Any = None,
    *,
    method: str = "GET",
    timeout: float = CONTROL_TIMEOUT_S,
) -> Any:
    """One JSON call to the service at `url`; `PlannerUnreachable` names the URL if it does
    not answer, `ValueError` carries the service's one-line refusal."""
    base = check_loopback(url)
    timeout = knobs.seconds(timeout, "call(): timeout")
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        base + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as reply:
            raw = reply.read()
    except urllib.error.HTTPError as exc:
        raise ValueError(f"{base}{path}: {exc.read().decode(errors='replace').strip()}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PlannerUnreachable(
            f"planner at {base} did not answer within {timeout:g} s ({reason})"
        ) from None
    return json.loads(raw) if raw else None


def set_faults(url: str, faults: Collection[str], seed: int | None = None) -> dict[str, Any]:
    """Switch the service's faults while it runs (re-armed above the head it has seen).
    `faults` is checked here as `serve` checks it, before any call."""
    body: dict[str, Any] = {"faults": list(check_service_faults(faults))}
    if seed is not None:
        body["seed"] = validation.int_arg(seed, "set_faults(): seed")
    return call(url, "/faults", body, method="PUT")


def faults(url: str) -> dict[str, Any]:
    """The faults switched on and their seed."""
    return call(url, "/faults")


def status(url: str) -> dict[str, int]:
    """What the service did so far: requests, delivered, refused, retried, dropped, pending."""
    return call(url, "/status")


def config(url: str, *, timeout: float = CONTROL_TIMEOUT_S) -> dict[str, Any]:
    """The service's knobs (latency, sigma, hosts, timeout, ...)."""
    return call(url, "/config", timeout=knobs.seconds(timeout, "config(): timeout"))
