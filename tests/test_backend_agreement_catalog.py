"""Every public function of part two that takes a connection, run on SQLite and on PostgreSQL
with the same steps: the same result on both, or (storeview, SQLite's own file view) one line
that names the function and the backend (marker `postgres`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import pandas as pd
import psycopg
import pytest
from backends import Store, open_store, rows

from labkit import backend
from labkit.catalog import storeview
from labkit.catalog import versions as catalog
from labkit.catalog.loop import WatermarkLoop

pytestmark = pytest.mark.postgres


@pytest.fixture
def stores(request: pytest.FixtureRequest) -> tuple[Store, Store]:
    """An empty SQLite file and an empty PostgreSQL schema."""
    return open_store(request, "sqlite"), open_store(request, "postgres")


def on_both(stores: tuple[Store, Store], steps: Callable[[Any], Any]) -> Any:
    """Run `steps` on a new connection to each store; return the one result they agree on."""
    lite, pg = (steps(store.connect()) for store in stores)
    assert lite == pg
    return lite


def outcome(call: Callable[[], Any]) -> Any:
    """What a call returned, or its refusal as text (the same words must come back)."""
    try:
        return call()
    except Exception as exc:  # the kind and the words are what must agree
        return f"{type(exc).__name__}: {exc}"


def grown(conn: Any, bodies: list[list[str]]) -> Any:
    """A catalog with genesis ["g"] and one version per body (fixed clock)."""
    catalog.create_schema(conn, ["g"], now=0.0)
    d = backend.dialect(conn)
    for i, body in enumerate(bodies):
        with d.atomic(conn):
            catalog.append(conn, body, ballot_id=i + 1, base_version=i, now=float(i + 1))
    return conn


def test_create_schema_makes_genesis_once(stores: tuple[Store, Store]) -> None:
    def steps(conn: Any) -> Any:
        catalog.create_schema(conn, ["g"], now=0.0)
        catalog.create_schema(conn, ["other"], now=1.0)  # idempotent: genesis stays
        return catalog.history(conn)

    genesis = catalog.CatalogVersion(0, ["g"], catalog.tools_hash(["g"]), None, None, 0.0)
    assert on_both(stores, steps) == [genesis]


def test_head_and_head_hash(stores: tuple[Store, Store]) -> None:
    def steps(conn: Any) -> Any:
        at_genesis = catalog.head(grown(conn, [])), catalog.head_hash(conn)
        d = backend.dialect(conn)
        for v in (0, 1):
            with d.atomic(conn):
                catalog.append(conn, [f"t{v}"], ballot_id=v + 1, base_version=v, now=0.0)
        return at_genesis, catalog.head(conn), catalog.head_hash(conn)

    assert on_both(stores, steps) == (
        (0, (0, catalog.tools_hash(["g"]))),
        2,
        (2, catalog.tools_hash(["t1"])),
    )


def test_append_returns_the_version_and_the_log_refuses_a_fork(
    stores: tuple[Store, Store],
) -> None:
    def steps(conn: Any) -> Any:
        catalog.create_schema(conn, now=0.0)
        d = backend.dialect(conn)
        with d.atomic(conn):
            first = catalog.append(conn, ["a"], ballot_id=1, base_version=0, now=1.0)
        try:
            with d.atomic(conn):
                catalog.append(conn, ["b"], ballot_id=2, base_version=0, now=2.0)  # v1 again
        except (sqlite3.IntegrityError, psycopg.IntegrityError):
            refused = True
        else:
            refused = False
        return first, refused, catalog.head(conn)

    assert on_both(stores, steps) == (1, True, 1)


def test_read_version_history_and_history_frame(stores: tuple[Store, Store]) -> None:
    def steps(conn: Any) -> Any:
        grown(conn, [["a"], ["a", {"k": 1}]])
        frame = catalog.history_frame(conn)
        return (
            catalog.read_version(conn, 2),
            catalog.read_version(conn, 9),
            catalog.history(conn),
            frame.to_dict("list"),
            frame.dtypes.to_dict(),
        )

    got = on_both(stores, steps)
    assert got[0].tools == ["a", {"k": 1}] and got[1] is None and len(got[2]) == 3
    assert got[4]["ballot_id"] == pd.Int64Dtype()


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE catalog_versions SET tools = '[\"x\"]' WHERE version = 1",
        "UPDATE catalog_versions SET tools = '[\"x\"' WHERE version = 1",
    ],
    ids=["hash", "json"],
)
def test_verify_names_the_same_corruption(stores: tuple[Store, Store], tamper: str) -> None:
    def steps(conn: Any) -> Any:
        grown(conn, [["a"], ["b"]])
        ok = catalog.verify(conn)
        with backend.dialect(conn).atomic(conn):
            conn.execute(tamper)
        return ok, outcome(lambda: catalog.verify(conn))

    ok, refused = on_both(stores, steps)
    assert ok == 2 and refused.startswith("CatalogCorruptError: version 1")


def test_catalog_reader_records_and_refuses_a_fall(stores: tuple[Store, Store]) -> None:
    def steps(conn: Any) -> Any:
        grown(conn, [["a"], ["b"]])
        reader = catalog.CatalogReader(conn, "r")
        first = reader.last_seen(), reader.poll(), reader.last_seen()
        with backend.dialect(conn).atomic(conn):
            conn.execute("DELETE FROM catalog_versions WHERE version = 2")
        again = catalog.CatalogReader(conn, "r")  # as after a restart
        return first, outcome(again.poll), again.last_seen()

    assert on_both(stores, steps) == (
        (None, 2, 2),
        "RewindError: catalog rewound: reader 'r' saw version 2, now sees 1",
        2,
    )


def test_a_reader_may_keep_its_state_on_the_other_backend(stores: tuple[Store, Store]) -> None:
    lite, pg = (grown(store.connect(), [["a"]]) for store in stores)
    for conn, state in ((lite, pg), (pg, lite)):
        reader = catalog.CatalogReader(conn, f"from {backend.dialect(conn).name}", state=state)
        assert reader.poll() == 1 and reader.last_seen() == 1


def test_every_loop_method_agrees(stores: tuple[Store, Store]) -> None:
    def steps(conn: Any) -> Any:
        ticks = iter(range(1, 100))
        loop = WatermarkLoop(conn, window=3, clock=lambda: float(next(ticks)))
        seen: list[Any] = [loop.head_version(), loop.inflight()]
        a, b, c = loop.reserve(), loop.reserve(), loop.reserve()
        fresh = a.answer(["a"])
        seen += [a, b, c, loop.inflight(), loop.checks(fresh), loop.apply(fresh)]
        late = b.answer(["b"])
        seen += [
            loop.checks(late),
            loop.apply(late),
            loop.abandon(c.ballot_id),
            loop.abandon(c.ballot_id),
            loop.replay(c),
            loop.inflight(),
            loop.head_version(),
        ]
        seen.append(outcome(lambda: loop.reserve() and loop.reserve() and loop.reserve()))
        tables = ("catalog_versions", "wm_ballots", "wm_store")
        return seen, [rows(conn, f"SELECT * FROM {t} ORDER BY 1") for t in tables]

    seen, _ = on_both(stores, steps)
    assert seen[-1].startswith("WindowFullError: window of 3")


@pytest.mark.parametrize(
    "view",
    [storeview.overview, lambda c: storeview.table(c, "catalog_versions")],
    ids=["overview", "table"],
)
def test_storeview_refuses_a_postgres_connection_in_one_line(
    stores: tuple[Store, Store], view: Callable[[Any], Any]
) -> None:
    lite, pg = (store.connect() for store in stores)
    WatermarkLoop(lite), WatermarkLoop(pg)
    assert len(view(lite)) > 0
    with pytest.raises(
        backend.UnsupportedBackend,
        match=r"^storeview\.\w+ works on sqlite only;"
        r" it was handed a postgres connection$",
    ) as info:
        view(pg)
    assert "\n" not in str(info.value)
