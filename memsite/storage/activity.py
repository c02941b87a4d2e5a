"""The activity journal: recalls recorded at once, committed to the memory files in batches.

A recall must raise ``active_count`` of what it returned without a commit per
recall. Each recall appends rows to ``events`` here (SQLite in WAL mode: a
killed process loses none) and adds them to ``pending``, their sum per memory,
which the catalog joins so counts are live at once. A flush writes the counts
into the memory files in one commit.

Unlike the catalog this file is not derived: it holds recalls that are not in
git yet. A flush is exactly-once: the batch is noted before the commit and its
id goes into the commit as an ``Activity-Batch`` trailer, so after a crash the
next flush can tell whether the batch landed and never counts it twice.

Each recall is noted with the agent that made it, and a flush commits each
agent's recalls in a commit authored by that agent, whoever flushes: a task
closing in one agent's process never claims another agent's recalls.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..foundation import inputs
from ..foundation.errors import InvalidInput
from ..foundation.record import ID_RE, parse_time
from ..git.repo import STATE_DIR
from .sqlite import connect, read_only, transaction
from .state import FILES, cache_folder

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, at TEXT NOT NULL,
                                   agent TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS pending (id TEXT PRIMARY KEY, n INTEGER NOT NULL, last TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS batches (batch TEXT PRIMARY KEY, through INTEGER NOT NULL, parent TEXT,
                                    agent TEXT NOT NULL DEFAULT '');
"""
# Journals made before recalls were noted with their agent: '' stands for "whoever flushes".
_ADD_AGENT = "ALTER TABLE {table} ADD COLUMN agent TEXT NOT NULL DEFAULT ''"
_RECOUNT = "INSERT INTO pending SELECT id, count(*), max(at) FROM events {where} GROUP BY id"


@dataclass(frozen=True)
class Batch:
    """Recalls being committed: events up to ``through``, counted per memory."""

    batch: str
    through: int
    parent: str | None
    counts: dict[str, tuple[int, str]]  # memory id -> (recalls, last recalled)
    agent: str = ""  # whose recalls ('' for recalls noted before agents were)


class ActivityJournal:
    def __init__(self, path: Path | str) -> None:
        self.path = path
        self.db = connect(path)
        if self.db.execute("SELECT type FROM sqlite_master WHERE name = 'pending'").fetchone() == ("view",):
            self.db.execute("DROP VIEW pending")  # journals made before 'pending' was a table
        self.db.executescript(_SCHEMA)
        for table in ("events", "batches"):
            if "agent" not in {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}:
                self.db.execute(_ADD_AGENT.format(table=table))
        with transaction(self.db):  # 'pending' is the sum of 'events': make sure it is
            self.db.execute("DELETE FROM pending")
            self.db.execute(_RECOUNT.format(where=""))

    def close(self) -> None:
        self.db.close()

    def record(self, ids: list[str], at: str, agent: str = "") -> int:
        """Note one recall of each of ``ids`` by ``agent``; returns how many recalls await a flush."""
        with transaction(self.db):
            self.db.executemany("INSERT INTO events (id, at, agent) VALUES (?, ?, ?)",
                                ((mid, at, agent) for mid in ids))
            self.db.executemany(
                "INSERT INTO pending VALUES (?, 1, ?) ON CONFLICT (id) DO UPDATE "
                "SET n = n + 1, last = max(last, excluded.last)", ((mid, at) for mid in ids))
            waiting = self.db.execute("SELECT count(*) FROM events").fetchone()[0]
        return int(waiting)

    def waiting(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM events").fetchone()[0])

    def agents(self) -> list[str]:
        """The agents whose recalls await a flush ('' for recalls noted before agents were)."""
        return [row[0] for row in self.db.execute("SELECT DISTINCT agent FROM events ORDER BY agent")]

    def begin_batch(self, batch: str, parent: str | None, agent: str = "") -> Batch | None:
        """Note a batch of ``agent``'s recalls so far, before committing it; None if none wait."""
        with transaction(self.db):
            through = self.db.execute("SELECT max(seq) FROM events WHERE agent = ?", (agent,)).fetchone()[0]
            if through is None:
                return None
            rows = self.db.execute("SELECT id, count(*), max(at) FROM events WHERE seq <= ? AND agent = ? GROUP BY id",
                                   (through, agent)).fetchall()
            self.db.execute("INSERT INTO batches VALUES (?, ?, ?, ?)", (batch, through, parent, agent))
        return Batch(batch, through, parent, {mid: (n, last) for mid, n, last in rows}, agent)

    def end_batch(self, batch: Batch, *, committed: bool) -> None:
        """The batch landed (its events go) or did not (they wait for the next flush)."""
        with transaction(self.db):
            if committed:
                ids = [row[0] for row in self.db.execute(
                    "SELECT DISTINCT id FROM events WHERE seq <= ? AND agent = ?", (batch.through, batch.agent))]
                self.db.execute("DELETE FROM events WHERE seq <= ? AND agent = ?", (batch.through, batch.agent))
                marks = ", ".join("?" * len(ids))
                self.db.execute(f"DELETE FROM pending WHERE id IN ({marks})", ids)
                self.db.execute(_RECOUNT.format(where=f"WHERE id IN ({marks})"), ids)
            self.db.execute("DELETE FROM batches WHERE batch = ?", (batch.batch,))

    def drop(self, ids: Iterable[str]) -> None:
        """Forget the recalls of ``ids`` waiting for a flush (memories purged: no file takes their counts)."""
        ids = list(ids)
        if ids:
            marks = ", ".join("?" * len(ids))
            with transaction(self.db):
                self.db.execute(f"DELETE FROM events WHERE id IN ({marks})", ids)
                self.db.execute(f"DELETE FROM pending WHERE id IN ({marks})", ids)

    def unfinished(self) -> list[Batch]:
        """Batches a killed flush left noted: each may or may not have been committed."""
        rows = self.db.execute("SELECT batch, through, parent, agent FROM batches").fetchall()
        return [Batch(batch, through, parent, {}, agent) for batch, through, parent, agent in rows]


def carry_over(damaged: Path, path: Path | str) -> int:
    """Start the journal at ``path`` with the recalls still readable in the damaged journal ``damaged``; how many.

    Its events are read from either end until the damage; the batches a
    killed flush left noted must read back whole, or none is carried: the
    next flush tells by them whether their recalls were committed, and
    without them a recall could be counted twice (losing one is the lesser harm).
    """
    source = _what_is_left(damaged)
    if source is None:
        return 0
    try:
        batches, whole = _rows(source, "SELECT batch, through, parent, agent FROM batches")
        whole = whole and all(isinstance(batch, str) and isinstance(through, int) and isinstance(agent, str)
                              for batch, through, _, agent in batches)
        events: dict[int, tuple[Any, ...]] = {}
        for order in ("ASC", "DESC") if whole else ():  # from either end, up to the damage
            read, _ = _rows(source, f"SELECT seq, id, at, agent FROM events ORDER BY seq {order}")
            events.update((row[0], row) for row in read if _event(row))
    finally:
        source.close()
    if not events:
        return 0
    journal = ActivityJournal(path)
    try:
        with transaction(journal.db):
            journal.db.executemany("INSERT INTO events (seq, id, at, agent) VALUES (?, ?, ?, ?)",
                                   sorted(events.values()))
            journal.db.executemany("INSERT INTO batches VALUES (?, ?, ?, ?)", batches)
            journal.db.execute("DELETE FROM pending")
            journal.db.execute(_RECOUNT.format(where=""))
    finally:
        journal.close()
    return len(events)


def _what_is_left(path: Path) -> sqlite3.Connection | None:
    """A connection reading what is left of the damaged journal ``path``, if anything.

    As SQLite opens it (with its -wal); or, when it will not (a file cut
    short no longer has the pages its header counts), its own bytes copied
    into memory with the header saying what is there.
    """
    try:
        return read_only(path)
    except (sqlite3.Error, UnicodeDecodeError):
        pass
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[16:18], "big") if len(data) >= 100 else 0
    size = 65536 if size == 1 else size
    db = sqlite3.connect(":memory:")
    if not data.startswith(b"SQLite format 3\0") or size < 512 or len(data) < size:
        db.close()  # no header to mend
        return None
    data[18:20] = b"\x01\x01"  # not in WAL mode: a copy in memory has no -shm
    data[28:32] = (len(data) // size).to_bytes(4, "big")
    try:
        db.deserialize(bytes(data[: len(data) // size * size]))
    except sqlite3.Error:
        db.close()
        return None
    return db


def _rows(db: sqlite3.Connection, sql: str) -> tuple[list[tuple[Any, ...]], bool]:
    """The rows of ``sql`` up to the first that cannot be read, and whether that was all of them."""
    rows = []
    try:
        for row in db.execute(sql):
            rows.append(row)
    except (sqlite3.Error, UnicodeDecodeError):
        return rows, False
    return rows, True


def _event(row: tuple[Any, ...]) -> bool:
    """Whether an event read from a damaged journal is one a recall could have written."""
    seq, mid, at, agent = row
    if not (isinstance(seq, int) and isinstance(mid, str) and isinstance(at, str) and isinstance(agent, str)):
        return False
    try:
        parse_time(at)
        if agent:
            inputs.name(agent)
    except (ValueError, InvalidInput):
        return False
    return bool(ID_RE.match(mid))


def pending_counts(root: Path) -> dict[str, tuple[int, str]]:
    """Recalls the journal of the checkout at ``root`` holds, not committed yet: id -> (recalls, last recalled).

    What every read of the store adds to the counts in the files (the catalog
    joins the same table), for readers that do not open a store: the site.
    Read only; {} when there is no journal (a fresh clone, a copy outside git).
    """
    for folder in (root / STATE_DIR, cache_folder(root)):
        path = folder / FILES[1]
        if not path.is_file():
            continue
        try:
            db = read_only(path)
            try:
                return {mid: (n, last) for mid, n, last in db.execute("SELECT id, n, last FROM pending")}
            finally:
                db.close()
        except sqlite3.Error:
            return {}  # a journal being set aside or rebuilt: the counts in the files stand
    return {}
