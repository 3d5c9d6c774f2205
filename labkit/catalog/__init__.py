"""Part two, the catalog watermark. This face is the catalog log's API (`versions`); beside it:
`versions_pg` (what PostgreSQL does around them: schema lock, durability check), `rule` (the
commit rule, one pure decision), `loop` (WatermarkLoop: ballots and guarded writes), `loop_pg`
(how PostgreSQL runs the loop's decisions), `pipeline` and `hold` (pipelined ballots, each step
one transaction), `crashlab` and `crash_child` (real killed loops)
and `storeview` (what is on disk).
"""

from labkit.catalog.versions import (
    APPEND_SQL,
    CatalogCorruptError,
    CatalogReader,
    CatalogVersion,
    RewindError,
    append,
    create_schema,
    head,
    head_hash,
    head_of,
    history,
    history_frame,
    json_hash,
    read_version,
    tools_hash,
    tools_json,
    verify,
    version_row,
)

__all__ = [
    "APPEND_SQL",
    "append",
    "create_schema",
    "head",
    "head_hash",
    "head_of",
    "history",
    "history_frame",
    "json_hash",
    "read_version",
    "tools_hash",
    "tools_json",
    "verify",
    "version_row",
    "CatalogCorruptError",
    "CatalogReader",
    "CatalogVersion",
    "RewindError",
]
