"""MemoryStore: the Python API agents write memories through.

Every write is one git commit authored by the agent, with a subject a reviewer
can read and ``Memory-Id`` / ``Category`` / ``Action`` trailers. Policy is
enforced before anything is written: category routing, size and text checks,
secret refusal, safe names and tags here; dedup and capacity trimming in the
transaction that collects the writes (``transaction.py``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .. import checks
from ..config import Config, load_config
from ..errors import InvalidInput, NotFound
from ..merge import DRIVERS
from ..merge import command as merge_command
from ..model import (
    ABSTRACT_MAX,
    Memory,
    derive_abstract,
    derive_overview,
    format_time,
    new_id,
    normalize_content,
    one_line,
    slugify,
    truncate,
    utcnow,
)
from .activity import ActivityJournal
from .catalog import Catalog
from .refs import RefMoved
from .repo import Repository
from .transaction import Transaction
from .vectors import Embedder, Vectors, mix

if TYPE_CHECKING:
    from ..extract import Extractor
    from ..protocol import Task
    from ..recall import Hit
    from ..skills import SkillCandidate
    from ..world import World

T = TypeVar("T")
WRITE_ATTEMPTS = 3
EDITABLE_FIELDS = frozenset({"content", "abstract", "overview", "tags", "source", "pinned", "category"})


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
        embedder: a callable text -> vector (a sequence of floats) that makes
            recall hybrid: relevance mixes word match and cosine similarity
            (``embedding.weight`` in the configuration). Off by default; memsite
            downloads no model. Name the model in a ``model`` attribute.

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
        embedder: Embedder | None = None,
    ) -> None:
        self.repo = Repository(path)
        self._vectors: Vectors | None = None
        self._clock = clock or utcnow
        self._progress = progress
        try:
            self.root: Path = self.repo.root
            self.config: Config = load_config(self.root)
            self.agent: str = checks.name(agent if agent is not None else _default_agent(self.repo))
            self.activity = ActivityJournal(self.repo.state_dir / "activity.sqlite3")
            self.catalog = Catalog(self.repo.state_dir / "catalog.sqlite3", self.root, self.activity.path)
            self.auto_load_lines: int = self.config.auto_load_lines
            self.repo.ensure_config(clone_settings(self.repo))
            if embedder is not None:
                self._vectors = Vectors(self.repo.state_dir / "vectors.sqlite3", embedder, progress)
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
        if self._vectors is not None:
            self._vectors.close()
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
        if not terms and (self._vectors is None or not query.strip()):
            return []
        hits = self._ranked(match_any(terms) if terms else None, limit, category, tags, agent, min_score,
                            meaning=None if self._vectors is None else query)
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
                agent: str | None, min_score: float, *, meaning: str | None = None) -> list[Hit]:
        """Ranked hits: by word match (``fts_query``), by word match and ``meaning`` (hybrid), or by decay alone."""
        from ..recall import Hit

        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidInput(f"limit: expected a whole number >= 0, got {limit!r}")
        name = self.config.route(category).name if category is not None else None
        tag_list = checks.tags(tags)
        with self.repo._thread_lock:
            self._fresh()
            relevance = None
            if meaning is not None and self._vectors is not None:
                words = self.catalog.lexical(fts_query) if fts_query else {}
                closeness = self._vectors.similarities(self.catalog, meaning)
                keep = len(closeness) if limit is None else max(50, 10 * limit)
                relevance = mix(words, closeness, self.config.embedding_weight, keep,
                                self.catalog.matching(name, agent, tag_list))
            rows = self.catalog.ranked(
                fts_query, now=format_time(self.now()), half_life_days=self.config.half_life_days,
                active_weight=self.config.active_weight, limit=limit, category=name, agent=agent,
                tags=tag_list, min_score=float(min_score), relevance=relevance,
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


def clone_settings(repo: Repository) -> dict[tuple[str, str | None, str], str]:
    """The git config every clone of a memory repository needs (git never shares it).

    Besides the merge drivers and a split index: loose objects stored
    uncompressed, unless the user chose a compression at any level. A hand
    commit rewrites a whole category folder; reading it back to update the
    index cost 4 ms at git's default level at 100,000 memories, 0.3 ms stored.
    ``git gc`` still packs them compressed.
    """
    settings: dict[tuple[str, str | None, str], str] = {("core", None, "splitIndex"): "true"}
    if not repo.configured("core", "compression") and not repo.configured("core", "looseCompression"):
        settings[("core", None, "looseCompression")] = "0"
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
