"""SQLite as memsite's derived and journal files use it."""

from __future__ import annotations

import glob
import os
import re
import sqlite3
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def connect(path: Path | str) -> sqlite3.Connection:
    """A connection in WAL mode that waits for other writers (several processes share these files).

    ``path`` is a file, or the URI of a copy in memory (see :func:`copy_in_memory`).
    """
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30, uri=isinstance(path, str))
    db.execute("PRAGMA journal_mode=WAL")  # ('memory' for a copy in memory)
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
_READONLY, _IOERR, _CANTOPEN = 8, 10, 14
COMPANIONS = ("-wal", "-shm", "-journal")
# Every text memsite stores is UTF-8: text that is not was damaged on disk, where SQLite's checks do not look.
_UNDECODABLE = "Could not decode to UTF-8"


class Damaged(sqlite3.DatabaseError):
    """A row memsite wrote no longer reads back as a value it could have written: damage SQLite does not see."""


def script_statements(script: str) -> Iterator[str]:
    """The statements of ``script`` one by one (a trigger's body holds several)."""
    statement = ""
    for part in script.split(";"):
        statement += part + ";"
        if sqlite3.complete_statement(statement):
            if statement.strip(" \n;"):
                yield statement
            statement = ""


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


def read_only(path: Path) -> sqlite3.Connection:
    """A connection that reads ``path`` and writes nothing, not even the -shm a WAL reader needs when none is
    there (and the disk is full, or the folder is read-only): then the file is read as it is, without what its
    -wal adds."""
    uri = "file:" + urllib.parse.quote(str(path.absolute()))
    db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30)
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError as exc:
        db.close()
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in (_CANTOPEN, _IOERR, _READONLY):  # (a read-only folder)
            raise
    except BaseException:
        db.close()
        raise
    return sqlite3.connect(f"{uri}?immutable=1", uri=True)


def copy_in_memory(path: Path, name: str) -> tuple[str, sqlite3.Connection]:
    """A copy of the SQLite file ``path`` in this process's memory (empty if there is no file): its URI, which
    :func:`connect` opens as many times as a file, and the connection that keeps it (closing it frees the copy).

    For reading when the disk is full: nothing is written to disk, and what is written to the copy is lost
    when it is freed. ``name`` must be unique in the process. The copy is made with ``VACUUM INTO``, which
    reads every row: a damaged file raises here, as SQLite's damage errors.
    """
    uri = f"file:/{urllib.parse.quote(name)}?vfs=memdb"
    keeper = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    try:
        if path.exists():
            source = read_only(path)
            try:
                source.execute("VACUUM INTO ?", (uri,))
            finally:
                source.close()
    except BaseException:
        keeper.close()
        raise
    return uri, keeper


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
        db = read_only(path)
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


# Copies of a damaged file kept. Each file is healed without them: the catalog and vectors are rebuilt from
# git, and what could still be read of the activity journal is carried into the new one (activity.py). A copy
# is only there for a person to see what was damaged, and the newest shows it; a disk that keeps damaging
# files must not fill up with copies (a catalog of 100,000 memories is about 200 MB).
KEPT_COPIES = 1


def set_aside(path: Path, when: datetime) -> Path:
    """Rename the damaged file ``path`` (and its -wal, -shm) to ``<name>.damaged-<UTC time>``; returns the new name.

    Kept, not deleted, as what a person may want to look at: the newest
    copy of each file only (see :data:`KEPT_COPIES`), older ones go.
    """
    stamp = when.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
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
    others = [copy for copy in damaged_copies(path) if copy != aside]  # (the clock may have gone back)
    for old in others[: len(others) - KEPT_COPIES + 1]:
        remove_copy(old)
    return aside


def damaged_copies(path: Path) -> list[Path]:
    """The copies :func:`set_aside` made of ``path`` (without their -wal, -shm), oldest first."""
    pattern = re.compile(re.escape(path.name) + r"\.damaged-(\d{8}T\d{6}Z)(?:-(\d+))?")
    found = []
    for copy in path.parent.glob(f"{glob.escape(path.name)}.damaged-*"):
        match = pattern.fullmatch(copy.name)
        if match:
            found.append(((match.group(1), int(match.group(2) or 1)), copy))
    return [copy for _, copy in sorted(found)]


def remove_copy(copy: Path) -> None:
    """Remove a copy :func:`set_aside` made, with its -wal and -shm."""
    for suffix in ("", *COMPANIONS):
        copy.with_name(copy.name + suffix).unlink(missing_ok=True)
