"""SQLite as memsite's derived and journal files use it."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def connect(path: Path) -> sqlite3.Connection:
    """A connection in WAL mode that waits for other writers (several processes share these files)."""
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # a killed process loses nothing; as durable as git by default
    return db


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at once (BEGIN IMMEDIATE), rolled back if the block raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def statements(insert: str, rows: list[tuple[Any, ...]]) -> list[tuple[str, list[Any]]]:
    """``insert`` (ending in VALUES) for ``rows``, in order, as few statements as 999 parameters allow."""
    if not rows:
        return []
    width = len(rows[0])
    per = 999 // width
    group = f"({', '.join('?' * width)})"
    return [(insert + ", ".join([group] * len(chunk)), [value for row in chunk for value in row])
            for chunk in (rows[start : start + per] for start in range(0, len(rows), per))]


# SQLITE_CORRUPT and SQLITE_NOTADB: the file is damaged (a lock, a full disk or a read-only file is not).
_DAMAGE_CODES = {11, 26}
COMPANIONS = ("-wal", "-shm", "-journal")
# Every text memsite stores is UTF-8: text that is not was damaged on disk, where SQLite's checks do not look.
_UNDECODABLE = "Could not decode to UTF-8"


class Damaged(sqlite3.DatabaseError):
    """A row memsite wrote no longer reads back as a value it could have written: damage SQLite does not see."""


def is_damage(exc: BaseException) -> bool:
    """Whether ``exc`` says a SQLite file is damaged (garbage, truncated), rather than busy or out of space."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    message = str(exc)
    if isinstance(exc, Damaged) or message.startswith(_UNDECODABLE):
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _DAMAGE_CODES
    return "not a database" in message or "malformed" in message


def intact(path: Path) -> bool:
    """Whether the SQLite file at ``path`` (if any) reads back whole.

    ``PRAGMA integrity_check`` (which, unlike ``quick_check``, compares each
    index with its table, so a damaged value in an indexed column shows),
    then every row of every table read once, so text that is no longer
    UTF-8 shows too. It reads the whole file: for repairs and the doctor,
    not for every open.
    """
    if not path.exists():
        return True
    try:
        db = sqlite3.connect(path, timeout=30)
        try:
            if db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                return False
            tables = db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                "AND coalesce(sql, '') NOT LIKE 'CREATE VIRTUAL%'").fetchall()
            for (table,) in tables:
                for _ in db.execute(f'SELECT * FROM "{table.replace(chr(34), chr(34) * 2)}"'):
                    pass
            return True
        finally:
            db.close()
    except UnicodeDecodeError:  # SQLite's own message quoted bytes of the damaged file
        return False
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            return False
        raise


def set_aside(path: Path, when: datetime) -> Path:
    """Rename the damaged file ``path`` (and its -wal, -shm) to ``<name>.damaged-<UTC time>``; returns the new name.

    Kept, not deleted: what it held may still be wanted by a person.
    """
    stamp = when.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    for suffix in COMPANIONS:
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            os.replace(companion, aside.with_name(aside.name + suffix))
    if path.exists():
        os.replace(path, aside)
    return aside
