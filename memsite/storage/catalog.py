"""The catalog: every memory of the branch tip in SQLite, for reads without git.

It is derived data in ``.memsite/`` (git-ignored): it records the commit it
reflects, and before any read the store compares that with the branch tip. When
they differ (a write by another process that died before updating it, a pull,
a commit made by hand) the catalog catches up by diffing the two trees, which
reads only the folders whose ids changed. Deleting the file rebuilds it.
"""

from __future__ import annotations

import builtins
import json
import logging
import math
import sqlite3
from collections.abc import Callable, Container, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from ..foundation.config import Config
from ..foundation.decay import TrimCandidate
from ..foundation.errors import FormatError, RepositoryError
from ..foundation.record import Memory, format_time, parse_time
from ..foundation.text import category_key, match_any
from ..git import Repository
from . import sketch_filter
from .catalog_rows import (
    CHAIN,
    COLUMNS,
    INSERT,
    INSERT_SKETCHES,
    Recording,
    Upsert,
    as_row,
    insert_rows,
    rewrite,
    sketch_rows,
)
from .reading import claimed_id, duplicate_message, read_memory
from .sqlite import Damaged, connect, script_statements, statements, transaction

log = logging.getLogger("memsite")

SCHEMA_VERSION = "13"
# Rows written between two checkpoints of the catalog's log: about the
# 1,000 pages after which SQLite would checkpoint (a memory row is ~20 pages).
CHECKPOINT_ROWS = 50

# The full-text index is an external-content FTS5 table over the memories;
# 'n' is an explicit rowid so it never renumbers. Rows are indexed by one
# statement after each batch of inserts (see catalog_rows.insert_rows: a trigger per row cost
# three times as much) and unindexed by a trigger when they are deleted.
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS memories (
    n INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE, path TEXT NOT NULL UNIQUE, blob TEXT NOT NULL, commit_id TEXT,
    category TEXT NOT NULL, abstract TEXT NOT NULL, overview TEXT NOT NULL, agent TEXT NOT NULL,
    created TEXT NOT NULL, updated TEXT NOT NULL, source TEXT, tags TEXT NOT NULL,
    active_count INTEGER NOT NULL, last_recalled TEXT, pinned INTEGER NOT NULL,
    extra TEXT NOT NULL, content TEXT NOT NULL, lines INTEGER NOT NULL, fingerprint TEXT NOT NULL,
    valid_until TEXT
);
CREATE INDEX IF NOT EXISTS memories_valid_until ON memories (valid_until) WHERE valid_until IS NOT NULL;
CREATE INDEX IF NOT EXISTS memories_category ON memories (category, created, id);
CREATE INDEX IF NOT EXISTS memories_agent ON memories (agent, created, id);
CREATE INDEX IF NOT EXISTS memories_fingerprint ON memories (category, fingerprint, created);
CREATE INDEX IF NOT EXISTS memories_id_nocase ON memories (id COLLATE NOCASE);
CREATE INDEX IF NOT EXISTS memories_short_id ON memories (lower(substr(id, -6)));
CREATE TABLE IF NOT EXISTS sketches (k INTEGER NOT NULL, id TEXT NOT NULL, PRIMARY KEY (k, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sketches_id ON sketches (id);
{sketch_filter.SCHEMA}
CREATE TABLE IF NOT EXISTS problems (
    path TEXT PRIMARY KEY, blob TEXT NOT NULL, id TEXT, duplicate INTEGER NOT NULL, message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS problems_id ON problems (id);
CREATE TABLE IF NOT EXISTS memory_tags (tag TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (tag, n)) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    abstract, overview, content, tags,
    content='memories', content_rowid='n', tokenize='porter unicode61 remove_diacritics 2'
);
"""
_DELETE_TRIGGER = """CREATE TRIGGER IF NOT EXISTS memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, abstract, overview, content, tags)
    VALUES ('delete', old.n, old.abstract, old.overview, old.content, old.tags);
    DELETE FROM sketches WHERE id = old.id;
    DELETE FROM memory_tags WHERE n = old.n;
END"""
_DROP = """
DROP TRIGGER IF EXISTS memories_fts_insert; DROP TRIGGER IF EXISTS memories_fts_delete;
DROP TABLE IF EXISTS memories_fts; DROP TABLE IF EXISTS sketches; DROP TABLE IF EXISTS sketch_filter;
DROP TABLE IF EXISTS sketch_recent; DROP TABLE IF EXISTS memories;
DROP TABLE IF EXISTS problems; DROP TABLE IF EXISTS memory_tags;
DROP TABLE IF EXISTS meta;
"""
# Every read shows recalls not committed yet (the activity journal) in the counts.
_FIELDS = (
    "m.id, m.path, m.blob, m.commit_id, m.category, m.abstract, m.overview, m.agent, m.created, m.updated, "
    "m.source, m.tags, m.active_count + coalesce(p.n, 0), "
    "CASE WHEN p.last IS NULL THEN m.last_recalled WHEN m.last_recalled IS NULL OR p.last > m.last_recalled "
    "THEN p.last ELSE m.last_recalled END, m.pinned, m.extra, m.content, m.lines"
)
_FROM = "memories m LEFT JOIN activity.pending p ON p.id = m.id"
_WHOLE_DOCLIST = 20
"""A term held by up to this many times the rows asked about is read whole by :meth:`Catalog.term_counts`."""
_SELECT = f"SELECT {_FIELDS} FROM {_FROM}"
# What the files say, without pending recalls: what a write must start from,
# or the next flush of the journal would count those recalls twice.
_SELECT_COMMITTED = f"SELECT m.{', m.'.join(COLUMNS[:18])} FROM memories m"
# Dedup's query (see Catalog.dedup_candidates): the exact duplicate, then
# the ids holding each sketch value, told apart by the first column. One
# lookup per value: 'k IN (...)' builds a table of the values on every call.
# A memory that stopped holding (superseded) is no twin: the fact written again is current again.
_EXACT = (f"SELECT 1, m.{', m.'.join(COLUMNS[:18])} FROM memories m "
          "WHERE m.category = ? AND m.fingerprint = ? AND m.valid_until IS NULL ORDER BY m.created LIMIT 1")
_DEDUP_SQL: dict[tuple[bool, int], str] = {}


def _dedup_sql(exact: bool, hashes: int) -> str:
    parts = [f"SELECT * FROM ({_EXACT})"] if exact else []
    parts += [f"SELECT 0, id{', NULL' * 17} FROM sketches WHERE k = ?"] * hashes
    return " UNION ALL ".join(parts)


_BM25_WEIGHTS = "3.0, 2.0, 1.0, 2.0"  # abstract, overview, content, tags


class Catalog:
    """SQLite view of the memories at one commit, with a full-text index."""

    schema_version = SCHEMA_VERSION
    tables = _DROP + _SCHEMA + _DELETE_TRIGGER  # made anew when the file's schema is another version's
    # What a full-text match adds to keep only the rows of the commit read (see memsite.storage.versions).
    live_rows = ""

    def __init__(self, path: Path | str, root: Path, activity: Path | str) -> None:
        self.root = root
        self._worker: ThreadPoolExecutor | None = None  # see record()
        self._unsettled: Recording | None = None
        self._path = path
        self._write_db: sqlite3.Connection | None = None  # see _writer()
        self._unchecked = 0  # rows committed through it since its log was last copied into the catalog
        self._counted: tuple[str | None, dict[str, int]] = (None, {})  # (commit, term -> memories holding it)
        self.db = connect(path)
        _math_functions(self.db)
        if self._meta_or_none("schema") != self.schema_version:  # new, or made by another version: it is derived
            self._start_over()
        self.db.execute("ATTACH DATABASE ? AS activity", (str(activity),))

    def _start_over(self) -> None:
        """Make the tables anew, unless another process made them since this one looked (checked again inside
        one SQLite write transaction, which two processes take in turn)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            if self._meta_or_none("schema") != self.schema_version:
                for statement in script_statements(self.tables + ";"):
                    self.db.execute(statement)
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (self.schema_version,))
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise

    def _meta_or_none(self, key: str) -> str | None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError:
            return None
        return row[0] if row else None

    def close(self) -> None:
        self.settle_pending()
        if self._worker is not None:
            self._worker.shutdown()
        if self._write_db is not None:
            self._write_db.close()
        self.db.close()

    @property
    def commit(self) -> str | None:
        """The commit this catalog reflects."""
        return self._meta_or_none("commit")

    # --- reads -------------------------------------------------------------

    def _memory(self, row: tuple[Any, ...]) -> Memory:
        (mid, path, _blob, commit, category, abstract, overview, agent, created, updated,
         source, tags, active_count, last_recalled, pinned, extra, content, _lines) = row[:18]
        try:
            fields = json.loads(extra)
            chain = {name: fields.pop(name) for name in CHAIN if name in fields} if fields else {}
            if "valid_until" in chain:
                chain["valid_until"] = parse_time(chain["valid_until"])
            return Memory(
                id=mid, category=category, abstract=abstract, overview=overview, agent=agent,
                created=parse_time(created), updated=parse_time(updated), source=source,
                tags=tuple(json.loads(tags)), active_count=active_count,
                last_recalled=parse_time(last_recalled) if last_recalled else None,
                pinned=bool(pinned), extra=fields, content=content,
                path=self.root / path, commit=commit, **chain,
            )
        except (ValueError, TypeError) as exc:  # every row was made from a Memory: this one was damaged on disk
            raise Damaged(f"{self._path}: the row of {mid!r} no longer reads back ({exc})") from exc

    def get(self, mid: str, *, live: bool = True) -> Memory | None:
        """The memory ``mid``; ``live`` counts recalls not committed yet."""
        row = self.db.execute(f"{_SELECT if live else _SELECT_COMMITTED} WHERE m.id = ?", (mid,)).fetchone()
        return self._memory(row) if row else None

    def starting_with(self, prefix: str, limit: int) -> tuple[list[tuple[str, str]], int]:
        """(id, abstract) of the first ``limit`` memories whose id starts with ``prefix`` in any case, and how many
        there are: a range of the id index (ids are ASCII letters, digits, '_' and '-', all below DEL).
        """
        bounds = (prefix, prefix + "\x7f")
        where = "WHERE id >= ? COLLATE NOCASE AND id < ? COLLATE NOCASE"
        rows = self.db.execute(f"SELECT id, abstract FROM memories {where} ORDER BY id COLLATE NOCASE LIMIT ?",
                               (*bounds, limit)).fetchall()
        count = len(rows) if len(rows) < limit else self.db.execute(f"SELECT count(*) FROM memories {where}",
                                                                    bounds).fetchone()[0]
        return rows, count

    def ending_with(self, tail: str, limit: int) -> tuple[list[tuple[str, str]], int]:
        """(id, abstract) of the first ``limit`` memories whose id ends with ``tail`` (6 characters or more) in any
        case, and how many there are: the index of ids' short forms, then the rest of ``tail`` checked."""
        rows = self.db.execute("SELECT id, abstract FROM memories WHERE lower(substr(id, -6)) = ? "
                               "AND lower(substr(id, -?)) = ? ORDER BY id",
                               (tail[-6:].lower(), len(tail), tail.lower())).fetchall()
        return rows[:limit], len(rows)

    def list(self, category: str | None = None, agent: str | None = None) -> list[Memory]:
        where, args = _filters(category, agent, ())
        sql = _SELECT + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY m.created, m.id"
        return [self._memory(row) for row in self.db.execute(sql, args)]

    def trim_candidates(self, category: str, valid_at: str) -> builtins.list[TrimCandidate]:
        """What counts towards ``category``'s capacity: its memories still holding at ``valid_at``
        (one superseded is history, neither counted nor trimmed), but copies of another's id."""
        rows = self.db.execute(
            f"SELECT m.id, m.created, m.active_count + coalesce(p.n, 0), m.pinned, m.lines FROM {_FROM} "
            "WHERE m.category = ? AND (m.valid_until IS NULL OR m.valid_until > ?) "
            "AND m.id NOT IN (SELECT id FROM problems WHERE duplicate)", (category, valid_at)
        )
        return [TrimCandidate(r[0], parse_time(r[1]), r[2], bool(r[3]), r[4]) for r in rows]

    def dedup_candidates(
        self, category: str, fingerprint: str | None, hashes: tuple[int, ...], shared: int, limit: int = 20,
        seen: bytes | None = None,
    ) -> tuple[Memory | None, builtins.list[tuple[str, str]]]:
        """What a new memory of ``category`` may duplicate.

        Returns the first memory created whose text normalises to the same
        words (its ``fingerprint``; not looked for when None), and (id, text)
        of the first ``limit`` memories (by id) whose sketch shares ``shared``
        values with ``hashes``. One query finds both (and a second reads the
        texts of the near ones, when there are any). ``seen``, the
        :meth:`seen_sketches` read since the catalog last changed, spares the
        query when it shows the query would find nothing.
        """
        keys = list(dict.fromkeys(hashes))
        shape = (fingerprint is not None, len(keys))
        sql = _DEDUP_SQL.get(shape)
        if sql is None:
            sql = _DEDUP_SQL[shape] = _dedup_sql(*shape)
        if not sql:
            return None, []
        high = category_key(category)
        wanted = [high | h for h in keys]
        if seen is not None and wanted and sketch_filter.known(seen, wanted) < shared:
            return None, []  # (an exact duplicate has every value of its own)
        args: list[object] = [category, fingerprint] if fingerprint is not None else []
        exact, counts = None, dict[str, int]()
        for row in self.db.execute(sql, args + wanted):
            if row[0]:
                exact = self._memory(row[1:])
            else:
                counts[row[1]] = counts.get(row[1], 0) + 1
        near = sorted(mid for mid, n in counts.items() if n >= shared)
        if not near:
            return exact, []
        near = near[:limit]  # the first by id, as the query orders them
        return exact, self.db.execute(f"SELECT id, content FROM memories WHERE id IN ({', '.join('?' * len(near))}) "
                                      "AND valid_until IS NULL ORDER BY id", near).fetchall()

    def seen_sketches(self) -> bytes:
        """The sketch values the catalog holds, as :mod:`~memsite.storage.sketch_filter` bits for dedup_candidates."""
        return sketch_filter.load(self.db)

    def ranked(
        self,
        *,
        now: str,
        half_life_days: float,
        active_weight: float,
        limit: int | None = None,
        category: str | None = None,
        agent: str | None = None,
        tags: Iterable[str] = (),
        min_score: float = 0.0,
        relevance: Mapping[int, float] | None = None,
        valid_at: datetime | None = None,
        prior: float | None = None,
    ) -> builtins.list[tuple[Memory, float, float, float, float, int]]:
        """Memories by score, best first, as (memory, relevance, decay, boost, score, row number).

        score = relevance x decay x boost, computed in SQLite so that the top
        ``limit`` are exact. Relevance is 1.0 (where memsite ranks without a
        query), or ``relevance`` (row number -> relevance) ranks those rows.
        ``valid_at`` leaves out what stopped holding by then (superseded).
        ``prior``: order and keep (``limit``, ``min_score``) by relevance x
        ``(1 - prior + prior x min(1, decay x boost))`` instead, recall's
        ranking (:mod:`memsite.features.retrieval`); the score returned is still
        relevance x decay x boost.
        """
        where, args = _filters(category, agent, tags, valid_at=valid_at)
        params: dict[str, Any] = {"now": now, "half": half_life_days, "weight": active_weight,
                                  "min_score": min_score, "limit": -1 if limit is None else limit}
        for i, value in enumerate(args):
            params[f"f{i}"] = value
        conditions = [clause.replace("?", f":f{i}", 1) for i, clause in enumerate(where)]
        decay = ("CASE WHEN m.pinned THEN 1.0 ELSE "
                 "pow(2.0, -max(0.0, julianday(:now) - julianday(m.created)) / :half) END")
        boost = "1.0 + :weight * ln(1.0 + m.active_count + coalesce(p.n, 0))"
        if relevance is not None:
            self.db.execute("CREATE TEMP TABLE IF NOT EXISTS given (n INTEGER PRIMARY KEY, r REAL NOT NULL)")
            self.db.execute("DELETE FROM temp.given")
            self.db.executemany("INSERT INTO temp.given VALUES (?, ?)", relevance.items())
            # CROSS JOIN: the given rows first, each memory found by its row number (SQLite, knowing nothing
            # of the temporary table's size, scanned every memory instead)
            source, relevance_sql = ("temp.given h CROSS JOIN memories m ON m.n = h.n "
                                     "LEFT JOIN activity.pending p ON p.id = m.id"), "h.r"
        else:
            source, relevance_sql = _FROM, "1.0"
        score = "relevance * decay * boost"
        if prior is not None:
            params["prior"] = prior
            score = "relevance * (1.0 - :prior + :prior * min(1.0, decay * boost))"
        sql = (f"SELECT * FROM (SELECT {_FIELDS}, {relevance_sql} AS relevance, {decay} AS decay, "
               f"{boost} AS boost, m.n FROM {source}{' WHERE ' + ' AND '.join(conditions) if conditions else ''}) "
               f"WHERE {score} >= :min_score ORDER BY {score} DESC, created DESC LIMIT :limit")
        return [(self._memory(r), r[18], r[19], r[20], r[18] * r[19] * r[20], r[21])
                for r in self.db.execute(sql, params)]

    def best_matches(self, fts_query: str, category: str, valid_at: datetime, limit: int) -> builtins.list[Memory]:
        """The ``limit`` memories of ``category`` still holding at ``valid_at`` that best match ``fts_query`` by
        bm25 alone: however old they are (a memory a new one may contradict can be of last spring), and without
        the ranking's decay and boost, which cost a computation per match (see :meth:`ranked`)."""
        where, args = _filters(category, None, (), valid_at=valid_at)
        rows = self._search(fts_query, f"SELECT {_FIELDS} FROM memories_fts "
                            "JOIN memories m ON m.n = memories_fts.rowid LEFT JOIN activity.pending p ON p.id = m.id "
                            f"WHERE memories_fts MATCH ?{self.live_rows} "
                            f"AND {' AND '.join(where)} ORDER BY bm25(memories_fts, {_BM25_WEIGHTS}) LIMIT ?",
                            (fts_query, *args, limit))
        return [self._memory(r) for r in rows]

    def _search(self, fts_query: str | None, sql: str, params: Any) -> builtins.list[tuple[Any, ...]]:
        """Run a query; a full-text query SQLite refuses is a ValueError naming it."""
        try:
            return self.db.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "fts5" in str(exc) or "syntax" in str(exc):
                raise ValueError(f"full-text query {fts_query!r} was refused ({exc})") from None
            raise

    def lexical(self, fts_query: str) -> dict[int, float]:
        """Row number -> bm25 relevance of every match of ``fts_query``, the best match 1.0."""
        rows = self._search(fts_query, f"SELECT rowid, bm25(memories_fts, {_BM25_WEIGHTS}) FROM memories_fts "
                            f"WHERE memories_fts MATCH ?{self.live_rows}", (fts_query,))
        best = min((b for _, b in rows), default=0.0)  # bm25 is negative: lower is better
        return {n: b / best if best else 1.0 for n, b in rows}

    def term_counts(self, terms: Iterable[str],
                    rows: Iterable[int]) -> tuple[dict[str, int], dict[int, builtins.list[str]]]:
        """(how many memories hold each term, the terms each of ``rows`` holds), as the full-text index matches them.

        Terms are words of a query (stemmed by the index, so ``refunds`` holds ``refund``). The
        counts are kept for the catalog's commit: an agent's questions share many words.
        """
        wanted = list(rows)
        asked = set(wanted)
        commit = self.commit
        if self._counted[0] != commit:
            self._counted = (commit, {})
        known = self._counted[1]
        counts: dict[str, int] = {}
        holding: dict[int, list[str]] = {}
        for term in terms:
            quoted = match_any([term])
            if term not in known:
                known[term] = self._search(quoted, "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH "
                                           f"?{self.live_rows}", (quoted,))[0][0]
            counts[term] = known[term]
            if not counts[term] or not wanted:
                continue
            if counts[term] <= _WHOLE_DOCLIST * len(wanted):
                # every row holding the term, kept if asked about: SQLite looks up each row of ``rowid IN (...)``
                # in the index on its own, at many times the cost of reading a row of the term's list
                found = [n for n, in self._search(quoted, "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?",
                                                  (quoted,)) if n in asked]
            else:
                found = []
                for start in range(0, len(wanted), 500):
                    chunk = wanted[start : start + 500]
                    found += [n for n, in self._search(quoted, "SELECT rowid FROM memories_fts WHERE memories_fts "
                                                       f"MATCH ? AND rowid IN ({', '.join('?' * len(chunk))})",
                                                       (quoted, *chunk))]
            for n in found:
                holding.setdefault(n, []).append(term)
        return counts, holding

    def ids(self, rows: Iterable[int]) -> dict[int, str]:
        """Row number -> memory id, for these rows."""
        return dict(self._pairs("SELECT n, id FROM memories WHERE n IN", list(rows)))

    def _pairs(self, select: str, values: builtins.list[Any]) -> builtins.list[tuple[Any, Any]]:
        found = []
        for start in range(0, len(values), 500):
            chunk = values[start : start + 500]
            found += self.db.execute(f"{select} ({', '.join('?' * len(chunk))})", chunk).fetchall()
        return found

    def blobs(self) -> builtins.list[tuple[int, str]]:
        """(row number, blob id) of every memory: a row's text is fixed by its file's content."""
        return self.db.execute("SELECT n, blob FROM memories ORDER BY n").fetchall()

    def texts(self, rows: builtins.list[int]) -> builtins.list[tuple[int, str, str, str]]:
        """(row number, id, blob id, text) of these rows: what an embedder reads (the abstract, then the body)."""
        found = []
        for start in range(0, len(rows), 500):
            chunk = rows[start : start + 500]
            found += self.db.execute(
                "SELECT n, id, blob, CASE WHEN instr(content, abstract) THEN content "
                "ELSE abstract || char(10, 10) || content END FROM memories "
                f"WHERE n IN ({', '.join('?' * len(chunk))})",
                chunk).fetchall()
        return found

    def matching(self, category: str | None, agent: str | None, tags: Iterable[str],
                 since: datetime | None = None, until: datetime | None = None) -> set[int] | None:
        """Row numbers of the memories passing the filters (written from ``since`` to ``until``);
        None when there are none to apply.

        Filters as :meth:`selective` leaves them (rarest tag first) are the quickest.
        """
        tags = list(tags)
        if category is None and agent is None and tags and since is None and until is None:
            # a tag's own rows lead, not every memory's
            also = " AND EXISTS (SELECT 1 FROM memory_tags o WHERE o.tag = ? AND o.n = t.n)" * (len(tags) - 1)
            return {n for n, in self.db.execute(f"SELECT t.n FROM memory_tags t WHERE t.tag = ?{also}", tags)}
        where, args = _filters(category, agent, tags, since, until)
        if not where:
            return None
        return {n for n, in self.db.execute(f"SELECT m.n FROM memories m WHERE {' AND '.join(where)}", args)}

    def outside(self, rows: Iterable[int], valid_at: datetime | None, until: datetime | None) -> set[int]:
        """Those of ``rows`` that no longer held at ``valid_at`` (superseded) or were written after ``until``."""
        if valid_at is None and until is None:
            return set()
        wanted = list(rows)
        if valid_at is not None and until is None and not self.db.execute(
                "SELECT 1 FROM memories WHERE valid_until <= ? LIMIT 1", (format_time(valid_at),)).fetchone():
            return set()  # (most stores: nothing was ever superseded)
        conditions, args = [], []
        if valid_at is not None:
            conditions.append("valid_until <= ?")
            args.append(format_time(valid_at))
        if until is not None:
            conditions.append("created > ?")
            args.append(format_time(until))
        found: set[int] = set()
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            found.update(n for n, in self.db.execute(
                f"SELECT n FROM memories WHERE n IN ({', '.join('?' * len(chunk))}) AND ({' OR '.join(conditions)})",
                [*chunk, *args]))
        return found

    def selective(self, category: str | None, agent: str | None,
                  tags: Iterable[str]) -> tuple[str | None, str | None, builtins.list[str]]:
        """The filters that leave some memory out (one every memory passes filters nothing), rarest tag first,
        for :meth:`matching` and :meth:`ranked`: a LangGraph store's searches name its category and tags that
        all its items have."""
        tags = list(tags)
        if category is None and agent is None and not tags:
            return None, None, []
        total = self.db.execute("SELECT count(*) FROM memories").fetchone()[0]

        def count(sql: str, value: str) -> int:
            return self.db.execute(sql, (value,)).fetchone()[0]

        if category is not None and count("SELECT count(*) FROM memories WHERE category = ?", category) == total:
            category = None
        if agent is not None and count("SELECT count(*) FROM memories WHERE agent = ?", agent) == total:
            agent = None
        counted = {tag: count("SELECT count(*) FROM memory_tags WHERE tag = ?", tag) for tag in dict.fromkeys(tags)}
        return category, agent, sorted((tag for tag, n in counted.items() if n < total), key=counted.__getitem__)

    def problems(self) -> builtins.list[tuple[str, str | None, bool, str]]:
        """(path, id it claims or None, whether it is a copy of another file's id, message) of each file not read."""
        return [(path, mid, bool(dup), message) for path, mid, dup, message in
                self.db.execute("SELECT path, id, duplicate, message FROM problems ORDER BY path")]

    def problems_of(self, mid: str) -> builtins.list[tuple[str, bool, str]]:
        """(path, whether a copy, message) of the files claiming ``mid`` that are not read."""
        return [(path, bool(dup), message) for path, dup, message in self.db.execute(
            "SELECT path, duplicate, message FROM problems WHERE id = ? ORDER BY path", (mid,))]

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM memories").fetchone()[0]

    def with_field(self, name: str, *others: str) -> builtins.list[tuple[Any, ...]]:
        """(id, bytes of text, value of ``name``, values of ``others``) of the memories whose frontmatter has
        the field ``name`` (one memsite does not write), oldest first; a missing field's value is None.

        What an integration that keeps fields of its own reads of every memory
        it wrote, without building each Memory (a tenth of the cost at 10,000).
        """
        paths = [f'$."{field}"' for field in (name, *others)]
        values = ", ".join("json_extract(extra, ?)" for _ in paths)
        return self.db.execute(f"SELECT id, length(CAST(content AS BLOB)), {values} FROM memories "
                               "WHERE extra != '{}' AND json_type(extra, ?) IS NOT NULL ORDER BY created, id",
                               (*paths, paths[0])).fetchall()

    # --- writes ------------------------------------------------------------

    def record(self, upserts: Iterable[tuple[Memory, str, str]], deletes: Iterable[str],
               moves: Iterable[tuple[str, str]] = (), created: Container[str] = (),
               rewrites: Iterable[tuple[Memory, Memory, str]] = ()) -> Callable[[str | None], None]:
        """Record a commit being made: upsert (memory, path, blob id) rows, delete ids, move (id, path).

        ``created``: ids of upserted memories new to the store (a new id, a
        path no committed file has), so no row to replace is looked for.
        ``rewrites``: (the memory as its row has it, as it is now, blob id) of
        memories whose file changed but not what is indexed of it (see
        :func:`same_text`: a superseded memory gains ``valid_until``): their
        rows change in place, the full-text index and the sketches untouched.

        The rows are written on a thread of the catalog's own, in one SQLite
        transaction, while the caller writes the commit's objects and files
        (SQLite works without Python's lock, and so do those system calls).
        Returns ``settle``, which the caller must call once: with the commit
        id once the branch points at it, which commits the rows as that
        commit's and waits for them (raising what went wrong); with None when
        it never will, which drops them. A move changes the row's file and
        nothing else: its text is the same, so the full-text index and the
        sketches stay as they are.
        """
        self.settle_pending()
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memsite-catalog")
        recording = self._unsettled = Recording(self._worker, self._writer, self._settling, self._committed,
                                                Upsert(list(upserts), created), list(deletes), list(moves),
                                                [rewrite(*row) for row in rewrites])
        return recording.settle

    def _settling(self, recording: Recording) -> None:
        """``recording`` is being settled: no longer one for :meth:`settle_pending` to drop."""
        if self._unsettled is recording:
            self._unsettled = None

    def _writer(self) -> sqlite3.Connection:
        """The connection the catalog's thread writes through (opened there, on first use).

        A connection of its own: rows written while a commit is made stay
        unseen by the reads made meanwhile (dedup must see the catalog as committed).
        """
        if self._write_db is None:
            self._write_db = connect(self._path)
            # Its log is copied into the catalog after the write that filled it has returned (see
            # _committed), not inside that write's COMMIT, where SQLite would do it (and sync twice);
            # a COMMIT still does it past 16 MB (short-lived writers never reach CHECKPOINT_ROWS).
            self._write_db.execute("PRAGMA wal_autocheckpoint=4000")
            self._write_db.execute("PRAGMA temp_store=MEMORY")
        return self._write_db

    def _committed(self, rows: int) -> None:
        """``rows`` were committed through the catalog's thread: copy its log into the catalog now and then."""
        self._unchecked += rows
        if self._unchecked >= CHECKPOINT_ROWS and self._worker is not None:
            self._unchecked = 0
            self._worker.submit(self._checkpoint)  # runs before any later record's work

    def _checkpoint(self) -> None:
        try:
            self._writer().execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:  # the next one, or any other connection's, copies it
            log.debug("catalog checkpoint failed: %s", exc)

    def settle_pending(self) -> None:
        """Drop what a :meth:`record` whose caller never settled it left open (an interrupt in between).

        Its thread holds a write transaction on the catalog.
        """
        if self._unsettled is not None:
            self._unsettled.settle(None)

    def reset(self) -> None:
        """Forget what is indexed; the next sync rebuilds everything from the files."""
        self.db.execute("DELETE FROM meta WHERE key = 'commit'")

    def sync(self, repo: Repository, config: Config, commit: str | None,
             progress: Callable[[int, int], None] | None = None) -> None:
        """Catch up with ``commit`` by diffing its memories folder against the indexed one.

        A file that cannot be read is recorded as a problem (see
        ``problems.py``), with one warning, and every other file is read.
        When two files claim one id, the one whose path sorts first is the
        memory and the other a problem; removing either settles it.

        Args:
            progress: called as (files read, files to read) while it works.
        """
        self.settle_pending()
        indexed = self.commit
        if indexed == commit:
            return
        memories_dir = config.memories_dir
        new = _folder(repo, commit, memories_dir)
        try:
            old = _folder(repo, indexed, memories_dir) if indexed else None
            rebuild = indexed is None
        except RepositoryError:  # the indexed commit is gone (history rewritten): start over
            old, rebuild = None, True
        touched: list[str] = []
        wanted: list[tuple[str, str, bytes]] = []
        for rel, _before, after in repo.objects.diff(old, new):
            path = f"{memories_dir}/{rel}"
            touched.append(path)
            if after is not None and not after.is_tree:
                wanted.append((path, rel, after.sha))
        blobs = repo.objects.read_blobs([sha for _, rel, sha in wanted if rel.endswith(".md")])
        read: list[tuple[Memory, str, str]] = []
        bad: list[tuple[str, str, str | None, bool, str]] = []  # (path, blob, id, duplicate, message)
        for done, (path, rel, sha) in enumerate(wanted, start=1):
            if progress is not None and (done % 500 == 0 or done == len(wanted)):
                progress(done, len(wanted))
            data = blobs.get(sha, b"")
            try:
                memory = read_memory(config, path, rel, data)
            except FormatError as exc:
                bad.append((path, sha.hex(), claimed_id(data), False, str(exc)))
                continue
            if memory is not None:
                read.append((memory, path, sha.hex()))
        gone = set(touched) if not rebuild else None
        upserts, demoted, settled, promoted = self._settle_ids(repo, config, read, gone)
        commits = _last_commits(repo, None if rebuild else indexed, commit,
                                [p for _, p, _ in upserts if p not in promoted], memories_dir)
        if promoted:  # a copy that now holds its id alone: its last commit may be older than the diff
            commits.update(_last_commits(repo, None, commit, sorted(promoted), memories_dir))
        bad += demoted
        with transaction(self.db):
            if rebuild:
                # Everything goes: empty the index at once rather than row by row.
                self.db.execute("DROP TRIGGER memories_fts_delete")
                self.db.execute("DELETE FROM memories")
                self.db.execute("DELETE FROM sketches")
                self.db.execute("DELETE FROM sketch_filter")
                self.db.execute("DELETE FROM sketch_recent")
                self.db.execute("DELETE FROM problems")
                self.db.execute("DELETE FROM memory_tags")
                self.db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')")
                self.db.execute(_DELETE_TRIGGER)
            gone_rows = [(p,) for p in [*touched, *(b[0] for b in demoted), *settled]]
            self.db.executemany("DELETE FROM memories WHERE path = ?", gone_rows)
            self.db.executemany("DELETE FROM problems WHERE path = ?", gone_rows)
            insert_rows(self.db, statements(INSERT, [as_row(m, p, b, commits.get(p)) for m, p, b in upserts]))
            sketches = list(sketch_rows(m for m, _, _ in upserts))
            for sql, values in statements(INSERT_SKETCHES, sketches):
                self.db.execute(sql, values)
            sketch_filter.add(self.db, sketch_filter.prepare([k for k, _ in sketches]))
            self.db.executemany("INSERT OR REPLACE INTO problems VALUES (?, ?, ?, ?, ?)", bad)
            if commit is None:
                self.db.execute("DELETE FROM meta WHERE key = 'commit'")
            else:
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('commit', ?)", (commit,))
        for path, _, _, _, message in bad:  # once per file and content: the next sync does not read it again
            if path not in settled:
                log.warning("skipped %s: %s", path, message.removeprefix(f"{path}: "))

    def _settle_ids(
        self, repo: Repository, config: Config, read: builtins.list[tuple[Memory, str, str]], gone: set[str] | None,
    ) -> tuple[builtins.list[tuple[Memory, str, str]], builtins.list[tuple[str, str, str | None, bool, str]],
               builtins.list[str], set[str]]:
        """Which files read hold their id (the first path wins), and which are copies.

        ``gone``: paths the diff removed or changed (None: everything is read
        again). Rows elsewhere holding an id a read file claims, and copies
        waiting for an id that is now free, take part.

        Returns:
            (memories to insert, rows that became copies as problems, paths of
            copies now read again, paths of copies that now hold their id).
        """
        claims: dict[str, list[tuple[Memory | None, str, str]]] = {}
        for memory, path, blob in read:
            claims.setdefault(memory.id, []).append((memory, path, blob))
        if gone is not None:
            freed = {mid for path in gone
                     for mid, in self.db.execute("SELECT id FROM memories WHERE path = ?", (path,))}
            for mid in list(claims):
                for path, blob in self.db.execute("SELECT path, blob FROM memories WHERE id = ?", (mid,)):
                    if path not in gone:
                        claims[mid].append((None, path, blob))  # indexed already; it stays unless it loses
            waiting = [row for mid in sorted(freed | set(claims)) for row in self.db.execute(
                "SELECT path, blob FROM problems WHERE duplicate AND id = ?", (mid,)) if row[0] not in gone]
        else:
            waiting = []
        settled: list[str] = []
        if waiting:
            data = repo.objects.read_blobs([bytes.fromhex(blob) for _, blob in waiting])
            prefix = config.memories_dir + "/"
            for path, blob in waiting:
                try:
                    waiter = read_memory(config, path, path.removeprefix(prefix), data.get(bytes.fromhex(blob), b""))
                except FormatError:
                    continue  # no longer readable (the settings changed): it stays a problem
                if waiter is not None:
                    claims.setdefault(waiter.id, []).append((waiter, path, blob))
                    settled.append(path)
        upserts: list[tuple[Memory, str, str]] = []
        demoted: list[tuple[str, str, str | None, bool, str]] = []
        promoted: set[str] = set()
        for mid, claimants in claims.items():
            claimants.sort(key=lambda claim: claim[1])
            winner, kept, blob = claimants[0]
            if winner is not None:
                upserts.append((winner, kept, blob))
                if kept in settled:
                    promoted.add(kept)
            for _, path, copy_blob in claimants[1:]:
                demoted.append((path, copy_blob, mid, True, duplicate_message(path, mid, kept)))
        return upserts, demoted, settled, promoted


def _folder(repo: Repository, commit: str | None, folder: str) -> bytes | None:
    entry = repo.objects.lookup(repo.root_tree(commit), folder)
    return entry.sha if entry is not None and entry.is_tree else None


def _last_commits(
    repo: Repository, since: str | None, commit: str | None, paths: list[str], folder: str
) -> dict[str, str]:
    """The last commit that touched each path, from one pass of ``git log``."""
    if not paths or commit is None:
        return {}
    if since and repo.parents(commit) == [since]:  # one commit: it changed every path the diff found
        return dict.fromkeys(paths, commit)
    # (git's own walk: one walked here read a tree per commit and path, and a sync brings dozens of commits)
    wanted = set(paths)
    found: dict[str, str] = {}
    revision = f"{since}..{commit}" if since else commit
    current = None
    for raw in repo.git.log(revision, "--format=%x00%H", "--name-only", "--no-renames", paths=[folder]):
        line = raw.decode("utf-8", "surrogateescape")
        if line.startswith("\x00"):
            current = line[1:]
        elif line and current and line in wanted and line not in found:
            found[line] = current
            if len(found) == len(wanted):
                break  # (leaving the loop ends git)
    return found


def _filters(category: str | None, agent: str | None, tags: Iterable[str], since: datetime | None = None,
             until: datetime | None = None, valid_at: datetime | None = None) -> tuple[list[str], list[Any]]:
    """SQL conditions (and their values) on ``memories m``: written from ``since`` to ``until``, still holding
    at ``valid_at`` (no valid_until, or a later one), of ``category``, by ``agent``, holding every tag."""
    where, args = [], []
    if since is not None:  # (times are written alike, so their text sorts as they do)
        where.append("m.created >= ?")
        args.append(format_time(since))
    if until is not None:
        where.append("m.created <= ?")
        args.append(format_time(until))
    if valid_at is not None:
        where.append("(m.valid_until IS NULL OR m.valid_until > ?)")
        args.append(format_time(valid_at))
    if category is not None:
        where.append("m.category = ?")
        args.append(category)
    if agent is not None:
        where.append("m.agent = ?")
        args.append(agent)
    for tag in tags:  # every tag given must be on the memory
        where.append("EXISTS (SELECT 1 FROM memory_tags t WHERE t.tag = ? AND t.n = m.n)")
        args.append(tag)
    return where, args


def _math_functions(db: sqlite3.Connection) -> None:
    """pow and ln, for SQLite builds without its math functions."""
    try:
        db.execute("SELECT pow(2.0, 0.5), ln(2.0)")
    except sqlite3.OperationalError:
        db.create_function("pow", 2, math.pow, deterministic=True)
        db.create_function("ln", 1, math.log, deterministic=True)
