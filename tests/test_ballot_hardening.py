"""Bad input to the loop: malformed responses, a vanished database file, a corrupt log.

Each is refused with a one-line error naming what was wrong, and the store is left exactly as
it was; a malformed response whose ballot the fence rejects anyway is recorded as rejected.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from backends import BACKENDS, in_transaction, open_store, rows

from labkit.ballot import Response, ResponseError, WatermarkLoop
from labkit.catalog.versions import CatalogCorruptError
from labkit.db import DatabaseReplacedError, connect

TABLES = ("catalog_versions", "wm_store", "wm_ballots", "wm_responses")


def snapshot(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the loop's tables: 'nothing changed' means this is equal before and after."""
    return {t: rows(conn, f"SELECT * FROM {t} ORDER BY 1") for t in TABLES}


@pytest.fixture(params=BACKENDS)
def loop(request: pytest.FixtureRequest) -> WatermarkLoop:
    lp = WatermarkLoop(open_store(request, request.param).connect(), window=2)
    b = lp.reserve()
    assert lp.apply(b.answer(["v1"])).committed
    return lp


def owning(loop: WatermarkLoop, **fields: Any) -> Response:
    """A response for a fresh ballot that owns the watermark, with some fields overridden."""
    b = loop.reserve()
    good = {
        "ballot_id": b.ballot_id,
        "observed_watermark": b.watermark,
        "base_version": b.base_version,
        "tools": ["ok"],
        "updated_at": None,
    }
    return Response(**{**good, **fields})


BAD_FIELDS = [
    ({"ballot_id": "2"}, "ballot_id must be an int, got str"),
    ({"ballot_id": None}, "ballot_id must be an int, got NoneType"),
    ({"ballot_id": True}, "ballot_id must be an int, got bool"),
    ({"ballot_id": 2.0}, "ballot_id must be an int, got float"),
    ({"observed_watermark": None}, "observed_watermark must be an int"),
    ({"base_version": "1"}, "base_version must be an int"),
    ({"ballot_id": 2**63}, "ballot_id 9223372036854775808 is outside"),
    ({"observed_watermark": -(2**63) - 1}, "observed_watermark .* is outside"),
    ({"base_version": 10**30}, "base_version .* is outside"),
    ({"updated_at": float("nan")}, "updated_at must be None or a finite number"),
    ({"updated_at": float("inf")}, "updated_at must be None or a finite number"),
    ({"updated_at": "noon"}, "updated_at must be None or a finite number"),
    ({"tools": "abc"}, "tools must be a list or tuple, got str"),
    ({"tools": {"search": 1}}, "tools must be a list or tuple, got dict"),
    ({"tools": None}, "tools must be a list or tuple, got NoneType"),
    ({"tools": ["a", float("nan")]}, "tools are not storable as standard JSON"),
    ({"tools": [{"w": float("-inf")}]}, "tools are not storable as standard JSON"),
    ({"tools": [object()]}, "tools are not storable as standard JSON"),
    ({"tools": [{1: "a", "b": 2}]}, "tools are not storable as standard JSON"),
]


@pytest.mark.parametrize(("fields", "message"), BAD_FIELDS, ids=[m for _, m in BAD_FIELDS])
def test_a_malformed_response_is_refused_by_name_and_changes_nothing(
    loop: WatermarkLoop, fields: dict[str, Any], message: str
) -> None:
    resp = owning(loop, **fields)
    before = snapshot(loop.conn)
    with pytest.raises(ResponseError, match=message):
        loop.apply(resp)
    assert snapshot(loop.conn) == before
    assert not in_transaction(loop.conn)


def test_the_owning_ballot_stays_in_flight_after_a_bad_body(loop: WatermarkLoop) -> None:
    resp = owning(loop, tools="abc")
    with pytest.raises(ResponseError):
        loop.apply(resp)
    fixed = Response(resp.ballot_id, resp.observed_watermark, resp.base_version, ["a", "b", "c"])
    assert loop.apply(fixed).committed  # its real answer still commits
    assert loop.head_version() == 2


def test_a_response_is_not_a_look_alike(loop: WatermarkLoop) -> None:
    with pytest.raises(ResponseError, match="takes a Response, got tuple"):
        loop.apply((2, 1, 1, ["x"]))  # type: ignore[arg-type]


def test_numpy_integers_are_ints() -> None:
    lp = WatermarkLoop(connect())
    b = lp.reserve()
    out = lp.apply(Response(np.int64(b.ballot_id), np.int32(b.watermark), np.int64(0), ("t",)))
    assert out.committed and out.ballot_id == 1 and type(out.ballot_id) is int


def test_a_forged_unserialisable_response_for_a_fenced_out_ballot_is_recorded(
    loop: WatermarkLoop,
) -> None:
    a, b = loop.reserve(), loop.reserve()  # both observed watermark 1
    assert loop.apply(b.answer(["from b"])).committed
    forged = a.answer([object()])
    out = loop.apply(forged)
    assert (out.committed, out.reason, out.version) == (False, "stale_watermark", 2)
    assert loop.inflight() == []  # the fenced-out ballot left flight
    found = rows(
        loop.conn,
        "SELECT tools_hash, committed, reason FROM wm_responses WHERE ballot_id = ?",
        (a.ballot_id,),
    )
    assert found == [("invalid", 0, "stale_watermark")]


def test_a_malformed_body_for_an_unknown_ballot_is_an_ordinary_rejection(
    loop: WatermarkLoop,
) -> None:
    before = rows(loop.conn, "SELECT * FROM catalog_versions")
    out = loop.apply(Response(99, 1, 1, "abc"))
    assert (out.committed, out.reason) == (False, "unknown_ballot")
    assert rows(loop.conn, "SELECT * FROM catalog_versions") == before


# --- the database file vanished or was replaced ----------------------------------------------


def test_a_deleted_database_file_refuses_every_write(tmp_path: Path) -> None:
    path = tmp_path / "wm.db"
    lp = WatermarkLoop(connect(path))
    b = lp.reserve()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with pytest.raises(DatabaseReplacedError, match=r"wm\.db: the database file was deleted"):
        lp.apply(b.answer(["lost?"]))
    with pytest.raises(DatabaseReplacedError, match="deleted"):
        lp.reserve()
    with pytest.raises(DatabaseReplacedError, match="deleted"):
        lp.abandon(b.ballot_id)
    assert not lp.conn.in_transaction and lp.head_version() == 0  # nothing was written


def test_a_replaced_database_file_refuses_writes(tmp_path: Path) -> None:
    path, other = tmp_path / "wm.db", tmp_path / "other.db"
    lp = WatermarkLoop(connect(path))
    b = lp.reserve()
    WatermarkLoop(connect(other)).conn.close()
    os.replace(other, path)
    with pytest.raises(DatabaseReplacedError, match="replaced by another file"):
        lp.apply(b.answer(["v1"]))
    assert not lp.conn.in_transaction
    assert lp.conn.execute("SELECT COUNT(*) FROM wm_responses").fetchone()[0] == 0


# --- a corrupt log is never appended to -----------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("UPDATE catalog_versions SET tools = '[\"v1\"' WHERE version = 1", "version 1: .*JSON"),
        (
            "UPDATE catalog_versions SET tools = '[\"x\"]' WHERE version = 1",
            "version 1: tools_hash",
        ),
    ],
    ids=["broken-json", "hash-mismatch"],
)
def test_the_loop_refuses_to_open_on_a_corrupt_log(tmp_path: Path, sql: str, message: str) -> None:
    path = tmp_path / "wm.db"
    lp = WatermarkLoop(connect(path))
    b = lp.reserve()
    lp.apply(b.answer(["v1"]))
    lp.reserve()
    lp.conn.execute(sql)
    before = snapshot(lp.conn)
    with pytest.raises(CatalogCorruptError, match=message):
        WatermarkLoop(connect(path))
    assert snapshot(connect(path)) == before


def test_a_decision_that_never_lands_gives_up_with_contention_error(
    loop: WatermarkLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every lost race means another loop made progress, so the retry loop is bounded: if the
    guard kept matching nothing, the caller gets a `ContentionError`, not a hang."""
    from labkit.ballot import ContentionError
    from labkit.catalog import loop as wl

    monkeypatch.setattr(wl, "MAX_ATTEMPTS", 3)
    tries = []
    with pytest.raises(ContentionError, match="3 attempts in a row lost the race"):
        loop._decide(lambda: tries.append(1))  # an attempt whose write never lands
    assert len(tries) == 3 and loop.lost_races == 3
    assert not in_transaction(loop.conn)  # every attempt ended its transaction
