"""The catalog: every memory of the branch tip in SQLite, for reads without git.

It is derived data in ``.memsite/`` (git-ignored): it records the commit it
reflects, and before any read the store compares that with the branch tip. When
they differ (a write by another process that died before updating it, a pull,
a commit made by hand) the catalog catches up by diffing the two trees, which
reads only the folders whose ids changed. Deleting the file rebuilds it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..config import Config
from ..errors import FormatError, RepositoryError
from ..fileformat import parse_memory
from ..model import Memory, format_time, parse_time
from ..ranking import TrimCandidate
from .repo import Repository

SCHEMA_VERSION = "1"

_COLUMNS = (
    "id", "path", "blob", "commit_id", "category", "abstract", "overview", "agent", "created",
    "updated", "source", "tags", "active_count", "last_recalled", "pinned", "extra", "content", "lines",
)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY, path TEXT NOT NULL UNIQUE, blob TEXT NOT NULL, commit_id TEXT,
    category TEXT NOT NULL, abstract TEXT NOT NULL, overview TEXT NOT NULL, agent TEXT NOT NULL,
    created TEXT NOT NULL, updated TEXT NOT NULL, source TEXT, tags TEXT NOT NULL,
    active_count INTEGER NOT NULL, last_recalled TEXT, pinned INTEGER NOT NULL,
    extra TEXT NOT NULL, content TEXT NOT NULL, lines INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS memories_category ON memories (category, created, id);
CREATE INDEX IF NOT EXISTS memories_agent ON memories (agent, created, id);
"""
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM memories"


class Catalog:
    """SQLite view of the memories at one commit."""

    def __init__(self, path: Path, root: Path) -> None:
        self.root = root
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA busy_timeout=30000")
        version = self._meta_or_none("schema")
        if version != SCHEMA_VERSION:  # new, or made by another version: it is derived, so start over
            self.db.executescript("DROP TABLE IF EXISTS memories; DROP TABLE IF EXISTS meta;" + _SCHEMA)
            self.db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))

    def _meta_or_none(self, key: str) -> str | None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError:
            return None
        return row[0] if row else None

    def close(self) -> None:
        self.db.close()

    @property
    def commit(self) -> str | None:
        """The commit this catalog reflects."""
        return self._meta_or_none("commit")

    # --- reads -------------------------------------------------------------

    def _memory(self, row: tuple[Any, ...]) -> Memory:
        (mid, path, _blob, commit, category, abstract, overview, agent, created, updated,
         source, tags, active_count, last_recalled, pinned, extra, content, _lines) = row
        return Memory(
            id=mid, category=category, abstract=abstract, overview=overview, agent=agent,
            created=parse_time(created), updated=parse_time(updated), source=source,
            tags=tuple(json.loads(tags)), active_count=active_count,
            last_recalled=parse_time(last_recalled) if last_recalled else None,
            pinned=bool(pinned), extra=json.loads(extra), content=content,
            path=self.root / path, commit=commit,
        )

    def get(self, mid: str) -> Memory | None:
        row = self.db.execute(f"{_SELECT} WHERE id = ?", (mid,)).fetchone()
        return self._memory(row) if row else None

    def list(self, category: str | None = None, agent: str | None = None) -> list[Memory]:
        where, args = [], []
        if category is not None:
            where.append("category = ?")
            args.append(category)
        if agent is not None:
            where.append("agent = ?")
            args.append(agent)
        sql = _SELECT + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY created, id"
        return [self._memory(row) for row in self.db.execute(sql, args)]

    def trim_candidates(self, category: str) -> list[TrimCandidate]:
        rows = self.db.execute(
            "SELECT id, created, active_count, pinned, lines FROM memories WHERE category = ?", (category,)
        )
        return [TrimCandidate(r[0], parse_time(r[1]), r[2], bool(r[3]), r[4]) for r in rows]

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM memories").fetchone()[0]

    # --- writes ------------------------------------------------------------

    def apply(self, commit: str, upserts: Iterable[tuple[Memory, str, str]], deletes: Iterable[str]) -> None:
        """Record ``commit``: upsert (memory, path, blob id) rows, delete ids, in one transaction."""
        with _transaction(self.db):
            self.db.executemany("DELETE FROM memories WHERE id = ?", ((mid,) for mid in deletes))
            self.db.executemany(
                f"INSERT OR REPLACE INTO memories ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                (_row(memory, path, blob, commit) for memory, path, blob in upserts),
            )
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('commit', ?)", (commit,))

    def sync(self, repo: Repository, config: Config, commit: str | None) -> None:
        """Catch up with ``commit`` by diffing its memories folder against the indexed one.

        Raises:
            FormatError: a memory file at ``commit`` breaks the format (never skipped).
        """
        indexed = self.commit
        if indexed == commit:
            return
        memories_dir = f"{config.content_dir}/memories"
        new = _folder(repo, commit, memories_dir)
        try:
            old = _folder(repo, indexed, memories_dir) if indexed else None
            rebuild = indexed is None
        except RepositoryError:  # the indexed commit is gone (history rewritten): start over
            old, rebuild = None, True
        upserts: list[tuple[Memory, str, str]] = []
        removed_paths: list[str] = []
        for rel, before, after in repo.objects.diff(old, new):
            path = f"{memories_dir}/{rel}"
            if after is None:
                if before is not None and rel.endswith(".md"):
                    removed_paths.append(path)
                continue
            memory = read_memory_blob(repo, config, path, rel, after.sha)
            if memory is not None:
                upserts.append((memory, path, after.sha.hex()))
        commits = _last_commits(repo, None if rebuild else indexed, commit, [p for _, p, _ in upserts], memories_dir)
        with _transaction(self.db):
            if rebuild:
                self.db.execute("DELETE FROM memories")
            self.db.executemany("DELETE FROM memories WHERE path = ?", ((p,) for p in removed_paths))
            # A memory moved between files (renamed, recategorised) keeps its id.
            self.db.executemany("DELETE FROM memories WHERE id = ?", ((m.id,) for m, _, _ in upserts))
            try:
                self.db.executemany(
                    f"INSERT INTO memories ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                    (_row(m, p, b, commits.get(p)) for m, p, b in upserts),
                )
            except sqlite3.IntegrityError:
                raise FormatError(_duplicate_ids_message(upserts, self.db)) from None
            if commit is None:
                self.db.execute("DELETE FROM meta WHERE key = 'commit'")
            else:
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('commit', ?)", (commit,))


def read_memory_blob(repo: Repository, config: Config, path: str, rel: str, sha: bytes) -> Memory | None:
    """Parse the memory file ``path`` (``rel`` under memories/); None for non-memory files."""
    folder, _, name = rel.partition("/")
    if not name.endswith(".md") or "/" in name:
        return None
    category = config.by_folder(folder)
    if category is None:
        raise FormatError(
            f"{path}: folder '{folder}' is not a configured category; "
            "add it under extra.memsite.categories in mkdocs.yml or move the file"
        )
    try:
        text = repo.objects.read_blob(sha).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not valid UTF-8 (byte {exc.start}); save the file as UTF-8") from None
    return parse_memory(text, path, category=category.name)


def _folder(repo: Repository, commit: str | None, folder: str) -> bytes | None:
    entry = repo.objects.lookup(repo.root_tree(commit), folder)
    return entry.sha if entry is not None and entry.is_tree else None


def _last_commits(
    repo: Repository, since: str | None, commit: str | None, paths: list[str], folder: str
) -> dict[str, str]:
    """The last commit that touched each path, from one pass of ``git log``."""
    if not paths or commit is None:
        return {}
    wanted = set(paths)
    found: dict[str, str] = {}
    revision = f"{since}..{commit}" if since else commit
    proc = subprocess.Popen(
        ["git", "log", "--format=%x00%H", "--name-only", "--no-renames", revision, "--", folder],
        cwd=repo.root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    current = None
    for raw in proc.stdout:
        line = raw.decode("utf-8", "surrogateescape").rstrip("\n")
        if line.startswith("\x00"):
            current = line[1:]
        elif line and current and line in wanted and line not in found:
            found[line] = current
            if len(found) == len(wanted):
                break
    proc.kill()
    proc.wait()
    return found


def _row(memory: Memory, path: str, blob: str, commit: str | None) -> tuple[Any, ...]:
    return (
        memory.id, path, blob, commit, memory.category, memory.abstract, memory.overview, memory.agent,
        format_time(memory.created), format_time(memory.updated), memory.source, json.dumps(list(memory.tags)),
        memory.active_count, format_time(memory.last_recalled) if memory.last_recalled else None,
        int(memory.pinned), json.dumps(memory.extra, sort_keys=True), memory.content, memory.lines,
    )


def _duplicate_ids_message(upserts: list[tuple[Memory, str, str]], db: sqlite3.Connection) -> str:
    paths: dict[str, list[str]] = {}
    for memory, path, _ in upserts:
        paths.setdefault(memory.id, []).append(path)
    for mid, found in paths.items():
        row = db.execute("SELECT path FROM memories WHERE id = ?", (mid,)).fetchone()
        if row and row[0] not in found:
            found.append(row[0])
        if len(found) > 1:
            return f"{found[1]}: field 'id': {mid} is also the id of {found[0]}; give one of them a new id"
    return "two memory files share an id; run 'memsite check' to find them"


class _transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, *_: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")


def iter_memory_paths(repo: Repository, config: Config, commit: str | None) -> Iterator[tuple[str, bytes]]:
    """(path, blob id) of every file under the memories folder at ``commit``."""
    memories_dir = f"{config.content_dir}/memories"
    for rel, entry in repo.objects.walk(_folder(repo, commit, memories_dir)):
        yield f"{memories_dir}/{rel}", entry.sha
