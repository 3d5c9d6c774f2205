"""Part three, both lessons on a real PostgreSQL server. This face is the server with no set-up
(`instance`); beside it: `commit_order` (two writers stepped by hand), `stress` (the
concurrent stress run of each rule) and `ballots` (the lost update stepped live, worker
processes on one catalog).
"""

from labkit.pg.instance import (
    CONNECT_TIMEOUT_S,
    ENV,
    HOW_TO,
    PgUnavailable,
    Server,
    connect,
    mask_dsn,
    probe,
    scratch_schema,
    search_path_option,
    server,
    server_or_reason,
    shared_server,
    stop_shared_server,
)

__all__ = [
    "CONNECT_TIMEOUT_S",
    "ENV",
    "HOW_TO",
    "connect",
    "mask_dsn",
    "probe",
    "scratch_schema",
    "search_path_option",
    "server",
    "server_or_reason",
    "shared_server",
    "stop_shared_server",
    "PgUnavailable",
    "Server",
]
