"""Tables written once: one spec per table renders both backends' DDL (issue 32).

A `Table` lists its columns, table constraints and indexes; `Table.ddl(backend)` renders the
`CREATE TABLE IF NOT EXISTS` statement SQLite or PostgreSQL runs, `Table.statements(backend)`
adds the table's indexes. Where the backends differ, the spec says so in one place:

* a column's `Type` names its type on each backend (`INTEGER` is SQLite's 64-bit integer and
  PostgreSQL's `bigint`; `REAL` is `double precision` there), and a type that is None on one
  backend makes the column the other's alone (`conversations.xact_id`, PostgreSQL's);
* a clause that differs is a `Both` (`SERIAL_KEY`: SQLite's AUTOINCREMENT, PostgreSQL's
  identity), empty on a backend that has no such clause;
* an `Index` can be one backend's alone (`only`).

Every table a store makes is a spec (tests/test_table_specs.py fails on a `CREATE TABLE`
written by hand outside this module, and on a table specified twice). The rendering is laid
out for a reader: names and types in columns, a CHECK that would make its line too long on a
line of its own. SQLite keeps the text of a `CREATE TABLE` (without IF NOT EXISTS: `Table.ddl`
with `if_not_exists=False`), which is how a store tells a table it made from someone else's
table of the same name (`labkit.catalog.versions.require_columns`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from labkit.backend import BACKENDS, BackendName

# A column line longer than this puts its last clause (a CHECK) on a line of its own.
WRAP_AT = 90
# Types are padded to the longest of them up to this width; a longer one takes one space.
TYPE_WIDTH_MAX = 8
INDENT = "    "


@dataclass(frozen=True)
class Both:
    """Text that differs between the backends: SQLite's and PostgreSQL's, side by side ("" for a
    backend that has none)."""

    sqlite: str
    postgres: str

    def on(self, backend: BackendName) -> str:
        """This text on `backend`."""
        return self.sqlite if backend == "sqlite" else self.postgres


def on(text: str | Both, backend: BackendName) -> str:
    """`text` on `backend`: the same on both unless it is a `Both`."""
    return text.on(backend) if isinstance(text, Both) else text


@dataclass(frozen=True)
class Type:
    """A column's type on each backend; None where the column does not exist."""

    sqlite: str | None
    postgres: str | None

    def on(self, backend: BackendName) -> str | None:
        """The type's name on `backend` (None: the column is not there)."""
        return self.sqlite if backend == "sqlite" else self.postgres


# The types the workbook's tables use. Both backends store 64-bit integers (SQLite's INTEGER
# always is), so an id, a version or a count is `INTEGER`.
INTEGER = Type("INTEGER", "bigint")
INT32 = Type("INTEGER", "integer")  # PostgreSQL's `integer` is 32-bit; SQLite's is not
FLAG = Type("INTEGER", "smallint")  # 0 or 1
TEXT = Type("TEXT", "text")
REAL = Type("REAL", "double precision")
XID8 = Type(None, "xid8")  # PostgreSQL's transaction id; SQLite has none

# The key of a table whose ids the database hands out, never reused.
SERIAL_KEY = Both("PRIMARY KEY AUTOINCREMENT", "GENERATED ALWAYS AS IDENTITY PRIMARY KEY")


@dataclass(frozen=True)
class Column:
    """One column: its name, its `Type` and its clauses (constraints, in order), each the same
    text on both backends unless it is a `Both`."""

    name: str
    type: Type
    clauses: tuple[str | Both, ...] = ()

    def on(self, backend: BackendName) -> bool:
        """Whether the column exists on `backend`."""
        return self.type.on(backend) is not None


@dataclass(frozen=True)
class Index:
    """An index of the table it is listed in: its columns (as written in the statement), an
    optional WHERE clause (a partial index), and the backend it is `only` on, if just one."""

    name: str
    columns: str
    where: str | None = None
    unique: bool = False
    only: BackendName | None = None

    def ddl(self, table: str) -> str:
        """`CREATE [UNIQUE] INDEX IF NOT EXISTS` on `table`."""
        kind = "UNIQUE INDEX" if self.unique else "INDEX"
        where = f" WHERE {self.where}" if self.where else ""
        return (
            f"CREATE {kind} IF NOT EXISTS {self.name}\n{INDENT}ON {table} ({self.columns}){where}"
        )


@dataclass(frozen=True)
class Table:
    """One table, written once for both backends: columns, table constraints (one a line, each
    the same on both unless a `Both`) and indexes."""

    name: str
    columns: tuple[Column, ...]
    constraints: tuple[str | Both, ...] = ()
    indexes: tuple[Index, ...] = field(default=())

    def __post_init__(self) -> None:
        for backend in BACKENDS:
            names = self.columns_on(backend)
            if len(set(names)) != len(names) or not names:
                raise ValueError(f"table {self.name}: its columns on {backend} are {names}")

    def columns_on(self, backend: BackendName) -> tuple[str, ...]:
        """The names of the columns the table has on `backend`, in order."""
        return tuple(c.name for c in self.columns if c.on(backend))

    def ddl(self, backend: BackendName, *, if_not_exists: bool = True) -> str:
        """The `CREATE TABLE` statement `backend` runs (IF NOT EXISTS unless told otherwise:
        without it, the text SQLite keeps in `sqlite_master`)."""
        columns = [c for c in self.columns if c.on(backend)]
        name_width = max(len(c.name) for c in columns)
        types = {c.name: c.type.on(backend) or "" for c in columns}
        type_width = max(len(t) for t in types.values() if len(t) <= TYPE_WIDTH_MAX)
        lines = []
        for c in columns:
            head = f"{INDENT}{c.name:<{name_width}} {types[c.name]:<{type_width}}"
            clauses = [text for text in (on(clause, backend) for clause in c.clauses) if text]
            line = " ".join([head, *clauses]).rstrip()
            if len(line) > WRAP_AT and len(clauses) > 1:
                under_type = " " * (len(INDENT) + name_width + 1)
                line = " ".join([head, *clauses[:-1]]).rstrip() + "\n" + under_type + clauses[-1]
            lines.append(line)
        lines += [INDENT + text for text in (on(c, backend) for c in self.constraints) if text]
        exists = " IF NOT EXISTS" if if_not_exists else ""
        return f"CREATE TABLE{exists} {self.name} (\n" + ",\n".join(lines) + "\n)"

    def indexes_on(self, backend: BackendName) -> tuple[Index, ...]:
        """The table's indexes on `backend`."""
        return tuple(i for i in self.indexes if i.only in (None, backend))

    def statements(self, backend: BackendName) -> tuple[str, ...]:
        """The table's DDL on `backend`, then its indexes'."""
        return (self.ddl(backend), *(i.ddl(self.name) for i in self.indexes_on(backend)))

    def names(self, backend: BackendName) -> tuple[str, ...]:
        """Every relation the statements make on `backend`: the table, then its indexes."""
        return (self.name, *(i.name for i in self.indexes_on(backend)))


def statements(tables: tuple[Table, ...], backend: BackendName) -> tuple[str, ...]:
    """Every table's statements on `backend`, in order."""
    return tuple(s for t in tables for s in t.statements(backend))


def script(tables: tuple[Table, ...], backend: BackendName) -> str:
    """`statements` as one script (each statement ends with `;` and a new line)."""
    return "".join(f"{s};\n" for s in statements(tables, backend))
