"""SQLite as memsite's derived and journal files use it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
