"""Where a learner's SQL runs: `sqlite` (one statement on a copy of the checker's SQLite
database) and `pg` (a throwaway schema on a PostgreSQL server, as the check's own role, made
and dropped by `pg_walls`), each inside the process walls of `labkit.walls`, which
`kit` also puts around a learner's Python. The exercises beside this folder use them.
"""
