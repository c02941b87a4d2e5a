"""MemoryStore: the Python API agents write and recall memories through.

The facade over the layers. It holds a :class:`memsite.storage.Storage`, which
reads and writes memories under memsite's policy; the features (recall,
world state, the task protocol, core memory, ingest, skills, sync) build on
that storage, and this class puts them behind one object. Each public method
is an entry point: :func:`memsite.storage.failures.boundary` turns the OS,
SQLite and git failures below it into memsite's errors there, and nowhere else.
"""

from __future__ import annotations

import builtins
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import date, datetime
from pathlib import Path
from typing import Any, TypeVar

from .features import contradictions, history, retrieval
from .features.asof import moment
from .features.check import CheckResult, check_working_tree
from .features.core_memory import (
    DEFAULT_DIR,
    FALSE,
    TRUE,
    auto_load_lines,
    core_text,
    first_lines,
    recent_memories,
    recent_texts,
    topic_text,
)
from .features.doctor import Finding, diagnose, repair
from .features.embedders import by_name, chosen_name, download_allowed, normal
from .features.extract import Extractor, message_texts
from .features.history import DayReport
from .features.ingest import incomplete, ingest, resume
from .features.llm import OpenAICompatible
from .features.merge import DRIVERS
from .features.merge import run as merge_file
from .features.migrate import Migration, migrate
from .features.opening import open_storage
from .features.protocol import Task, start
from .features.purge import PurgeResult, purge
from .features.recall import TOOLS, Hit, call_tool, format_hits
from .features.relevance import floor
from .features.review import Diff, compare
from .features.scaffold import check_publishable, clone_repository, create_repository, destination, is_memory, publish
from .features.skills import SkillCandidate, candidates, write_drafts
from .features.sync import (
    IntegrateResult,
    Syncer,
    SyncResult,
    integrate,
    propose,
    publish_branch,
    review_branch,
    sync,
)
from .features.world import World
from .foundation import inputs
from .foundation.config import Config
from .foundation.errors import ConfigError, FormatError, InvalidInput, NotFound
from .foundation.record import Memory, format_time, utcnow
from .git import Repository
from .storage import Storage, Transaction
from .storage.chain import chain
from .storage.ids import lookup
from .storage.memories import AGENT_SETTING
from .storage.vectors import Embedder

T = TypeVar("T")


class MemoryStore:
    """Memories in a git repository, written by one agent.

    Args:
        path: the repository (or any folder inside its working tree).
        agent: who writes; the commit author. Defaults to ``$MEMSITE_AGENT``,
            then the clone's ``memsite.agent`` (git config, which :meth:`clone` sets),
            then git's ``user.name``, then ``human``. A name with spaces or
            accents becomes its slug (``"Team Lead"`` writes as ``team-lead``).
        clock: returns the current time (UTC); for simulations and tests.
        progress: called as (files read, files to read) while the index is rebuilt.
        branch: the branch to read and write (default: the one checked out now;
            created from HEAD at the first write if it does not exist). The
            store stays on it: when a person checks out another branch, the
            writes still go to this one, by its ref alone, leaving the person's
            files and index alone. On a detached HEAD with no branch named the
            store reads HEAD's commit and refuses writes.
        agent_branch: write to the branch ``review/<agent>`` (``branch`` named
            for this agent), for review as a pull request (``propose``);
            nothing is checked out. (``agent/<agent>`` is where ``sync``
            publishes for the merge queue, which merges without a review.)
        sync_every: sync with ``remote`` on a background thread after every
            this many commits, and once more when the store closes (see
            :meth:`sync`); writes never wait for it. ``store.syncer.error``
            holds the last failure (logged too), ``store.syncer.last`` the
            last result.
        remote: the git remote ``sync_every`` syncs with.
        embedder: makes recall hybrid: relevance mixes word match and cosine
            similarity (``embedding.weight`` in the configuration). A callable
            text -> vector (a sequence of floats; name the model in a ``model``
            attribute), or a model memsite knows: ``"minilm"`` (the sentence
            model memsite ships, offline; the ``memsite[embed]`` extra),
            ``"wordllama"`` (a static model), ``"none"`` (words only), or
            ``"model2vec:<folder or name>"``, ``"sentence-transformers:<folder
            or name>"``, ``"fastembed:<name>"`` (that library installed, the
            model in a folder or the local cache). None (the default) takes
            ``$MEMSITE_EMBEDDING``, else ``embedding.model`` in the
            configuration, whose default ``auto`` is minilm when its runtime
            is installed, else wordllama when it is, else words only. memsite downloads no model
            unless ``$MEMSITE_EMBEDDING_DOWNLOAD`` or ``embedding.download`` allows it.
        llm: the language model (``llm(prompt) -> str``) that judges whether a
            new memory adds to, merges into, supersedes or repeats a memory of
            its category it looks like (see :meth:`remember`). None (the
            default) takes ``MEMSITE_LLM_*`` (:meth:`memsite.features.llm.OpenAICompatible.from_env`);
            False asks none: such a memory is written and flagged for review.

    Raises:
        RepositoryError: ``path`` is not a git working tree. (A write refused
            for a read-only folder, a detached HEAD or a rebase in progress
            says so when it is made; reads work there.)
        ConfigError: ``mkdocs.yml`` has no valid memsite settings (``plugins.memsite``, or ``extra.memsite`` before).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ".",
        agent: str | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
        progress: Callable[[int, int], None] | None = None,
        agent_branch: bool = False,
        embedder: Embedder | str | None = None,
        branch: str | None = None,
        sync_every: int | None = None,
        remote: str = "origin",
        llm: Callable[[str], str] | bool | None = None,
    ) -> None:
        self.syncer: Syncer | None = None
        self._llm = llm  # judges possible contradictions (see remember); None: MEMSITE_LLM_*, when first needed
        self.cloned: tuple[str, bool] | None = None
        """After :meth:`clone`: (the branch checked out, whether the remote was empty and got a new memory)."""
        self.published: str | None = None
        """After ``init(..., remote=URL)``: what is left to do on the hosting service, if anything."""
        self._store = open_storage(path, agent, clock=clock, progress=progress,
                                   embedder=embedder if callable(embedder) else None, branch=branch)
        self.auto_load_lines: int = self._store.config.auto_load_lines
        """The most lines :meth:`load_core` returns by default."""
        try:
            if agent_branch:
                self._store.ref = inputs.branch(review_branch(self._store))
            if not callable(embedder):
                self._use_named_embedder(embedder)
            if sync_every is not None:
                self.syncer = Syncer(self._store, sync_every, remote)
                self._store.commit_listeners.append(self.syncer.committed)
        except BaseException:
            self.close()
            raise

    def _use_named_embedder(self, name: object) -> None:
        download = download_allowed(self.config.embedding_download)
        if name is None:
            where = "MEMSITE_EMBEDDING" if os.environ.get("MEMSITE_EMBEDDING") else "embedding.model"
            resolved = by_name(chosen_name(self.config.embedding_model), where, download)
        elif isinstance(name, str):
            resolved = by_name(normal(name), download=download)
        else:
            raise InvalidInput(f"embedder: expected a callable (text -> vector) or a model name, "
                               f"got {type(name).__name__}")
        if resolved is not None:
            self._store.use_embedder(resolved)  # opened, and healed, as a callable given to the store is

    @classmethod
    def init(
        cls,
        path: str | os.PathLike[str],
        agent: str | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
        remote: str | None = None,
        exist_ok: bool = False,
    ) -> MemoryStore:
        """Create a memory repository at ``path`` (``git init`` if needed) and open it.

        Writes ``mkdocs.yml`` (site and memsite settings), ``content/`` and
        ``.gitignore``, and commits them.

        Args:
            remote: an empty remote to publish the new memory to, as ``origin``'s ``main``; a remote on this
                machine gets its HEAD set to ``main`` so a plain ``git clone`` checks the memory out
                (elsewhere, ``store.published`` says to set the default branch on the hosting service).
                ``agent``, when given, is kept in the clone's git config (``memsite.agent``).
            exist_ok: open a memsite repository already at ``path`` rather than refuse it (a script's
                first line, run again and again).

        Raises:
            MemsiteError: ``path`` already holds a memsite repository or an ``mkdocs.yml``; ``remote``
                cannot be reached or already has a ``main`` (checked before anything is made).
        """
        where = Path(path)
        if exist_ok and is_memory(where):
            return cls(path, agent=agent, clock=clock)
        if remote is not None:
            parent = where.resolve().parent
            check_publishable(remote, parent if parent.is_dir() else Path.cwd())  # (before anything is made)
        create_repository(where, when=(clock or utcnow)())
        store = cls(path, agent=agent, clock=clock)
        if remote is not None:
            try:
                store.published = publish(store.root, remote)
                if agent is not None:
                    store._keep_agent()
            except BaseException:
                store.close()
                raise
        return store

    @classmethod
    def clone(
        cls,
        url: str,
        path: str | os.PathLike[str] | None = None,
        agent: str | None = None,
        *,
        branch: str | None = None,
        progress: Callable[[int, int], None] | None = None,
        embedder: Embedder | str | None = None,
    ) -> MemoryStore:
        """Join a team's memory: clone it from ``url`` into ``path``, and make recall ready.

        Works with any remote: one whose HEAD names another branch (a plain
        ``git init --bare`` names ``master``; memsite shares ``main``), one
        with the agents' ``agent/...`` branches (never checked out), and an
        empty one (a new memory is made and published to it, as
        ``init(..., remote=url)``). The store opens on the shared branch as
        ``agent``, who is written to the clone's git config (``memsite.agent``)
        so every later command there writes as that agent; the catalog is
        built and the memories embedded (``progress`` is called as (done,
        total)). Nothing is left behind when the clone fails.

        Args:
            url: the remote (any URL or path git clones).
            path: the folder to make (default: the URL's last part, without ``.git``); it may exist if empty.
            branch: the memory's branch on the remote (default: ``main``, else the one the remote's HEAD names).

        Returns:
            The open store (``store.cloned``: the branch, and whether the remote was empty).

        Raises:
            InvalidInput: ``path`` exists and is not an empty folder.
            RepositoryError: ``url`` is not a git repository, cannot be reached, or holds no memsite memory.
        """
        where = destination(url, path)
        chosen, new = clone_repository(url, where, branch)
        try:
            store = cls(where, agent=agent, progress=progress, embedder=embedder)
        except BaseException:
            shutil.rmtree(where, ignore_errors=True)
            raise
        try:
            if agent is not None:
                store._keep_agent()
            store.cloned = (chosen, new)
            store.fresh()
            store.embed()
        except BaseException:
            store.close()
            raise
        return store

    @staticmethod
    def check(path: str | os.PathLike[str], base: str | None = None) -> CheckResult:
        """Check the memory repository at ``path``: every problem and warning at once, one line each.

        Reads the files on disk without opening a store, so a repository a
        store cannot open (a broken ``mkdocs.yml``, a Python tag in it) is
        checked too: that is one of the problems named.

        Args:
            path: the repository's working tree.
            base: a revision; also check what changed since (session records
                are append-only; memories flagged since then).

        Returns:
            A :class:`CheckResult`: ``problems`` (the repository is not valid
            while there is one), ``warnings`` (an earlier layout, possible
            contradictions), ``build_warnings`` (code ``mkdocs.yml`` adds to
            the site build) and ``count``, the memory files read. A ``base``
            that names no commit is a problem too.
        """
        return check_working_tree(Path(path), base=base)

    @staticmethod
    def diagnose(path: str | os.PathLike[str]) -> list[Finding]:
        """What killed writers, hand edits and damaged caches left in the repository at ``path``; changes nothing.

        Works without opening a store (a repository no store opens is what
        it is for): git locks (and whose they may be), dead writers'
        temporary files, an interrupted write, a missing ``.git/index``,
        damaged files in ``.memsite/``, memory files that cannot be read or
        are in the wrong folder.

        Returns:
            Findings: each ``problem`` (or a note), with its ``message`` and whether :meth:`repair` can fix it.
        """
        return diagnose(Path(path))

    @staticmethod
    def repair(path: str | os.PathLike[str], findings: Iterable[Finding], agent: str | None = None) -> list[str]:
        """Repair what is safe among ``findings`` (from :meth:`diagnose`); one line per repair made.

        memsite's own locks left by a killed writer are taken back (never
        anyone else's), dead writers' temporary files removed, an interrupted
        write finished, a missing index and the derived files rebuilt,
        misplaced memory files moved (one commit, by ``agent``).

        Raises:
            MemsiteError: the repository is read-only for this process (nothing is repaired).
        """
        return repair(Path(path), list(findings), agent=agent)

    def _keep_agent(self) -> None:
        """Make this store's agent the one every later command in this clone writes as (``memsite.agent``)."""
        self._store.repo.git.run("config", AGENT_SETTING, self.agent, check=True)

    def close(self) -> None:
        """Sync what the background syncer has not yet (``sync_every``), then release everything."""
        if self.syncer is not None:
            syncer, self.syncer = self.syncer, None
            syncer.close()
        self._store.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r}, agent={self.agent!r})"

    # --- the parts it hands out ------------------------------------------------

    @property
    def root(self) -> Path:
        """The repository's working tree."""
        return self._store.root

    @property
    def config(self) -> Config:
        """memsite's settings, from ``mkdocs.yml``."""
        return self._store.config

    @config.setter
    def config(self, config: Config) -> None:
        self._store.config = config

    @property
    def agent(self) -> str:
        """Who writes: the commit author."""
        return self._store.agent

    @property
    def ref(self) -> str | None:
        """The full name of the branch this store reads and writes (``refs/heads/main``); None on a detached HEAD."""
        return self._store.ref

    @ref.setter
    def ref(self, ref: str | None) -> None:
        self._store.ref = ref

    @property
    def branch(self) -> str | None:
        """The branch this store reads and writes (``main``); None when opened on a detached HEAD (read only)."""
        return self._store.branch

    @property
    def commit_listeners(self) -> list[Callable[[str], None]]:
        """Called with each commit this store makes, once the lock is released (a background syncer listens)."""
        return self._store.commit_listeners

    @property
    def embedder(self) -> Embedder | None:
        """The embedder recall uses (its ``model`` names it); None when recall is by words only."""
        return None if self._store.vectors is None else self._store.vectors.embedder

    @property
    def embedding_model(self) -> str | None:
        """The name of the model recall embeds with (its vectors are kept under it); None by words only."""
        return None if self._store.vectors is None else self._store.vectors.model

    @property
    def world(self) -> World:
        """The shared world state: ``store.world.read()``, ``store.world.merge({...})``."""
        return World(self._store)

    # --- the store's reads and writes ------------------------------------------

    def count(self) -> int:
        """How many memories the branch tip holds (all categories, superseded ones too)."""
        self._store.fresh()
        return self._store.catalog.count()

    def tip(self) -> str | None:
        """The commit reads see: the store's branch (HEAD's commit while that branch does not exist yet,
        or when the store was opened on a detached HEAD)."""
        return self._store.tip()

    def now(self) -> datetime:
        """The current time as this store sees it (UTC, whole seconds)."""
        return self._store.now()

    def cannot_write(self) -> str | None:
        """Why a write would be refused now (one line naming the cause), or None."""
        return self._store.cannot_write()

    def writable_ref(self) -> str:
        """The branch to write to, after checking that a write can be made (see :meth:`Storage.writable_ref`).

        Raises:
            RepositoryError: detached HEAD, a rebase (merge, ...) in progress,
                a read-only folder, or a git config that could not be written.
        """
        return self._store.writable_ref()

    def fresh(self) -> None:
        """Bring the catalog up to the branch tip now (reads do it when they need it)."""
        self._store.fresh()

    def get(self, id: str, *, as_of: datetime | str | None = None) -> Memory:
        """The memory with ``id``, or with the one id that starts or ends with ``id`` (6 characters or more, any
        case): its short form (:func:`memsite.short_id`, the end of its random part) is enough.

        ``as_of``: the memory as it was after the last commit before then
        (record time; see :meth:`recall`); its ``valid_until`` says whether it held then.

        Raises:
            NotFound: no memory has that id, saying when, by whom and in
                which commit it was forgotten or trimmed.
            InvalidInput: ``id`` is shorter than 6 characters, or more than
                one id starts or ends with it (naming them, with their abstracts).
            FormatError: the file of that id cannot be read (naming it).
            InvalidInput: ``as_of`` is not a time, in the future, or before the first commit.
        """
        at = self._moment(as_of)
        if at is None:
            return self._store.get(id)
        commit = self._store.commit_at(at)
        memory = None if commit is None else self._store.at_commit(commit, lambda past: lookup(past, id))
        if memory is None:
            now = self._store.get(id)  # NotFound when it never was (or is no longer)
            raise NotFound(f"memory {now.id} was not written yet at {format_time(at)}: it was created "
                           f"{format_time(now.created)}")
        return memory

    def list(self, category: str | None = None, agent: str | None = None) -> list[Memory]:
        """Memories, oldest first, optionally of one category (or alias) and/or agent.

        A file that cannot be read is left out with a warning (once); 'memsite check' names it.
        """
        return self._store.list(category, agent)

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
        supersedes: str | None = None,
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
            supersedes: the id (or a unique prefix) of the memory this one
                replaces: the same commit marks that one with ``valid_until``
                (now) and ``superseded_by``; it stays in its file, and recall
                leaves it out from then on. It may be of another category. No
                dedup then.

        Without ``supersedes``, a memory of the category that speaks of the
        same thing without saying the same (many content words in common, too
        few word pairs for a near-duplicate) is a possible contradiction. With
        a language model (``llm``, ``MEMSITE_LLM_*``) it is asked whether the
        new text adds, merges, supersedes or repeats, and that is done (the
        commit says which and why; a repeat is ``skipped``). Without one, or
        when its answer cannot be used, the memory is written as a new one,
        flagged (``contradicts`` in its frontmatter) for review: ``memsite
        check`` lists the flags, :meth:`supersede` confirms one, :meth:`dismiss`
        drops it.

        Returns:
            The stored Memory, with ``.id``, ``.path``, ``.commit`` and
            ``.action``: ``created``, ``merged`` (into an existing memory, which
            keeps its id) or ``skipped`` (an exact duplicate; nothing written).

        Raises:
            InvalidInput: empty, oversized or non-UTF-8 text, bad tags, unknown
                category; ``supersedes`` naming a memory superseded already
                (the message names the newest of its chain) or making a
                cycle; SecretFound for credentials. Nothing is written.
            NotFound: ``supersedes`` names no memory.
        """
        memory = self._store.new_memory(content, category, abstract, overview, tags, source, pinned)  # checked
        if supersedes is None:
            self._store.writable_ref()  # a write that cannot be made says so before anything is read or asked
            near = self._store.contradicted(memory)
            if near:
                return contradictions.write(self._store, memory, near, dedupe, self._judge())
        return self._store.add(memory, dedupe, supersedes)

    def _judge(self) -> Callable[[str], str] | None:
        """The language model that judges possible contradictions (see :func:`contradictions.judge`), asked for once."""
        if self._llm is None or self._llm is True:
            self._llm = contradictions.judge() or False
        return self._llm or None  # type: ignore[return-value]  # False: asked, none found

    def dismiss(self, id: str, of: str | None = None) -> Memory:
        """Say the memory ``id``, flagged as possibly contradicting ``of`` (every memory it was flagged
        against when None), contradicts nothing: both hold. One commit.

        Raises:
            NotFound: no memory has that id.
            InvalidInput: it carries no such flag.
        """
        return self._store.dismiss(id, of)

    def supersede(self, old: str, new: str, reason: str | None = None) -> tuple[Memory, Memory]:
        """Mark the memory ``old`` replaced by the memory ``new`` (both written already), in one commit.

        For a possible contradiction ``remember`` flagged, once a person or an
        agent confirms it. ``old`` gets ``valid_until`` (now) and
        ``superseded_by``; ``new`` gets ``supersedes``. Both keep their files.

        Args:
            old: the id (or a unique prefix) of the memory that stopped holding.
            new: the id (or a unique prefix) of the one that replaces it.
            reason: why, for the commit message.

        Returns:
            (old, new) as written, with their ``.commit``.

        Raises:
            NotFound: either id names no memory.
            InvalidInput: the same memory twice, ``old`` superseded already
                (naming the newest of its chain), ``new`` superseding another
                already, or a cycle. Nothing is written.
        """
        return self._store.supersede(old, new, reason)

    def chain(self, id: str, *, as_of: datetime | str | None = None) -> builtins.list[Memory]:
        """The memories that replaced one another, oldest first, that the memory ``id`` belongs to.

        ``[memory]`` for a memory that never replaced another nor was replaced.
        ``as_of``: the chain as the repository held it then (record time, see
        :meth:`get`): the memory as it was, and those it had replaced by then.

        Raises:
            NotFound: no memory has that id (or had it then).
            InvalidInput: ``as_of`` is not a time, in the future, or before the first commit.
        """
        if as_of is None:
            return chain(self._store.get(id), self._store.get)
        links = [self.get(id, as_of=as_of)]
        while links[0].supersedes:
            try:
                links.insert(0, self.get(links[0].supersedes, as_of=as_of))
            except (NotFound, FormatError):  # (forgotten since, or unreadable then: the chain starts here)
                break
        return links

    def update(self, id: str, /, **changes: Any) -> Memory:
        """Change fields of a memory in one commit; it keeps its id (or a unique prefix of it, as for :meth:`get`).

        Accepts ``content``, ``abstract``, ``overview``, ``tags``, ``source``,
        ``pinned`` and ``category`` (which moves the file). An abstract or
        overview of None is derived from the text again.

        Returns:
            The updated Memory with its new ``.commit`` (unchanged if nothing changed).

        Raises:
            NotFound: no memory has that id.
            InvalidInput: a field or value that is not allowed.
            SecretFound: the new text holds a credential.
        """
        return self._store.update(id, **changes)

    def forget(self, id: str, reason: str = "") -> str:
        """Delete a memory in one commit (it stays in history); returns the commit id.

        ``id`` may be a unique prefix of the id, as for :meth:`get`.
        """
        return self._store.forget(id, reason)

    def purge(self, *ids: str, reason: str, matching: str | None = None, remote: str | None = "origin",
              dry_run: bool = False) -> PurgeResult:
        """Erase memories from history: no commit of this clone or of ``remote`` holds their text afterwards.

        Unlike :meth:`forget`, which keeps the memory in history for review,
        this rewrites the history of every branch that holds it (every version of its
        file, its words in commit messages), keeping every other file, author and date;
        a tombstone commit says that something was purged, by whom, when and why, not what.
        The rewritten branches are pushed to ``remote`` with a lease; other clones follow
        on their next :meth:`sync`. See :mod:`memsite.features.purge`.

        Args:
            ids: memory ids (or unique prefixes), current or forgotten.
            reason: why (required; the tombstone says it).
            matching: purge every memory whose text, current or past, holds this string.
            remote: where to publish (None: this clone only).
            dry_run: list what would change (``result.plan``) and change nothing.

        Returns:
            A :class:`~memsite.features.purge.PurgeResult`.

        Raises:
            InvalidInput: no reason, or neither an id nor a pattern.
            NotFound: no memory ever had that id, or none held the pattern.
            RepositoryError: a detached HEAD or a rebase in progress; the remote moved
                or refused a force push (nothing changed in this clone).
        """
        return purge(self._store, ids, reason, matching=matching, remote=remote, dry_run=dry_run)

    def trim(self, category: str) -> builtins.list[str]:
        """Apply the category's capacity marks now; returns the ids trimmed."""
        return self._store.trim(category)

    def transaction(self, message: str | None = None) -> Transaction:
        """Group writes into one commit: ``with store.transaction("msg") as tx:``.

        The repository lock is held for the block. If the block raises, nothing
        is committed. After it, ``tx.commit`` is the commit id.
        """
        return self._store.transaction(message)

    def write(self, body: Callable[[Transaction], T], message: str | None = None) -> tuple[Transaction, T]:
        """Run ``body`` in a transaction of its own, again if the branch moved under it; (the transaction, its result).

        For writes that stage more than memories (world state, sessions):
        ``tx, _ = store.write(lambda tx: tx.write_text(path, text), "message")``.
        """
        return self._store.write(body, message)

    def flush_activity(self) -> str | None:
        """Commit the recall counts the journal holds; the last commit id, or None.

        Each agent's recalls go into a commit of their own, authored by that
        agent, whoever flushes. Also run when a task closes and when
        ``flush_every`` recalls wait.
        """
        return self._store.flush_activity()

    def rebuild_index(self) -> int:
        """Rebuild the catalog and full-text index from the files at the branch tip; returns the count.

        Works whatever state the catalog is in: a damaged one is set aside first.
        """
        return self._store.rebuild_index()

    def embed(self) -> int:
        """Embed the memories recall has no vectors for yet, and measure the relevance floor; returns how many have.

        What the first recall after many new memories (a bulk import, a fresh
        clone) does, done ahead of it. Vectors published in the repository
        (:meth:`publish_vectors`) are read rather than computed. 0 by words only (no embedder).
        """
        vectors = self._store.vectors
        if vectors is None:
            return 0

        def work() -> int:
            with self._store.repo.thread_lock:
                self._store.fresh()
                floor(self._store.catalog, vectors, self.config.embedding_floor)
                return vectors.size(self._store.catalog)

        return self._store.healing(work, reading=True)

    def publish_vectors(self) -> tuple[int, str | None]:
        """Publish the vectors of the memories the repository has none for yet, in one commit.

        They go under ``vectors/<model>/`` (outside the site), in a file only this clone writes,
        so merges never conflict on them; a fresh clone then reads them instead of embedding
        every memory (:meth:`embed`). Memories without vectors yet are embedded first. Every
        :meth:`sync` publishes, of the configured model, what this clone has embedded already.

        Returns:
            How many vectors were published, and the commit (None when there was nothing to publish
            or recall is by words only).
        """
        return self._store.publish_vectors()

    def heal(self, cause: object = "PRAGMA integrity_check failed") -> builtins.list[str]:
        """Set aside every damaged file in .memsite/ (one warning each) and open new ones; returns their names."""
        return self._store.heal(cause)

    # --- sharing ------------------------------------------------------------

    def sync(self, remote: str = "origin", branch: str | None = None) -> SyncResult:
        """Share this clone's memory through ``remote``: merge, publish, integrate.

        See :func:`memsite.features.sync.sync`."""
        return sync(self._store, remote, branch)

    def integrate(self, remote: str = "origin", branch: str = "main") -> IntegrateResult:
        """Merge every published agent branch into ``branch`` on ``remote``.

        See :func:`memsite.features.sync.integrate`."""
        return integrate(self._store, remote, branch)

    def publish_branch(self) -> str | None:
        """The branch :meth:`sync` publishes this agent's commits to (``sync.publish``: ``agent/<agent>``);
        None when agents publish none."""
        return publish_branch(self._store)

    def propose(self, remote: str = "origin", base: str = "main") -> tuple[str, str]:
        """Push this agent's review branch (``review/<agent>``) for a pull request into ``base``.

        The store writes to that branch from then on (as ``agent_branch=True``).

        Returns:
            (the branch pushed, the pull request's body: :meth:`diff` of it as Markdown).

        Raises:
            RepositoryError: the branch cannot be pushed.
            MemsiteError: the branch has no commit ``base`` lacks (nothing is pushed).
        """
        return propose(self._store, remote, base)

    # --- review and history ---------------------------------------------------

    def diff(self, base: str, head: str = "HEAD") -> Diff:
        """What changed in memory between the revisions ``base`` and ``head``: what a reviewer reads in a PR.

        Memories created, updated (what changed in text and fields), merged,
        superseded, forgotten and trimmed (with the reason), created then
        forgotten inside the range, world-state keys and sessions added.

        Returns:
            A :class:`Diff`: ``changes`` (highlights first), ``world``, ``sessions_added``; ``to_json()``.

        Raises:
            RepositoryError: a revision names no commit.
            FormatError: a changed memory file cannot be read (file, field, fix).
        """
        return compare(self.root, base, head)

    def reports(self, day: date | str | None = None, since: date | str | None = None,
                rev: str = "HEAD") -> builtins.list[DayReport]:
        """Daily reports from the history: sessions, created / merged / skipped / trimmed, highlights, per agent.

        Computed from the commits, so the same at every clone and at any revision.

        Args:
            day: the report of this day (a date, or ``2026-11-20``).
            since: one report per day with activity from this day on.
            rev: the history up to this revision.

        Returns:
            Reports, newest first; without ``day`` or ``since``, the latest day with activity only
            ([] when there is none). Each report's ``abstracts`` names what was created, while it is
            still in memory.

        Raises:
            InvalidInput: both ``day`` and ``since``, or a day that is not a date.
        """
        if day is not None and since is not None:
            raise InvalidInput("give day or since, not both")
        reports = history.daily(history.read(self.root, rev, self.config.content_dir), self.config.sessions_dir)
        if day is not None:
            reports = [r for r in reports if r.day == _day(day, "day")]
        elif since is not None:
            reports = [r for r in reports if r.day >= _day(since, "since")]
        else:
            reports = reports[:1]
        created = {mid for r in reports for mid in r.highlights}
        abstracts = {m.id: m.abstract for m in self.list() if m.id in created} if created else {}
        for r in reports:
            r.abstracts = {mid: abstracts[mid] for mid in r.highlights if mid in abstracts}
        return reports

    # --- recall -------------------------------------------------------------

    def recall(self, query: str, limit: int = 5, category: str | None = None, tags: Iterable[str] = (),
               agent: str | None = None, min_score: float = 0.0, *, since: datetime | str | None = None,
               until: datetime | str | None = None, ranking: str = "relevance", include_superseded: bool = False,
               as_of: datetime | str | None = None, record_time: bool = False) -> builtins.list[Hit]:
        """The memories that best match ``query``: relevance decides what is found, time orders what is close.

        See :mod:`memsite.features.retrieval` for the whole ranking.

        Args:
            query: any text; its words are searched (no query syntax to get wrong), and with an
                embedder its meaning. Only its first 4,096 characters are read.
            limit: at most this many hits.
            category: only this category (or alias).
            tags: only memories with every one of these tags.
            agent: only memories written by this agent.
            min_score: drop hits scoring below this.
            since: only memories written at or after this moment: a datetime, or text as git takes
                it (``2026-03-01``, ``2026-03-01T09:30Z``, ``"2 weeks ago"``, ``"yesterday"``).
            until: only memories written at or before this moment (a date alone: to its end).
            ranking: ``"relevance"`` (relevance x a bounded prior for age and recalls: a clearly
                more relevant memory is never placed below a fresher one) or ``"freshness"``
                (the seed's relevance x 2^(-age/half-life) x boost: the newest first among what
                was found).
            include_superseded: also memories that stopped holding (replaced by
                another: their ``superseded_by`` and ``valid_until`` say so).
            as_of: memory as it stood then (a datetime, or text as ``until``
                takes it; a date alone: its end): in valid time, the memories
                written by then that still held then, ranked as they would
                have been then. Counts no recall.
            record_time: with ``as_of``, what the memory held after the last
                commit before it instead (what the team believed then; by
                words, without an embedder's meaning).

        Returns:
            Hits, best first, each with its memory's dates (``hit.memory.created``, ``.updated``);
            each recalled memory's ``active_count`` is raised (journaled at once, committed in
            batches; see flush_activity).

        Raises:
            InvalidInput: an argument is malformed, ``since`` is after ``until`` or in the future;
                ``as_of`` in the future or before the first commit.
        """
        asked = retrieval.request(self._store, query, limit, category, tags, agent, min_score, since, until, ranking,
                                  include_superseded=include_superseded, as_of=as_of, record_time=record_time)
        hits = retrieval.recall(self._store, asked)
        waiting = self._store.note_recalls([h.memory.id for h in hits]) if hits and asked.as_of is None else None
        if waiting is not None:  # (None: the disk is full, and the recall was not counted)
            hits = [h.recalled(self.now()) for h in hits]
            if waiting >= self.config.flush_every and self.cannot_write() is None:
                self.flush_activity()
        return hits

    # --- the long-term memory interface for agents --------------------------

    def record(self, messages: Iterable[Mapping[str, Any]]) -> dict[str, int]:
        """Remember the user and assistant messages of a conversation, one memory each, one commit.

        Returns:
            How many were ``created``, ``merged`` into existing memories, or ``skipped``.
        """
        items = [text for role, text in message_texts(messages) if role in ("user", "assistant") and text.strip()]
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
        return ingest(self._store, messages, extractor, session_key, batch_size=batch_size, progress=progress)

    def incomplete_ingests(self) -> builtins.list[str]:
        """Session keys of ingests that were interrupted and left a checkpoint."""
        return incomplete(self._store)

    def resume(self, session_key: str, extractor: Extractor | None = None, *,
               progress: Callable[[str, int, int], None] | None = None) -> dict[str, int]:
        """Finish an interrupted :meth:`ingest`; returns its totals.

        ``extractor`` is needed only when the ingest stopped before its
        extractor answered.

        Raises:
            NotFound: no checkpoint for ``session_key``.
        """
        return resume(self._store, session_key, extractor, progress=progress)

    def skill_candidates(self, threshold: int = 5,
                         llm: Callable[[str], str] | None = None) -> builtins.list[SkillCandidate]:
        """Patterns recalled at least ``threshold`` times that could become agent skills, best first.

        With ``llm`` the pattern is analysed by it (confidence below 0.7: no
        candidate); without, steps come from the pattern's lists and triggers
        from its abstract and tags. :func:`memsite.render_skill` drafts the SKILL.md.
        """
        return candidates(self._store, threshold, llm)

    def draft_skills(self, folder: str | os.PathLike[str], threshold: int = 5,
                     llm: Callable[[str], str] | None = None) -> builtins.list[tuple[SkillCandidate, Path, str]]:
        """Write a SKILL.md draft for each of :meth:`skill_candidates` into ``folder/<name>/SKILL.md``.

        A draft a person edited is never written over.

        Returns:
            (candidate, its file, what happened) each: ``written`` (new), ``updated`` (memsite's earlier
            draft, unedited), ``unchanged``, or ``kept`` (edited by a person: left alone).
        """
        return write_drafts(self.skill_candidates(threshold, llm), Path(folder))

    def language_model(self) -> Callable[[str], str] | None:
        """The language model extraction and skills ask: the ``llm`` this store was given, else the
        OpenAI-compatible endpoint ``MEMSITE_LLM_*`` names; None when there is none (or ``llm=False``).

        Raises:
            ConfigError: ``MEMSITE_LLM_*`` holds something that cannot name an endpoint.
        """
        if callable(self._llm):
            return self._llm
        return None if self._llm is False else OpenAICompatible.from_env()

    def retrieve(self, query_or_messages: str | Iterable[Mapping[str, Any]], limit: int = 5) -> str:
        """Memories relevant to a query (or to the last user message) as text for a system prompt; '' if none."""
        if isinstance(query_or_messages, str):
            query = query_or_messages
        else:
            texts = message_texts(query_or_messages)
            users = [text for role, text in texts if role == "user"]
            query = users[-1] if users else (texts[-1][1] if texts else "")
        hits = self.recall(query, limit=limit)
        return f"Relevant memories (best first):\n{format_hits(hits)}" if hits else ""

    def tools(self) -> builtins.list[dict[str, Any]]:
        """The memory tools an LLM may call: name, description, JSON-Schema parameters each.

        For OpenAI-style APIs wrap each as ``{"type": "function", "function": tool}``.
        """
        return [dict(tool) for tool in TOOLS]

    def call_tool(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Run a tool from :meth:`tools`; returns text for the LLM (an error too, never an exception)."""
        return call_tool(self._store, self.recall, name, arguments)

    def migrate(self, progress: Callable[[int, int], None] | None = None) -> Migration:
        """Move memory files of an earlier layout (or a wrong month folder) to their month's numbered folders.

        One commit; see :func:`memsite.features.migrate.migrate`. ``.commit`` is None when nothing had to move.
        """
        return migrate(self._store, progress)

    def explain(self, query: str, limit: int = 5, category: str | None = None, tags: Iterable[str] = (),
                agent: str | None = None, min_score: float = 0.0, *, since: datetime | str | None = None,
                until: datetime | str | None = None, ranking: str = "relevance",
                include_superseded: bool = False) -> builtins.list[Hit]:
        """Why recall returns what it does for ``query``; raises no recall count.

        Takes the arguments of :meth:`recall`.

        Returns:
            The hits :meth:`recall` would return, then (with an embedder) up to
            ``limit`` memories the relevance floor left out, best first; each
            hit's ``why`` holds its signals (meaning, words), its places in the
            two lists, its relevance and the floor, and says whether it was kept;
            ``prior`` what its age and recalls take off.
        """
        asked = replace(retrieval.request(self._store, query, limit, category, tags, agent, min_score, since, until,
                                          ranking, include_superseded=include_superseded), explained=True)
        hits = retrieval.recall(self._store, asked)
        if self._store.vectors is None:
            return hits
        return [*hits, *retrieval.recall(self._store, asked, below=True)]

    def rank(self, limit: int | None = None, category: str | None = None, *,
             include_superseded: bool = False) -> builtins.list[Hit]:
        """Every memory (or one category's) still holding ranked by decay x boost: the site's ranking. Not a recall.

        ``include_superseded``: those replaced by another too.
        """
        return retrieval.rank(self._store, limit, category, include_superseded)

    def _moment(self, as_of: object) -> datetime | None:
        """The moment ``as_of`` names, checked (see :func:`memsite.features.asof.moment`); None for now."""
        return None if as_of is None else moment(as_of, self.now(), self._store.born())

    # --- core memory ----------------------------------------------------------

    def load_core(self, lines: int | None = None, *, as_of: datetime | str | None = None) -> str:
        """Prompt-ready core memory: world state, pinned memories, this agent's recent memories.

        Memories that stopped holding (superseded) are left out.

        Args:
            lines: the most lines to return (default: ``auto_load_lines`` from
                settings or ``MEMSITE_AUTO_LOAD_LINES``, 200).
            as_of: the core memory as it stood then (see :meth:`recall`): the
                memories written by then that held then, and the world state
                of the last commit before it.

        Returns:
            At most ``lines`` lines; '' for an empty repository. The recent
            memories section is left out when this agent has none.

        Raises:
            InvalidInput: ``as_of`` is not a time, in the future, or before the first commit.
        """
        limit = self.auto_load_lines if lines is None else lines
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidInput(f"lines: expected a whole number >= 0, got {limit!r}")
        at = self._moment(as_of)
        when = at or self.now()
        memories = [m for m in self.list() if m.valid_at(when) and (at is None or m.created <= at)]
        pinned = [m for m in memories if m.pinned]
        world = self.world.read(None if at is None else self._store.commit_at(at))
        text = core_text(world, pinned, recent_memories([m for m in memories if m.agent == self.agent], 10), self.agent)
        return first_lines(text, limit)

    def load_topic(self, category: str) -> str:
        """The full text of one category (name or alias), oldest first, without what stopped holding; '' if none."""
        now = self.now()
        return topic_text([m for m in self.list(category=category) if m.valid_at(now)])

    def recent(self, n: int = 10) -> builtins.list[str]:
        """The texts of this agent's ``n`` most recent memories still holding, oldest first (never empty ones)."""
        now = self.now()
        return recent_texts([m for m in self.list(agent=self.agent) if m.valid_at(now)], n)

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
        return start(self._store, type, keywords, plan)


def _day(value: date | str, name: str) -> date:
    """``value`` as a day: a date (a datetime's day) or ISO text (``2026-11-20``)."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise InvalidInput(f"{name}: expected a day as YYYY-MM-DD, got {value!r}") from None


def from_env(environ: Mapping[str, str] | None = None) -> MemoryStore | None:
    """The memory store the environment asks for, or None when memory is disabled.

    ``MEMSITE_ENABLED`` (default true) switches memory off with false/0/no/off;
    ``MEMSITE_DIR`` is the repository (default ``~/.memsite/memory``, created
    with ``memsite init`` if it is not one yet); ``MEMSITE_AUTO_LOAD_LINES``
    caps ``load_core``; ``MEMSITE_AGENT`` names the agent.

    Raises:
        ConfigError: a variable holds something it cannot mean.
    """
    environ = os.environ if environ is None else environ
    enabled = environ.get("MEMSITE_ENABLED", "").strip().lower()
    if enabled in FALSE:
        return None
    if enabled and enabled not in TRUE:
        raise ConfigError(f"MEMSITE_ENABLED: expected true or false, got {enabled!r}")
    path = Path(environ.get("MEMSITE_DIR") or DEFAULT_DIR).expanduser()
    agent = environ.get("MEMSITE_AGENT") or None
    if not (path / "mkdocs.yml").exists():
        store = MemoryStore.init(path, agent=agent)
    else:
        store = MemoryStore(path, agent=agent)
    store.auto_load_lines = auto_load_lines(environ, store.auto_load_lines)
    return store


def root_of(path: str | os.PathLike[str]) -> Path:
    """The top folder of the git working tree ``path`` is in, without opening a store.

    For memsite's own surfaces that work where no store opens (the site, ``doctor``).

    Raises:
        RepositoryError: ``path`` is not in a git working tree.
    """
    repo = Repository(path)
    try:
        return repo.root
    finally:
        repo.close()


MERGE_DRIVERS = tuple(driver.kind for driver in DRIVERS)
"""What ``memsite merge-driver KIND`` merges: the kinds of file memsite registers a git merge driver for."""


def merge_driver(kind: str, base: Path, ours: Path, theirs: Path, label: str = "") -> int:
    """What git runs to merge a file memsite registered a driver for: ``theirs`` into ``ours`` (in place),
    given ``base``, key by key; 0 when clean, 1 when conflict markers were written into ``ours``."""
    return merge_file(kind, base, ours, theirs, label)


def storage_of(store: MemoryStore) -> Storage:
    """The storage beneath ``store`` (its git repository, catalog, activity journal and vectors).

    For memsite's own surfaces and tests: it is not part of the public API and
    changes between versions without notice.
    """
    return store._store
