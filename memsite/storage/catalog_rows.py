"""A memory as a row of the catalog, and a commit's rows written on the catalog's own thread.

:class:`Recording` writes them while the commit is made (see :meth:`memsite.storage.catalog.Catalog.record`);
:func:`as_row` is a memory's row, :func:`rewrite` the change of a row whose indexed text stays the same
(:func:`same_text`); ``versions.py`` (the past catalogs of record time) writes the same rows.
"""

from __future__ import annotations

import json
import math
import queue
import sqlite3
from collections.abc import Callable, Container, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..foundation.record import Memory, format_time
from ..foundation.text import category_key, fingerprint, sketch
from . import sketch_filter
from .sqlite import statements

# A memory row's columns, in the order they are written (the first 18 are what a read makes a memory of).
COLUMNS = (
    "id", "path", "blob", "commit_id", "category", "abstract", "overview", "agent", "created",
    "updated", "source", "tags", "active_count", "last_recalled", "pinned", "extra", "content", "lines",
    "fingerprint", "valid_until",
)
# Rows go in many to a statement (executemany would take Python's lock back
# for every row, holding up the writer's other threads); at most 999
# parameters a statement, which every SQLite build takes.
INSERT = f"INSERT INTO memories ({', '.join(COLUMNS)}) VALUES "
_INDEX_AFTER = ("INSERT INTO memories_fts (rowid, abstract, overview, content, tags) "
                "SELECT n, abstract, overview, content, tags FROM memories WHERE n > ?")
# Each memory's tags, one row each: a filter on a tag reads its rows, not every memory's tag list
# (json_each over every row was most of a LangGraph search, which filters on two tags: see docs/benchmarks.md).
_TAGS_AFTER = ("INSERT OR IGNORE INTO memory_tags (tag, n) "
               "SELECT j.value, m.n FROM memories m, json_each(m.tags) j WHERE m.n > ?")
INSERT_SKETCHES = "INSERT OR IGNORE INTO sketches (k, id) VALUES "
_DELETE_ROWS = ("DELETE FROM memories WHERE id IN (SELECT value FROM json_each(?)) "
                "OR path IN (SELECT value FROM json_each(?))")


class Recording:
    """A commit's rows, written on the catalog's thread in one SQLite transaction while the commit is made.

    See :meth:`memsite.storage.catalog.Catalog.record`.
    """

    def __init__(self, worker: ThreadPoolExecutor, writer: Callable[[], sqlite3.Connection],
                 settling: Callable[[Recording], None], committed: Callable[[int], None], upserts: Upsert,
                 deletes: list[str], moves: list[tuple[str, str]],
                 rewrites: list[tuple[str, str, list[Any]]]) -> None:
        """``writer``: the connection to write through (on the worker); ``settling`` is told when it is
        settled, ``committed`` how many rows it committed."""
        self._writer = writer
        self._settling = settling
        self._committed = committed
        self._decision: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._settled = False
        self._rows = upserts.count + len(deletes) + len(moves) + len(rewrites)  # how many it writes
        self._done = worker.submit(self._work, upserts, deletes, moves, rewrites)

    def settle(self, commit: str | None) -> None:
        """Commit the rows as ``commit``'s and wait for them (raising what went wrong); None drops them."""
        self._settling(self)
        if not self._settled:
            self._settled = True
            self._decision.put(commit)
        interrupted = None
        while True:  # the connection is used again after this: never leave it mid-transaction
            try:
                error = self._done.exception()
                break
            except KeyboardInterrupt as exc:
                interrupted = exc
        if interrupted is not None:
            raise interrupted
        if error is not None and commit is not None:
            raise error
        if commit is not None:
            self._committed(self._rows)

    def _work(self, upserts: Upsert, deletes: list[str], moves: list[tuple[str, str]],
              rewrites: list[tuple[str, str, list[Any]]]) -> None:
        db = self._writer()
        # Deferred: its first write locks the catalog; catalog writes are serialised by the repository lock.
        db.execute("BEGIN")
        try:
            db.executemany("UPDATE memories SET path = ? WHERE id = ?", ((path, mid) for mid, path in moves))
            db.executemany("DELETE FROM memories WHERE id = ?", ((mid,) for mid in deletes))
            for _, sql, values in rewrites:
                db.execute(sql, values)
            first = upserts.run(db)  # the rows inserted are numbered above it
            # The full-text index keeps what it was given in memory until the COMMIT, which would then write
            # it out (and merge segments) after the branch has moved, while the writer waits: a savepoint
            # makes it do that now, while the commit is being made.
            db.execute("SAVEPOINT written")
            db.execute("RELEASE written")
            commit = self._decision.get()
            if commit is not None:  # the branch points at it: the rows written here are its
                db.execute("UPDATE memories SET commit_id = ? WHERE n > ?", (commit, first))
                db.executemany("UPDATE memories SET commit_id = ? WHERE id = ?",
                               [(commit, mid) for mid, _ in moves] + [(commit, mid) for mid, _, _ in rewrites])
                db.execute("INSERT OR REPLACE INTO meta VALUES ('commit', ?)", (commit,))
            db.execute("COMMIT" if commit is not None else "ROLLBACK")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise


class Upsert:
    """Rows of (memory, path, blob id) to write, replacing any of the same id or path (but those ``created``).

    The statements' parameters are made where the rows are (the thread
    staging them), so the catalog's thread only runs SQL, which does not hold
    Python's lock. Plain deletes and inserts: REPLACE would bypass the
    full-text index's triggers.
    """

    def __init__(self, rows: list[tuple[Memory, str, str]], created: Container[str] = ()) -> None:
        rows = sorted(rows, key=lambda row: row[1])  # by path (so by category too): the indexes take them in order
        self.count = len(rows)
        replacing = [(m.id, path) for m, path, _ in rows if m.id not in created]
        self.deleted = ((json_texts(mid for mid, _ in replacing), json_texts(path for _, path in replacing))
                        if replacing else None)
        self.inserts = statements(INSERT, [as_row(memory, path, blob, None) for memory, path, blob in rows])
        sketches = sorted(sketch_rows(memory for memory, _, _ in rows))
        self.sketches = statements(INSERT_SKETCHES, sketches)
        self.filter = sketch_filter.prepare([k for k, _ in sketches])

    def run(self, db: sqlite3.Connection) -> float:
        """Write them; returns the row number before the new rows (see insert_rows; infinity when there are none)."""
        if not self.count:
            return math.inf
        if self.deleted is not None:
            db.execute(_DELETE_ROWS, self.deleted)
        last = insert_rows(db, self.inserts)
        for sql, values in self.sketches:
            db.execute(sql, values)
        sketch_filter.add(db, self.filter)
        return last


def insert_rows(db: sqlite3.Connection, inserts: list[tuple[str, list[Any]]]) -> int:
    """Insert memory rows (:func:`~memsite.storage.sqlite.statements` of them) and add them to the full-text
    index (in the caller's transaction). Returns the row number before them: theirs are the ones above it.
    """
    last: int = db.execute("SELECT coalesce(max(n), 0) FROM memories").fetchone()[0]
    for sql, values in inserts:
        db.execute(sql, values)  # each new row gets n = max(n) + 1, in order
    db.execute(_INDEX_AFTER, (last,))
    db.execute(_TAGS_AFTER, (last,))
    return last


def json_texts(values: Iterable[str]) -> str:
    """A JSON array of texts, for json_each."""
    return json.dumps(list(values), ensure_ascii=False)


# What the full-text index, the sketches and the tag rows are made of: a row whose memory kept them can change
# in place (see same_text); 'lines' and 'fingerprint' follow from the content.
_INDEXED = ("id", "category", "abstract", "overview", "content", "tags")
# The columns a row changed in place may change ('path' never: a memory that moves is written anew).
_REWRITTEN = ("agent", "created", "updated", "source", "active_count", "last_recalled", "pinned", "extra",
              "valid_until")


def same_text(before: Memory, after: Memory) -> bool:
    """Whether ``after`` holds what the catalog indexes of ``before``: its row can then change in place."""
    return all(getattr(before, name) == getattr(after, name) for name in _INDEXED)


def rewrite(before: Memory, after: Memory, blob: str) -> tuple[str, str, list[Any]]:
    """(id, UPDATE statement, its values) changing the row of ``before`` into ``after``'s: only the columns that
    differ (an index on a column left alone is not touched), and the blob."""
    old, new = _fields(before), _fields(after)
    changed = [name for name in _REWRITTEN if old[name] != new[name]]
    sets = ", ".join(f"{name} = ?" for name in ("blob", *changed))
    return after.id, f"UPDATE memories SET {sets} WHERE id = ?", [blob, *(new[name] for name in changed), after.id]


def _fields(memory: Memory) -> dict[str, Any]:
    """The columns of :data:`_REWRITTEN` as :func:`as_row` writes them."""
    return {
        "agent": memory.agent, "created": format_time(memory.created), "updated": format_time(memory.updated),
        "source": memory.source, "active_count": memory.active_count,
        "last_recalled": format_time(memory.last_recalled) if memory.last_recalled else None,
        "pinned": int(memory.pinned), "extra": _extra(memory),
        "valid_until": format_time(memory.valid_until) if memory.valid_until else None,
    }


def as_row(memory: Memory, path: str, blob: str, commit: str | None) -> tuple[Any, ...]:
    return (
        memory.id, path, blob, commit, memory.category, memory.abstract, memory.overview, memory.agent,
        format_time(memory.created), format_time(memory.updated), memory.source,
        json.dumps(list(memory.tags)) if memory.tags else "[]",
        memory.active_count, format_time(memory.last_recalled) if memory.last_recalled else None,
        int(memory.pinned), _extra(memory), memory.content, memory.lines, fingerprint(memory.content),
        format_time(memory.valid_until) if memory.valid_until else None,
    )


# The supersession fields ride in the row's 'extra' JSON (only valid_until, which reads filter on, has a column
# of its own): no memory has extra fields of these names, the file format reads them as fields.
CHAIN = ("supersedes", "superseded_by", "valid_until")


def _extra(memory: Memory) -> str:
    fields = dict(memory.extra)
    if memory.supersedes is not None or memory.superseded_by is not None or memory.valid_until is not None:
        fields.update({"supersedes": memory.supersedes, "superseded_by": memory.superseded_by,
                       "valid_until": format_time(memory.valid_until) if memory.valid_until else None})
        fields = {name: value for name, value in fields.items() if value is not None or name not in CHAIN}
    return json.dumps(fields, sort_keys=True) if fields else "{}"


def sketch_rows(memories: Iterable[Memory]) -> Iterator[tuple[int, str]]:
    for memory in memories:
        high = category_key(memory.category)  # (sketch_key, once per memory)
        for value in sketch(memory.content):
            yield high | value, memory.id
