"""Every version of every memory along the branch, for reads in record time (as of a past commit).

Record time asks what the memories held after the last commit before a
moment. Moving a catalog from commit to commit costs every file that differs
(thousands between two dates months apart); instead this table holds each
version a memory file had on the branch's first parents, once: the blob and
its parsed row, from the commit that wrote it (``born``) to the one that
changed or removed it (``died``), commits numbered along the first parents.
It is built once from one ``git log --raw`` of the memories folder and
extended as the branch grows, in ``.memsite/past.sqlite3`` (derived: deleted
or damaged, it is built again; a history rewritten under it, by a purge say,
starts it over). A read as of a commit is then a look-up: a temporary view,
``memories``, shows the rows alive at that commit, and every read of
:class:`~memsite.storage.catalog.Catalog` runs on it unchanged.

One difference from a catalog of that commit alone: the full-text index
holds every version, so bm25's word weights count the words of versions
since replaced too. The matches themselves are only the rows alive then.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from ..foundation.config import Config
from ..foundation.errors import FormatError
from ..git import GitFailed, Repository
from .catalog import Catalog
from .catalog_rows import COLUMNS, as_row
from .reading import read_memory
from .sqlite import script_statements, statements, transaction

log = logging.getLogger("memsite")

NEVER = 1 << 62  # 'died' of a version still there at the newest commit numbered
_SCHEMA = f"""
DROP TABLE IF EXISTS main.memories_fts; DROP TABLE IF EXISTS main.version_tags; DROP TABLE IF EXISTS main.versions;
DROP TABLE IF EXISTS main.commits; DROP TABLE IF EXISTS main.meta; DROP TABLE IF EXISTS main.problems;
DROP TABLE IF EXISTS main.memories; DROP TABLE IF EXISTS main.memory_tags; DROP TABLE IF EXISTS main.sketches;
DROP TABLE IF EXISTS main.sketch_filter; DROP TABLE IF EXISTS main.sketch_recent;
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE commits (
    seq INTEGER PRIMARY KEY, sha TEXT NOT NULL UNIQUE, time INTEGER NOT NULL,
    live INTEGER NOT NULL DEFAULT 0  -- memories alive after it: count() without counting the view
);
CREATE TABLE versions (
    n INTEGER PRIMARY KEY,
    id TEXT NOT NULL, path TEXT NOT NULL, blob TEXT NOT NULL, commit_id TEXT,
    category TEXT NOT NULL, abstract TEXT NOT NULL, overview TEXT NOT NULL, agent TEXT NOT NULL,
    created TEXT NOT NULL, updated TEXT NOT NULL, source TEXT, tags TEXT NOT NULL,
    active_count INTEGER NOT NULL, last_recalled TEXT, pinned INTEGER NOT NULL,
    extra TEXT NOT NULL, content TEXT NOT NULL, lines INTEGER NOT NULL, fingerprint TEXT NOT NULL,
    valid_until TEXT, born INTEGER NOT NULL, died INTEGER NOT NULL DEFAULT {NEVER}
);
CREATE INDEX versions_open ON versions (path) WHERE died = {NEVER};
CREATE INDEX versions_id ON versions (id);
CREATE INDEX versions_id_nocase ON versions (id COLLATE NOCASE);
CREATE INDEX versions_short_id ON versions (lower(substr(id, -6)));
CREATE INDEX versions_category ON versions (category, created, id);
CREATE TABLE version_tags (tag TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (tag, n)) WITHOUT ROWID;
CREATE TABLE problems (
    path TEXT PRIMARY KEY, blob TEXT NOT NULL, id TEXT, duplicate INTEGER NOT NULL, message TEXT NOT NULL
);
CREATE VIRTUAL TABLE memories_fts USING fts5(
    abstract, overview, content, tags,
    content='versions', content_rowid='n', tokenize='porter unicode61 remove_diacritics 2'
)
"""


def _alive(row: str) -> str:
    """The SQL condition that version ``row`` (a table's alias) is alive at the commit read."""
    return f"{row}.born <= (SELECT seq FROM temp.at) AND {row}.died > (SELECT seq FROM temp.at)"


# Per connection: the commit read, and the catalog's tables as views of the rows alive at it.
_VIEWS = f"""
CREATE TEMP TABLE IF NOT EXISTS at (seq INTEGER NOT NULL);
CREATE TEMP VIEW IF NOT EXISTS memories AS SELECT n, {', '.join(COLUMNS)} FROM main.versions v WHERE {_alive("v")};
CREATE TEMP VIEW IF NOT EXISTS memory_tags AS
    SELECT t.tag, t.n FROM main.version_tags t JOIN main.versions v ON v.n = t.n WHERE {_alive("v")}
"""
_INSERT = f"INSERT INTO versions ({', '.join(COLUMNS)}, born) VALUES "
BLOBS_AT_ONCE = 2000  # blobs read and parsed in one go while the table is built


class Versions(Catalog):
    """The memories of the branch at any commit of its first parents (see the module's docstring).

    Reads are those of a :class:`Catalog`, at the commit :meth:`sync` chose.
    """

    schema_version = "versions-3"
    tables = _SCHEMA
    live_rows = " AND EXISTS (SELECT 1 FROM memories m WHERE m.n = memories_fts.rowid)"  # (IN: a scan each time)

    def __init__(self, path: Path | str, root: Path, activity: Path | str) -> None:
        super().__init__(path, root, activity)
        for statement in script_statements(_VIEWS + ";"):
            self.db.execute(statement)
        if self.db.execute("SELECT count(*) FROM temp.at").fetchone()[0] == 0:
            self.db.execute("INSERT INTO temp.at VALUES (0)")
        self._at: str | None = None

    @property
    def commit(self) -> str | None:
        """The commit read (the one :meth:`sync` last chose)."""
        return self._at

    def sync(self, repo: Repository, config: Config, commit: str | None,
             progress: Callable[[int, int], None] | None = None) -> None:
        """Read as of ``commit`` (one of the branch's first parents): number it, and the commits before it, with
        the versions they wrote, if the table does not hold it yet.

        Args:
            progress: called as (files read, files to read) while the table is built.
        """
        seq = 0 if commit is None else self._seq(commit)
        if seq is None and commit is not None:
            self._extend(repo, config, commit, progress)
            seq = self._seq(commit)
        assert seq is not None
        self.db.execute("UPDATE temp.at SET seq = ?", (seq,))
        self._at = commit

    def commit_at(self, repo: Repository, config: Config, tip: str, when: int,
                  progress: Callable[[int, int], None] | None = None) -> str | None:
        """The last commit of the branch at ``tip`` (its first parents) made at ``when`` (a Unix time) or before,
        as ``git rev-list -1 --first-parent --before=when tip`` finds it; None if none."""
        if self._seq(tip) is None:
            self._extend(repo, config, tip, progress)
        row = self.db.execute("SELECT sha FROM commits WHERE seq <= (SELECT seq FROM commits WHERE sha = ?) "
                              "AND time <= ? ORDER BY seq DESC LIMIT 1", (tip, when)).fetchone()
        return row[0] if row else None

    def _seq(self, commit: str) -> int | None:
        row = self.db.execute("SELECT seq FROM commits WHERE sha = ?", (commit,)).fetchone()
        return row[0] if row else None

    def _extend(self, repo: Repository, config: Config, commit: str,
                progress: Callable[[int, int], None] | None) -> None:
        """Number the first-parent commits up to ``commit`` not numbered yet and add the versions they wrote;
        start over when the newest numbered is not among them (the history was rewritten)."""
        newest = self.db.execute("SELECT seq, sha FROM commits ORDER BY seq DESC LIMIT 1").fetchone()
        since = newest[1] if newest else None
        try:
            chain = _first_parents(repo, since, commit)
        except GitFailed:  # (the newest numbered is gone)
            chain = []
        if since is not None and (not chain or repo.parents(chain[0][0])[:1] != [since]):
            log.info("the history of the branch changed: the table of past versions is built again")
            with transaction(self.db):
                for statement in script_statements(self.tables + ";"):
                    self.db.execute(statement)
                self.db.execute("INSERT INTO meta VALUES ('schema', ?)", (self.schema_version,))
            newest, since = None, None
            chain = _first_parents(repo, None, commit)
        first = newest[0] + 1 if newest else 1
        numbered = {sha: first + i for i, (sha, _) in enumerate(chain)}
        changes = list(_changes(repo, since, commit, config.memories_dir))
        with transaction(self.db):
            self.db.executemany("INSERT INTO commits (seq, sha, time) VALUES (?, ?, ?)",
                                ((first + i, sha, time) for i, (sha, time) in enumerate(chain)))
            last = self.db.execute("SELECT coalesce(max(n), 0) FROM versions").fetchone()[0]
            for start in range(0, len(changes), BLOBS_AT_ONCE):
                batch = changes[start : start + BLOBS_AT_ONCE]
                if progress is not None:
                    progress(start, len(changes))
                self._add(repo, config, batch, numbered)
            self.db.execute("INSERT INTO memories_fts (rowid, abstract, overview, content, tags) "
                            "SELECT n, abstract, overview, content, tags FROM versions WHERE n > ?", (last,))
            self.db.execute("INSERT OR IGNORE INTO version_tags (tag, n) "
                            "SELECT j.value, v.n FROM versions v, json_each(v.tags) j WHERE v.n > ?", (last,))
            self._count_live(first, newest[0] if newest else 0)
        if progress is not None and changes:
            progress(len(changes), len(changes))

    def _add(self, repo: Repository, config: Config, changes: list[tuple[str, str, bytes | None]],
             numbered: dict[str, int]) -> None:
        """Close the open version of each changed path and add the one each commit wrote (in their order)."""
        blobs = repo.objects.read_blobs([sha for _, path, sha in changes if sha is not None and path.endswith(".md")])
        prefix = config.memories_dir + "/"
        rows: list[tuple[object, ...]] = []
        added: set[str] = set()  # paths of the rows waiting
        for commit, path, sha in changes:
            seq = numbered[commit]
            if path in added:  # changed again: its row goes in first, to be closed now
                self._insert(rows)
                rows, added = [], set()
            self.db.execute(f"UPDATE versions SET died = ? WHERE path = ? AND died = {NEVER}", (seq, path))
            if sha is None:
                continue
            try:
                memory = read_memory(config, path, path.removeprefix(prefix), blobs.get(sha, b""))
            except FormatError:
                continue  # a file no reader could read then is no memory of that commit
            if memory is not None:
                rows.append((*as_row(memory, path, sha.hex(), commit), seq))
                added.add(path)
        self._insert(rows)

    def _count_live(self, first: int, before: int) -> None:
        """Number the memories alive after each commit from ``first`` on: those after ``before``, plus the
        versions each commit added, less those it closed."""
        born = dict(self.db.execute("SELECT born, count(*) FROM versions WHERE born >= ? GROUP BY born", (first,)))
        died = dict(self.db.execute(f"SELECT died, count(*) FROM versions WHERE died >= ? AND died < {NEVER} "
                                    "GROUP BY died", (first,)))
        row = self.db.execute("SELECT live FROM commits WHERE seq = ?", (before,)).fetchone()
        live = row[0] if row else 0
        counts = []
        for (seq,) in self.db.execute("SELECT seq FROM commits WHERE seq >= ? ORDER BY seq", (first,)).fetchall():
            live += born.get(seq, 0) - died.get(seq, 0)
            counts.append((live, seq))
        self.db.executemany("UPDATE commits SET live = ? WHERE seq = ?", counts)

    def count(self) -> int:
        """How many memories the commit read holds (kept per commit, see _count_live)."""
        row = self.db.execute("SELECT live FROM commits WHERE seq = (SELECT seq FROM temp.at)").fetchone()
        return row[0] if row else 0

    def _insert(self, rows: list[tuple[object, ...]]) -> None:
        for sql, values in statements(_INSERT, rows):
            self.db.execute(sql, values)


def _first_parents(repo: Repository, since: str | None, commit: str) -> list[tuple[str, int]]:
    """(id, committer time) of the commits from ``since`` (excluded; None: the first) to ``commit`` along first
    parents, oldest first."""
    revision = f"{since}..{commit}" if since else commit
    out = repo.git.run("log", "--first-parent", "--reverse", "--format=%H %ct", revision, "--", check=True).stdout
    return [(sha, int(time)) for sha, time in (line.split() for line in out.splitlines())]


def _changes(repo: Repository, since: str | None, commit: str, folder: str) -> Iterator[tuple[str, str, bytes | None]]:
    """(commit, path, new blob or None if removed) of each file under ``folder`` each first-parent commit after
    ``since`` changed, oldest first: one ``git log --raw``, each commit against its first parent."""
    revision = f"{since}..{commit}" if since else commit
    current = ""
    meta: bytes | None = None
    for record in repo.git.log(revision, "--first-parent", "--reverse", "--diff-merges=first-parent", "--raw",
                               "--no-renames", "--no-abbrev", "-z", "--format=%x01%H", paths=[folder], sep=b"\0"):
        record = record.lstrip(b"\n")
        if record.startswith(b"\x01"):
            current = record[1:].decode()
        elif record.startswith(b":"):
            meta = record
        elif meta is not None and current:
            fields = meta.split()
            new, status = fields[3], fields[4]
            path = record.decode("utf-8", "surrogateescape")
            if fields[1] == b"160000" or fields[1].startswith(b"04"):  # (a submodule or a tree: not a file)
                new = b"0" * 40
            yield current, path, None if status == b"D" or set(new) == {ord("0")} else bytes.fromhex(new.decode())
            meta = None
