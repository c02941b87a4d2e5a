"""MemoryStore: the Python API agents write memories through.

Every write is one git commit authored by the agent, with a subject a reviewer
can read and ``Memory-Id`` / ``Category`` / ``Action`` trailers. Policy is
enforced here, before anything is written: category routing, size and text
checks, secret refusal, safe names and tags, capacity trimming.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .. import checks
from ..config import Category, Config, load_config
from ..errors import InvalidInput, MemsiteError, NotFound
from ..fileformat import decode, format_memory
from ..merge import DRIVERS
from ..merge import command as merge_command
from ..model import (
    ABSTRACT_MAX,
    ID_RE,
    Memory,
    derive_abstract,
    derive_overview,
    format_time,
    new_id,
    normalize_content,
    one_line,
    parse_time,
    slugify,
    truncate,
    utcnow,
)
from ..ranking import TrimCandidate, plan_trim
from ..text import fingerprint, shared_needed, similarity, sketch
from .activity import ActivityJournal
from .catalog import Catalog
from .objects import blob_id
from .refs import RefMoved
from .repo import Author, Repository

if TYPE_CHECKING:
    from ..extract import Extractor
    from ..protocol import Task
    from ..recall import Hit
    from ..skills import SkillCandidate
    from ..world import World

log = logging.getLogger("memsite")

T = TypeVar("T")
WRITE_ATTEMPTS = 3
AUTHOR_EMAIL = "{agent}@memsite.invalid"  # .invalid: a name, not a mailbox
EDITABLE_FIELDS = frozenset({"content", "abstract", "overview", "tags", "source", "pinned", "category"})


@dataclass(frozen=True)
class _Op:
    action: str  # created | updated | forgotten | trimmed
    memory: Memory
    reason: str | None = None


class MemoryStore:
    """Memories in a git repository, written by one agent.

    Args:
        path: the repository (or any folder inside its working tree).
        agent: who writes; the commit author. Defaults to ``$MEMSITE_AGENT``,
            then git's ``user.name``, then ``human``.
        clock: returns the current time (UTC); for simulations and tests.
        progress: called as (files read, files to read) while the index is rebuilt.
        agent_branch: commit on the branch ``agent/<agent>`` (checked out, created
            from the current branch if new), for review as a pull request.

    Raises:
        RepositoryError: ``path`` is not a git working tree.
        ConfigError: ``mkdocs.yml`` has no valid ``extra.memsite`` section.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ".",
        agent: str | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
        progress: Callable[[int, int], None] | None = None,
        agent_branch: bool = False,
    ) -> None:
        self.repo = Repository(path)
        self._clock = clock or utcnow
        self._progress = progress
        try:
            self.root: Path = self.repo.root
            self.config: Config = load_config(self.root)
            self.agent: str = checks.name(agent if agent is not None else _default_agent(self.repo))
            self.activity = ActivityJournal(self.repo.state_dir / "activity.sqlite3")
            self.catalog = Catalog(self.repo.state_dir / "catalog.sqlite3", self.root, self.activity.path)
            self.auto_load_lines: int = self.config.auto_load_lines
            self.repo.ensure_config(clone_settings())
        except BaseException:
            self.repo.close()
            raise
        self._local = threading.local()
        if agent_branch:
            from ..sync import use_agent_branch

            use_agent_branch(self)

    @classmethod
    def init(
        cls,
        path: str | os.PathLike[str],
        agent: str | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> MemoryStore:
        """Create a memory repository at ``path`` (``git init`` if needed) and open it.

        Writes ``mkdocs.yml`` (site and memsite settings), ``content/`` and
        ``.gitignore``, and commits them.

        Raises:
            MemsiteError: ``path`` already holds a memsite repository or an ``mkdocs.yml``.
        """
        from ..scaffold import create_repository

        create_repository(Path(path), when=(clock or utcnow)())
        return cls(path, agent=agent, clock=clock)

    def close(self) -> None:
        """Release the catalog, the activity journal and git's helper processes."""
        self.catalog.close()
        self.activity.close()
        self.repo.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.root)!r}, agent={self.agent!r})"

    def now(self) -> datetime:
        """The current time as this store sees it (UTC, whole seconds)."""
        return self._clock().astimezone(timezone.utc).replace(microsecond=0)

    # --- reads -------------------------------------------------------------

    def _fresh(self) -> None:
        """Bring the catalog up to the branch tip (cheap when it already is)."""
        with self.repo._thread_lock:
            ref = self.repo.branch()
            if self.catalog.commit != self.repo.refs.read(ref):
                with self.repo.locked():
                    self.catalog.sync(self.repo, self.config, self.repo.refs.read(ref), self._progress)

    def rebuild_index(self) -> int:
        """Rebuild the catalog and full-text index from the files at the branch tip; returns the count."""
        with self.repo._thread_lock, self.repo.locked():
            self.catalog.reset()
            self.catalog.sync(self.repo, self.config, self.repo.refs.read(self.repo.branch()), self._progress)
            return self.catalog.count()

    def get(self, id: str) -> Memory:
        """The memory with ``id``.

        Raises:
            NotFound: no memory has that id.
        """
        with self.repo._thread_lock:
            self._fresh()
            memory = self.catalog.get(id)
        if memory is None:
            raise NotFound(f"no memory with id {id!r}; 'memsite list' shows the ids")
        return memory

    def list(self, category: str | None = None, agent: str | None = None) -> list[Memory]:
        """Memories, oldest first, optionally of one category (or alias) and/or agent."""
        name = self.config.route(category).name if category is not None else None
        with self.repo._thread_lock:
            self._fresh()
            return self.catalog.list(category=name, agent=agent)

    # --- recall -------------------------------------------------------------

    def recall(self, query: str, limit: int = 5, category: str | None = None, tags: Iterable[str] = (),
               agent: str | None = None, min_score: float = 0.0) -> list[Hit]:
        """The memories that best match ``query``, ranked by relevance x decay x boost.

        Args:
            query: any text; its words are searched (no query syntax to get wrong).
            limit: at most this many hits.
            category: only this category (or alias).
            tags: only memories with every one of these tags.
            agent: only memories written by this agent.
            min_score: drop hits scoring below this, after decay.

        Returns:
            Hits, best first; each recalled memory's ``active_count`` is raised
            (journaled at once, committed in batches; see flush_activity).
        """
        from ..text import match_any, search_terms

        if not isinstance(query, str):
            raise InvalidInput(f"query: expected text, got {type(query).__name__}")
        terms = search_terms(query[:4096])  # only its words are used: any text is a valid query
        if not terms:
            return []
        hits = self._ranked(match_any(terms), limit, category, tags, agent, min_score)
        if hits:
            now = format_time(self.now())
            waiting = self.activity.record([h.memory.id for h in hits], now)
            hits = [h.recalled(self.now()) for h in hits]
            if waiting >= self.config.flush_every:
                self.flush_activity()
        return hits

    # --- the long-term memory interface for agents --------------------------

    def record(self, messages: Iterable[Mapping[str, Any]]) -> dict[str, int]:
        """Remember the user and assistant messages of a conversation, one memory each, one commit.

        Returns:
            How many were ``created``, ``merged`` into existing memories, or ``skipped``.
        """
        items = [text for role, text in _message_texts(messages) if role in ("user", "assistant") and text.strip()]
        if not items:
            return {"created": 0, "merged": 0, "skipped": 0}
        with self.transaction(f"Record {len(items)} messages") as tx:
            for text in items:
                tx.remember(text, source="conversation")
        return tx.stats

    def ingest(self, messages: Iterable[Mapping[str, Any]], extractor: Extractor, session_key: str | None = None,
               *, batch_size: int = 200, progress: Callable[[str, int, int], None] | None = None) -> dict[str, int]:
        """Extract memories from a conversation and store them, resumably.

        Survives being killed at any point: :meth:`resume` (or calling this
        again with the same key) finishes the work, storing each candidate
        exactly once and never asking the extractor twice for candidates it
        already gave. Candidates go through dedup; each batch of
        ``batch_size`` is one commit, its counts in ``Ingest-*`` trailers.

        Args:
            messages: the conversation, ``{"role", "content"}`` mappings.
            extractor: turns it into candidates (:class:`memsite.Extractor`).
            session_key: names the checkpoint; derived from the conversation if omitted.
            progress: called as (stage, candidates stored, candidates in all).

        Returns:
            How many memories were ``created``, ``merged`` into existing ones,
            ``skipped`` as exact duplicates, ``refused`` (secrets, invalid text).

        Raises:
            InvalidInput: ``messages`` or ``session_key`` is malformed.
        """
        from ..ingest import ingest

        return ingest(self, messages, extractor, session_key, batch_size=batch_size, progress=progress)

    def incomplete_ingests(self) -> list[str]:
        """Session keys of ingests that were interrupted and left a checkpoint."""
        from ..ingest import incomplete

        return incomplete(self)

    def resume(self, session_key: str, extractor: Extractor | None = None, *,
               progress: Callable[[str, int, int], None] | None = None) -> dict[str, int]:
        """Finish an interrupted :meth:`ingest`; returns its totals.

        ``extractor`` is needed only when the ingest stopped before its
        extractor answered.

        Raises:
            NotFound: no checkpoint for ``session_key``.
        """
        from ..ingest import resume

        return resume(self, session_key, extractor, progress=progress)

    def skill_candidates(self, threshold: int = 5, llm: Callable[[str], str] | None = None) -> list[SkillCandidate]:
        """Patterns recalled at least ``threshold`` times that could become agent skills, best first.

        With ``llm`` the pattern is analysed by it (confidence below 0.7: no
        candidate); without, steps come from the pattern's lists and triggers
        from its abstract and tags. :func:`memsite.render_skill` drafts the SKILL.md.
        """
        from ..skills import candidates

        return candidates(self, threshold, llm)

    def retrieve(self, query_or_messages: str | Iterable[Mapping[str, Any]], limit: int = 5) -> str:
        """Memories relevant to a query (or to the last user message) as text for a system prompt; '' if none."""
        from ..recall import format_hits

        if isinstance(query_or_messages, str):
            query = query_or_messages
        else:
            texts = _message_texts(query_or_messages)
            users = [text for role, text in texts if role == "user"]
            query = users[-1] if users else (texts[-1][1] if texts else "")
        hits = self.recall(query, limit=limit)
        return f"Relevant memories (best first):\n{format_hits(hits)}" if hits else ""

    def tools(self) -> list[dict[str, Any]]:
        """The memory tools an LLM may call: name, description, JSON-Schema parameters each.

        For OpenAI-style APIs wrap each as ``{"type": "function", "function": tool}``.
        """
        from ..recall import TOOLS

        return [dict(tool) for tool in TOOLS]

    def call_tool(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Run a tool from :meth:`tools`; returns text for the LLM (an error too, never an exception)."""
        from ..recall import call_tool

        return call_tool(self, name, arguments)

    def rank(self, limit: int | None = None, category: str | None = None) -> list[Hit]:
        """Every memory (or one category's) ranked by decay x boost: the site's ranking. Not a recall."""
        return self._ranked(None, limit, category, (), None, 0.0)

    def _ranked(self, fts_query: str | None, limit: int | None, category: str | None, tags: Iterable[str],
                agent: str | None, min_score: float) -> list[Hit]:
        from ..recall import Hit

        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidInput(f"limit: expected a whole number >= 0, got {limit!r}")
        name = self.config.route(category).name if category is not None else None
        tag_list = checks.tags(tags)
        with self.repo._thread_lock:
            self._fresh()
            rows = self.catalog.ranked(
                fts_query, now=format_time(self.now()), half_life_days=self.config.half_life_days,
                active_weight=self.config.active_weight, limit=limit, category=name, agent=agent,
                tags=tag_list, min_score=float(min_score),
            )
        return [Hit(memory, relevance, decay, boost, score) for memory, relevance, decay, boost, score in rows]

    def flush_activity(self) -> str | None:
        """Commit the recall counts the journal holds, in one commit; the commit id, or None.

        Also run when a task closes and when ``flush_every`` recalls wait.
        """
        with self.repo._thread_lock, self.repo.locked():
            self._settle_activity()
            batch = self.activity.begin_batch(new_id(), self.repo.refs.read(self.repo.branch()))
            if batch is None:
                return None
            try:
                tx, _ = self._write(lambda tx: tx._record_activity(batch.batch, batch.counts))
            except BaseException:
                self.activity.end_batch(batch, committed=False)
                raise
            self.activity.end_batch(batch, committed=True)
            return tx.commit

    def _settle_activity(self) -> None:
        """Finish a flush that was killed: did its commit land? Then its recalls are counted."""
        for batch in self.activity.unfinished():
            landed = self.repo.commit_with_trailer("Activity-Batch", batch.batch, since=batch.parent)
            self.activity.end_batch(batch, committed=landed)

    # --- writes ------------------------------------------------------------

    def remember(
        self,
        content: str,
        category: str = "general",
        abstract: str | None = None,
        overview: str | None = None,
        tags: Iterable[str] = (),
        source: str | None = None,
        pinned: bool = False,
        dedupe: bool | None = None,
    ) -> Memory:
        """Write a new memory in its own commit (or recognise one already there).

        Args:
            content: the full text (Markdown).
            category: a category name or alias; routes the file to its folder.
            abstract: one-line summary; the first line of ``content`` if None.
            overview: a short paragraph; the first paragraph if None.
            tags: words to file it under.
            source: the session (or other origin) it came from.
            pinned: exempt from decay and trimming.
            dedupe: skip an exact duplicate of the category and merge a near
                one into it (default: the ``dedupe`` setting).

        Returns:
            The stored Memory, with ``.id``, ``.path``, ``.commit`` and
            ``.action``: ``created``, ``merged`` (into an existing memory, which
            keeps its id) or ``skipped`` (an exact duplicate; nothing written).

        Raises:
            InvalidInput: empty, oversized or non-UTF-8 text, bad tags, unknown
                category; SecretFound for credentials. Nothing is written.
        """
        memory = self._new_memory(content, category, abstract, overview, tags, source, pinned)
        tx, added = self._write(lambda tx: tx._add(memory, self.config.dedupe if dedupe is None else dedupe))
        return tx.result(added)

    def update(self, id: str, /, **changes: Any) -> Memory:
        """Change fields of a memory in one commit; it keeps its id.

        Accepts ``content``, ``abstract``, ``overview``, ``tags``, ``source``,
        ``pinned`` and ``category`` (which moves the file). An abstract or
        overview of None is derived from the text again.

        Returns:
            The updated Memory with its new ``.commit`` (unchanged if nothing changed).

        Raises:
            NotFound, InvalidInput, SecretFound.
        """
        tx, updated = self._write(lambda tx: tx.update(id, **changes))
        return tx.result(updated)

    def forget(self, id: str, reason: str = "") -> str:
        """Delete a memory in one commit (it stays in history); returns the commit id."""
        tx, _ = self._write(lambda tx: tx.forget(id, reason=reason))
        assert tx.commit is not None
        return tx.commit

    def trim(self, category: str) -> list[str]:
        """Apply the category's capacity marks now; returns the ids trimmed."""
        name = self.config.route(category).name
        tx, _ = self._write(lambda tx: tx._categories.add(name))
        return [op.memory.id for op in tx.ops if op.action == "trimmed"]

    # --- core memory ----------------------------------------------------------

    def load_core(self, lines: int | None = None) -> str:
        """Prompt-ready core memory: world state, pinned memories, this agent's recent memories.

        Args:
            lines: the most lines to return (default: ``auto_load_lines`` from
                settings or ``MEMSITE_AUTO_LOAD_LINES``, 200).

        Returns:
            At most ``lines`` lines; '' for an empty repository. The recent
            memories section is left out when this agent has none.
        """
        from ..core import core_text, first_lines

        limit = self.auto_load_lines if lines is None else lines
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidInput(f"lines: expected a whole number >= 0, got {limit!r}")
        memories = self.list()
        pinned = [m for m in memories if m.pinned]
        text = core_text(self.world.read(), pinned, self.recent(), self.agent)
        return first_lines(text, limit)

    def load_topic(self, category: str) -> str:
        """The full text of one category (name or alias), oldest first; '' if it has none."""
        from ..core import topic_text

        return topic_text(self.list(category=category))

    def recent(self, n: int = 10) -> list[str]:
        """The texts of this agent's ``n`` most recent memories, oldest first (never empty ones)."""
        from ..core import recent_texts

        return recent_texts(self.list(agent=self.agent), n)

    @property
    def world(self) -> World:
        """The shared world state: ``store.world.read()``, ``store.world.merge({...})``."""
        from ..world import World

        return World(self)

    def task(self, type: str | None = None, keywords: Iterable[str] = (), *,
             plan: Iterable[str] | None = None) -> Task:
        """Start a task, or resume this agent's unfinished one; use it as a context manager.

        Args:
            type: what kind of task (debug, fix, feature...). None resumes the
                open task.
            keywords: what it is about; with the type and date they name the
                session record.
            plan: the first TODO items (``task.plan`` replaces them later).

        Returns:
            A Task. Leaving the ``with`` block closes it: one commit of the
            session record, agent knowledge, world state and cleared working
            memory. If the block raises, the session is recorded as failed and
            the exception propagates.

        Raises:
            ProtocolError: another task of this agent is open or unfinished.
        """
        from ..protocol import start

        return start(self, type, keywords, plan)

    def transaction(self, message: str | None = None) -> Transaction:
        """Group writes into one commit: ``with store.transaction("msg") as tx:``.

        The repository lock is held for the block. If the block raises, nothing
        is committed. After it, ``tx.commit`` is the commit id.
        """
        return Transaction(self, message)

    def _write(self, body: Callable[[Transaction], T], message: str | None = None) -> tuple[Transaction, T]:
        """Run ``body`` in its own transaction, again if the branch moved under it.

        The branch only moves under memsite's lock when a plain git command
        (a pull, a hand-made commit) ran meanwhile; the write is then redone
        on top of it.
        """
        for attempt in range(WRITE_ATTEMPTS):
            try:
                with self.transaction(message) as tx:
                    result = body(tx)
                return tx, result
            except RefMoved:
                if attempt == WRITE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    # --- building records --------------------------------------------------

    def _new_memory(self, content: Any, category: Any, abstract: Any, overview: Any, tags: Any, source: Any,
                    pinned: Any) -> Memory:
        fields = self._fields(dict(content=content, category=category, abstract=abstract, overview=overview,
                                   tags=tags, source=source, pinned=pinned), None)
        now = self.now()
        return Memory(id=new_id(), agent=self.agent, created=now, updated=now, **fields)

    def _fields(self, given: dict[str, Any], current: Memory | None) -> dict[str, Any]:
        """Checked values for the fields in ``given`` (of a new memory when ``current`` is None).

        An abstract or overview of None is derived from the text.

        Raises:
            InvalidInput: naming the field and the fix; SecretFound.
        """
        unknown = set(given) - EDITABLE_FIELDS
        if unknown:
            raise InvalidInput(f"update: cannot change {', '.join(sorted(unknown))}; "
                               f"allowed fields are {', '.join(sorted(EDITABLE_FIELDS))}")
        out: dict[str, Any] = {}
        if "category" in given:
            out["category"] = self.config.route(given["category"]).name
        if "content" in given:
            text = checks.text(given["content"], "content", max_bytes=self.config.max_memory_bytes)
            out["content"] = normalize_content(text)
            if not out["content"]:
                fix = "write what should be remembered" if current is None else "use forget() to remove a memory"
                raise InvalidInput(f"content: is empty; {fix}")
        content = out.get("content", current.content if current else "")
        if "abstract" in given:
            value = given["abstract"]
            out["abstract"] = (derive_abstract(content) if value is None
                               else truncate(one_line(checks.text(value, "abstract", max_bytes=4096)), ABSTRACT_MAX))
        if "overview" in given:
            value = given["overview"]
            abstract = out.get("abstract", current.abstract if current else "")
            out["overview"] = (derive_overview(content, abstract) if value is None
                               else checks.text(value, "overview", max_bytes=4096, allow_empty=True).strip())
        if "tags" in given:
            out["tags"] = checks.tags(given["tags"])
        if "source" in given:
            value = given["source"]
            out["source"] = None if value is None else one_line(checks.text(value, "source", max_bytes=512)) or None
        if "pinned" in given:
            if not isinstance(given["pinned"], bool):
                raise InvalidInput(f"pinned: expected true or false, got {given['pinned']!r}")
            out["pinned"] = given["pinned"]
        checks.no_secrets({name: " ".join(value) if name == "tags" else value for name, value in out.items()
                           if name in ("content", "abstract", "overview", "source", "tags")})
        return out

    def _reason(self, reason: Any) -> str:
        text = one_line(checks.text(reason or "", "reason", max_bytes=1024, allow_empty=True))
        checks.no_secrets({"reason": text})
        return text


class Transaction:
    """Writes collected into one commit; see :meth:`MemoryStore.transaction`."""

    def __init__(self, store: MemoryStore, message: str | None) -> None:
        self.store = store
        self.message = None if message is None else one_line(checks.text(message, "message", max_bytes=1024))
        self.commit: str | None = None
        self.ops: list[_Op] = []
        self.skipped: list[str] = []  # ids of existing memories that new ones duplicated exactly
        # What this transaction added, found the way the catalog finds what is committed:
        self._by_fingerprint: dict[tuple[str, str], str] = {}  # (category, fingerprint) -> id
        self._by_sketch: dict[tuple[str, int], set[str]] = {}  # (category, sketch value) -> ids
        self._files: dict[str, bytes | None] = {}
        self._pending: dict[str, Memory | None] = {}  # id -> new state (None: gone)
        self._paths: dict[str, str] = {}  # id -> file path (relative) of pending memories
        self._categories: set[str] = set()
        self._owned: dict[str, bytes] = {}
        self.trailers: list[tuple[str, str]] = []  # more trailers for the commit (features add theirs)
        self._lock: Any = None
        self._open = False

    # --- the block ---------------------------------------------------------

    def __enter__(self) -> Transaction:
        store = self.store
        if getattr(store._local, "tx", None) is not None:
            raise MemsiteError("a transaction is already open in this thread; write through it (tx.remember, ...)")
        self._lock = store.repo.locked()
        self._lock.__enter__()
        try:
            self.ref = store.repo.branch()
            self.parent = store.repo.refs.read(self.ref)
            self._base_tree = store.repo.root_tree(self.parent)
            store.catalog.sync(store.repo, store.config, self.parent)
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        store._local.tx = self
        self._open = True
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        try:
            if kind is None:
                self._commit()
        finally:
            self._open = False
            self.store._local.tx = None
            self._lock.__exit__(None, None, None)

    def _check_open(self) -> None:
        if not self._open:
            raise MemsiteError("the transaction is closed; open a new one with store.transaction()")

    # --- operations --------------------------------------------------------

    def remember(self, content: str, category: str = "general", abstract: str | None = None,
                 overview: str | None = None, tags: Iterable[str] = (), source: str | None = None,
                 pinned: bool = False, dedupe: bool | None = None) -> Memory:
        """As :meth:`MemoryStore.remember`, committed with the transaction."""
        self._check_open()
        memory = self.store._new_memory(content, category, abstract, overview, tags, source, pinned)
        return self._add(memory, self.store.config.dedupe if dedupe is None else dedupe)

    def get(self, id: str) -> Memory:
        """The memory as this transaction would leave it."""
        if id in self._pending:
            memory = self._pending[id]
            if memory is None:
                raise NotFound(f"memory {id} was forgotten in this transaction")
            return memory
        if not isinstance(id, str) or not ID_RE.match(id):
            raise NotFound(f"no memory with id {id!r}; 'memsite list' shows the ids")
        memory = self.store.catalog.get(id, live=False)  # a write starts from what is committed
        if memory is None:
            raise NotFound(f"no memory with id {id!r}; 'memsite list' shows the ids")
        return memory

    def update(self, id: str, /, **changes: Any) -> Memory:
        """As :meth:`MemoryStore.update`, committed with the transaction."""
        self._check_open()
        current = self.get(id)
        changed = current.replace(**self.store._fields(changes, current))
        if changed == current:
            return current
        changed = changed.replace(updated=self.store.now())
        path = self._path_of(current)
        if changed.category != current.category:
            self._files[path] = None
            self._categories.add(changed.category)
            path = self._allocate(changed)
        changed = self._stage(changed, path)
        self.ops.append(_Op("updated", changed))
        return changed

    def forget(self, id: str, reason: str = "") -> Memory:
        """As :meth:`MemoryStore.forget`, committed with the transaction; returns what was forgotten."""
        self._check_open()
        current = self.get(id)
        self._files[self._path_of(current)] = None
        self._pending[current.id] = None
        self.ops.append(_Op("forgotten", current, self.store._reason(reason) or None))
        return current

    # --- other files (world state, sessions, notes) --------------------------

    def read_text(self, path: str) -> str | None:
        """The text of ``path`` as this transaction would leave it (None if absent)."""
        if path in self._files:
            data = self._files[path]
        else:
            data = self.store.repo.read_file(self.parent, path)
        return None if data is None else decode(data, path)

    def write_text(self, path: str, text: str, *, owned: bytes | None = None) -> None:
        """Stage ``text`` for ``path``. Session records are append-only: an existing one is refused.

        ``owned`` is what the working tree may hold instead of the committed
        file: bytes this writer put there itself (see Repository.commit).
        """
        self._check_open()
        sessions = self.store.config.sessions_dir + "/"
        if path.startswith(sessions) and self.read_text(path) is not None:
            raise InvalidInput(f"{path}: session records are append-only; it exists already and is never rewritten")
        self._files[path] = text.encode("utf-8")
        if owned is not None:
            self._owned[path] = owned

    def listing(self, folder: str) -> list[str]:
        """Names of the files in ``folder`` at the base commit (not recursive)."""
        entry = self.store.repo.objects.lookup(self._base_tree, folder)
        if entry is None or not entry.is_tree:
            return []
        return [name for name, item in self.store.repo.objects.tree(entry.sha).items() if not item.is_tree]

    def abort(self) -> None:
        """Drop everything staged: the block ends without a commit."""
        self._files.clear()
        self._pending.clear()
        self._paths.clear()
        self._owned.clear()
        self._categories.clear()
        self.ops.clear()
        self.trailers.clear()

    @property
    def stats(self) -> dict[str, int]:
        """How many memories this transaction created, merged into others, and skipped."""
        return {"created": sum(op.action == "created" for op in self.ops),
                "merged": sum(op.action == "merged" for op in self.ops),
                "skipped": len(self.skipped)}

    def result(self, memory: Memory) -> Memory:
        """``memory`` with the commit of this (finished) transaction."""
        if memory.action == "skipped":
            return memory
        final = self._pending.get(memory.id, memory) or memory
        return final.replace(commit=self.commit if self.commit else final.commit, action=_last_action(self.ops, memory.id))

    # --- internals ---------------------------------------------------------

    def _add(self, memory: Memory, dedupe: bool) -> Memory:
        mark = fingerprint(memory.content)
        twin, exact = self._twin(memory, mark) if dedupe else (None, False)
        if twin is not None and exact:
            self.skipped.append(twin.id)
            return twin.replace(action="skipped")
        if twin is not None:
            merged = self._merged(twin, memory)
            self._stage(merged, self._path_of(twin))
            self._index(merged)
            self.ops.append(_Op("merged", merged))
            return merged.replace(action="merged")
        memory = self._stage(memory, self._allocate(memory))
        self._index(memory)
        self._categories.add(memory.category)
        self.ops.append(_Op("created", memory))
        return memory.replace(action="created")

    def _index(self, memory: Memory) -> None:
        self._by_fingerprint[(memory.category, fingerprint(memory.content))] = memory.id
        for value in sketch(memory.content):
            self._by_sketch.setdefault((memory.category, value), set()).add(memory.id)

    def _twin(self, memory: Memory, mark: str) -> tuple[Memory | None, bool]:
        """An existing memory of the same category saying the same thing, and whether exactly."""
        catalog, category = self.store.catalog, memory.category
        staged = self._by_fingerprint.get((category, mark))
        exact = self._pending.get(staged) if staged else catalog.find_duplicate(category, mark)
        if exact is not None and exact.id in self._pending:
            exact = self._pending[exact.id]  # as this transaction has it (None: forgotten here)
        if exact is not None and fingerprint(exact.content) == mark:
            return exact, True
        marks, shared = sketch(memory.content), 0
        shared = shared_needed(marks)
        counts = Counter(i for h in marks for i in self._by_sketch.get((category, h), ()))
        texts = {i: m.content for i, n in counts.items() if n >= shared and (m := self._pending.get(i)) is not None}
        for mid, content in catalog.sharing_sketch(category, marks, shared):
            if mid not in self._pending:  # what this transaction did to it wins
                texts[mid] = content
        best, best_score = None, self.store.config.dedupe_threshold
        for mid, content in texts.items():
            score = similarity(content, memory.content)
            if score >= best_score:
                best, best_score = mid, score
        if best is None:
            return None, False
        twin = self._pending.get(best) or self.store.catalog.get(best, live=False)
        return (twin if twin is not None and twin.category == category else None), False

    def _merged(self, existing: Memory, new: Memory) -> Memory:
        """``existing`` with what ``new`` adds: the fuller text, the union of tags, its source."""
        sources = list(existing.extra.get("sources") or ([existing.source] if existing.source else []))
        if new.source and new.source not in sources:
            sources.append(new.source)
        extra = {**existing.extra, "sources": sources} if len(sources) > 1 else dict(existing.extra)
        longer = len(new.content) > len(existing.content)
        return existing.replace(
            content=new.content if longer else existing.content,
            abstract=new.abstract if longer else existing.abstract,
            overview=new.overview if longer else existing.overview,
            tags=tuple(dict.fromkeys(existing.tags + new.tags)),
            source=new.source or existing.source,
            extra=extra,
            updated=self.store.now(),
        )

    def _record_activity(self, batch: str, counts: Mapping[str, tuple[int, str]]) -> None:
        """Stage the recall counts of a journal batch (see MemoryStore.flush_activity)."""
        for mid, (recalls, last) in sorted(counts.items()):
            current = self.store.catalog.get(mid, live=False)
            if current is None or current.id in self._pending:
                continue  # forgotten or trimmed since it was recalled
            last_time = parse_time(last)
            if current.last_recalled is not None and current.last_recalled > last_time:
                last_time = current.last_recalled
            updated = current.replace(active_count=current.active_count + recalls, last_recalled=last_time)
            self._stage(updated, self._path_of(current))
            self.ops.append(_Op("recalled", updated, f"+{recalls}"))
        self.trailers.append(("Activity-Batch", batch))
        self.message = self.message or (f"Record recall activity: {len(self.ops)} memories, "
                                        f"{sum(n for n, _ in counts.values())} recalls")

    def _stage(self, memory: Memory, path: str) -> Memory:
        memory = memory.replace(path=self.store.root / path)
        self._pending[memory.id] = memory
        self._paths[memory.id] = path
        self._files[path] = format_memory(memory).encode("utf-8")
        return memory

    def _path_of(self, memory: Memory) -> str:
        """The file of ``memory`` relative to the repository root."""
        path = self._paths.get(memory.id)
        if path is None:
            assert memory.path is not None
            path = str(memory.path)[len(str(self.store.root)) + 1 :]
        return path

    def _allocate(self, memory: Memory) -> str:
        """A new file path: ``<folder>/<slug>-<id tail>.md``, longer tail on a clash."""
        folder = self._folder(self.store.config.category(memory.category))
        slug = slugify(memory.abstract)
        for tail in (memory.id[-6:], memory.id):
            path = f"{folder}/{slug}-{tail.lower()}.md"
            if path not in self._files and self.store.repo.objects.lookup(self._base_tree, path) is None:
                return path
        raise MemsiteError(f"{path}: already exists; ids are unique, so this file was copied by hand")

    def _folder(self, category: Category) -> str:
        return f"{self.store.config.content_dir}/memories/{category.folder}"

    def _trim(self) -> None:
        store = self.store
        now = store.now()
        for name in sorted(self._categories):
            category = store.config.category(name)
            if not category.capacity.bounded:
                continue
            members = {c.id: c for c in store.catalog.trim_candidates(name)}
            for mid, memory in self._pending.items():
                members.pop(mid, None)
                if memory is not None and memory.category == name:
                    members[mid] = TrimCandidate(memory.id, memory.created, memory.active_count, memory.pinned, memory.lines)
            ids = plan_trim(list(members.values()), category.capacity, now,
                            store.config.half_life_days, store.config.active_weight)
            if not ids:
                continue
            reason = _capacity_reason(category, members.values())
            log.info("trimming %d memories from %s (%s): %s", len(ids), name, reason, ", ".join(ids))
            for mid in ids:
                memory = self.get(mid)
                path = self._path_of(memory)
                self._files[path] = None
                self._pending[mid] = None
                if store.config.trim == "archive":
                    archived = memory.replace(extra={**memory.extra, "archived": format_time(now), "archive_reason": reason})
                    archive_path = f"{store.config.content_dir}/archive/{category.folder}/{Path(path).name}"
                    self._files[archive_path] = format_memory(archived).encode("utf-8")
                self.ops.append(_Op("trimmed", memory, reason))

    def _commit(self) -> None:
        store = self.store
        self._trim()
        if not self._files:
            return
        sha = store.repo.commit(
            self.ref, self.parent, self._files,
            message=self._message(), author=Author(store.agent, AUTHOR_EMAIL.format(agent=store.agent)),
            when=int(store.now().timestamp()), owned=self._owned, landed=self._landed,
        )
        if sha is not None:
            store.repo.maintain(sha)

    def _landed(self, sha: str) -> None:
        """The branch points at ``sha``: record it in the catalog (while the working tree is written)."""
        self.commit = sha
        upserts = []
        for mid, memory in self._pending.items():
            if memory is not None:
                memory = self._pending[mid] = memory.replace(commit=sha)
                path = self._path_of(memory)
                upserts.append((memory, path, blob_id(self._files[path] or b"").hex()))
        deletes = [mid for mid, memory in self._pending.items() if memory is None]
        self.store.catalog.apply(sha, upserts, deletes)

    def _message(self) -> str:
        main = [op for op in self.ops if op.action != "trimmed"]
        trims = [op for op in self.ops if op.action == "trimmed"]
        if self.message:
            subject = self.message
        elif len(main) == 1:
            op = main[0]
            verb = {"created": "Remember", "updated": "Update", "forgotten": "Forget", "merged": "Merge into",
                    "recalled": "Recall"}[op.action]
            subject = f"{verb} {op.memory.category}: {op.memory.abstract}"
        elif main:
            subject = f"Write {len(main)} memories"
        elif trims:
            subject = f"Trim {', '.join(sorted({op.memory.category for op in trims}))}"
        else:
            subject = "Update " + ", ".join(sorted(self._files))
        lines = [truncate(subject, 72), ""]
        for op in main:
            if op.action == "forgotten" and op.reason:
                lines.append(f"Forgot {op.memory.id}: {op.reason}")
        if trims:
            lines.append(f"Trimmed {len(trims)} memories over capacity: {trims[0].reason}.")
        if lines[-1] != "":
            lines.append("")
        for op in self.ops:
            lines += [f"Memory-Id: {op.memory.id}", f"Category: {op.memory.category}", f"Action: {op.action}"]
            if op.reason:
                lines.append(f"{'Recalls' if op.action == 'recalled' else 'Reason'}: {op.reason}")
        if self.skipped:
            lines.append(f"Skipped: {len(self.skipped)}")
        lines += [f"{key}: {value}" for key, value in self.trailers]
        return "\n".join(lines) + "\n"


def _last_action(ops: list[_Op], mid: str) -> str | None:
    actions = [op.action for op in ops if op.memory.id == mid]
    return actions[-1] if actions else None


def _capacity_reason(category: Category, members: Iterable[TrimCandidate]) -> str:
    members = list(members)
    parts = []
    if category.capacity.entries is not None:
        mark = category.capacity.entries
        parts.append(f"{len(members)} entries > {mark.high}, trimmed to <= {mark.low}")
    if category.capacity.lines is not None:
        mark = category.capacity.lines
        parts.append(f"{sum(m.lines for m in members)} lines > {mark.high}, trimmed to <= {mark.low}")
    return f"{category.name} capacity ({'; '.join(parts)})"


def _message_texts(messages: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(role, text) of chat messages: content as a string or a list of text parts."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
        raise InvalidInput("messages: expected a list of {'role': ..., 'content': ...} mappings")
    result = []
    for number, message in enumerate(messages, start=1):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise InvalidInput(f"message {number}: expected a mapping with 'role' and 'content'")
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(part.get("text", "") for part in content
                                if isinstance(part, Mapping) and isinstance(part.get("text"), str))
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise InvalidInput(f"message {number}: 'content' must be text or a list of text parts")
        result.append((message["role"], content))
    return result


def clone_settings() -> dict[tuple[str, str | None, str], str]:
    """The git config every clone of a memory repository needs (git never shares it)."""
    settings: dict[tuple[str, str | None, str], str] = {("core", None, "splitIndex"): "true"}
    for driver in DRIVERS:
        settings[("merge", driver.name, "name")] = driver.description
        settings[("merge", driver.name, "driver")] = merge_command(driver)
    return settings


def _default_agent(repo: Repository) -> str:
    name = os.environ.get("MEMSITE_AGENT")
    if name:
        return name
    try:
        user = repo.git.config_reader().get_value("user", "name", "")
    except Exception:
        user = ""
    slug = slugify(str(user), limit=64) if user else ""
    return slug if slug and slug != "memory" else "human"
