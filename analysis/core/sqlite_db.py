"""The SQLite plumbing the app's stores share (the workspace store, :mod:`analysis.core.workspace`, and the job
records, :mod:`analysis.jobs.queue`): write transactions taken at once, plain reads, and a versioned schema brought
up to date once per process and file through an ordered list of migrations (a newer schema is refused)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from analysis.errors import DataError

_LOCK = threading.Lock()
#: The databases :func:`migrate` brought up to date in this process (cleared, a restart migrates again).
MIGRATED: set[Path] = set()


@contextmanager
def transaction(connect: Callable[[], sqlite3.Connection]) -> Iterator[sqlite3.Connection]:
    """One write transaction on a new connection (taken at once, so two writers never interleave a check and a
    write); rolled back on any exception."""
    with closing(connect()) as c:
        c.execute("BEGIN IMMEDIATE")
        try:
            yield c
        except BaseException:
            c.execute("ROLLBACK")
            raise
        c.execute("COMMIT")


def read(
    connect: Callable[[], sqlite3.Connection], sql: str, args: tuple[Any, ...] = ()
) -> list[tuple[Any, ...]]:
    """The rows of one query, on a new connection."""
    with closing(connect()) as c:
        return c.execute(sql, args).fetchall()


def schema_version(c: sqlite3.Connection) -> int:
    """The schema version a database is at (0: empty)."""
    if not c.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_version'").fetchone():
        return 0
    row = c.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def migrate(
    db: Path, connect: Callable[[], sqlite3.Connection], migrations: Sequence[str], version: int, what: str
) -> None:
    """Bring the database `db` to `version` (WAL mode; `migrations[v]` takes it from v to v + 1, statements
    separated by ``;``, all in one transaction), once per process and file; DataError for a database written by a
    newer version (`what` names the store in the message)."""
    key = db.resolve()
    with _LOCK:
        if key in MIGRATED and db.exists():
            return
        with closing(connect()) as c:
            c.execute("PRAGMA journal_mode = WAL")
            c.execute("BEGIN IMMEDIATE")
            try:
                c.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                v = schema_version(c)
                if v > version:
                    raise DataError(f"the {what} {db} was written by a newer Tokenizer Lab "
                                    f"(schema {v}; this one knows up to {version})")  # fmt: skip
                for step in range(v, version):
                    for stmt in migrations[step].split(";"):
                        if stmt.strip():
                            c.execute(stmt)
                c.execute("DELETE FROM schema_version")
                c.execute("INSERT INTO schema_version VALUES (?)", (version,))
            except BaseException:
                c.execute("ROLLBACK")
                raise
            c.execute("COMMIT")
        MIGRATED.add(key)
