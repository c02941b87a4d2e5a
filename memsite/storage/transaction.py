"""Transaction: writes collected into one commit, with the policy applied on the way.

Dedup against the catalog and the writes staged so far, capacity trimming in
the commit that overflowed, a subject and trailers a reviewer can read. The
commit itself is built by :meth:`Repository.commit`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..foundation import inputs, likeness
from ..foundation.config import SEGMENT_FOLDER, Category, segment_name
from ..foundation.decay import TrimCandidate, plan_trim
from ..foundation.errors import FormatError, InvalidInput, MemsiteError, NotFound
from ..foundation.fileformat import decode, format_memory
from ..foundation.record import FIELD_ORDER, Memory, format_time, one_line, parse_time, slugify, truncate
from ..foundation.text import fingerprint, shared_needed, similarity, sketch
from ..git import Author, FilesAhead, Repository, blob_id
from . import chain, ids
from .catalog_rows import same_text

if TYPE_CHECKING:
    import threading
    from datetime import datetime

    from ..foundation.config import Config
    from .catalog import Catalog

log = logging.getLogger("memsite")
T = TypeVar("T")

# Once a transaction has staged this many memories, their files are written
# while it stages the rest, this many at a time (see _send_ahead).
AHEAD_BATCH = 100
# Dedup questions a transaction asks before it reads the catalog's sketch
# filter (reading it costs about as much as that many questions; see _seen_sketches).
SEEN_AFTER = 32
# A new memory is checked for possible contradictions against this many memories of its category created
# earlier in the same transaction (and the committed ones the full-text index finds).
RECENT = 50


@dataclass(frozen=True)
class _Op:
    action: str  # created | merged | updated | superseded | forgotten | trimmed | recalled | migrated
    memory: Memory
    reason: str | None = None


class Owner(Protocol):
    """What a transaction needs of the store that opens it (:class:`memsite.storage.Storage`)."""

    root: Path
    repo: Repository
    config: Config
    catalog: Catalog
    agent: str
    thread_state: threading.local
    commit_listeners: list[Callable[[str], None]]

    def now(self) -> datetime: ...
    def writable_ref(self) -> str: ...
    def healing(self, work: Callable[[], T]) -> T: ...
    def new_memory(self, content: Any, category: Any, abstract: Any, overview: Any, tags: Any, source: Any,
                   pinned: Any) -> Memory: ...
    def checked_fields(self, given: dict[str, Any], current: Memory | None) -> dict[str, Any]: ...
    def checked_reason(self, reason: Any) -> str: ...
    def not_found(self, id: object) -> NotFound: ...


class Transaction:
    """Writes collected into one commit; see :meth:`MemoryStore.transaction`."""

    def __init__(self, store: Owner, message: str | None) -> None:
        self.store = store
        self.message = None if message is None else one_line(inputs.text(message, "message", max_bytes=1024))
        self.commit: str | None = None
        self.ops: list[_Op] = []
        self.skipped: list[str] = []  # ids of existing memories that new ones duplicated exactly
        # What this transaction added, found the way the catalog finds what is committed:
        self._by_fingerprint: dict[tuple[str, str], str] = {}  # (category, fingerprint) -> id
        self._by_sketch: dict[tuple[str, int], set[str]] = {}  # (category, sketch value) -> ids
        self._created: dict[str, list[str]] = {}  # category -> ids created here, newest last (see _contradicted)
        self._dedup_queries = 0
        self._seen: bytes | None = None  # the catalog's sketch filter, once read (see _seen_sketches)
        self._files: dict[str, bytes | None] = {}
        self._pending: dict[str, Memory | None] = {}  # id -> new state (None: gone)
        self._committed: dict[str, Memory] = {}  # id -> the memory as the catalog has it (see _record)
        self._paths: dict[str, str] = {}  # id -> file path (relative) of pending memories
        self._moved: set[str] = set()  # ids of memories only moved to another file, bytes unchanged
        self._categories: set[str] = set()
        self._owned: dict[str, bytes] = {}
        self._files_ahead: FilesAhead | None = None  # its working-tree files, once written ahead
        self._unsent: list[str] = []  # ids staged since files were last sent ahead
        self._months: dict[tuple[str, datetime], str] = {}  # (category, created) -> month folder of new memories
        self._segments: dict[str, tuple[int, int]] = {}  # month folder -> (its last numbered folder, files in it)
        self.trailers: list[tuple[str, str]] = []  # more trailers for the commit (features add theirs)
        self.author: str | None = None  # the commit's author when not the store's agent (recalls of another agent)
        self._lock: Any = None
        self._open = False

    # --- the block ---------------------------------------------------------

    def __enter__(self) -> Transaction:
        store = self.store
        if getattr(store.thread_state, "tx", None) is not None:
            raise MemsiteError("a transaction is already open in this thread; write through it (tx.remember, ...)")
        self.ref = store.writable_ref()  # refused here, before any lock or file is taken
        self._lock = store.repo.locked()
        self._lock.__enter__()
        try:
            self.parent = store.repo.refs.read(self.ref)
            if self.parent is None:  # a branch named when the store opened, made now from HEAD
                self.parent = store.repo.refs.head_commit()
                if self.parent is not None:
                    ident = self._author().ident(int(store.now().timestamp()))
                    store.repo.refs.update(self.ref, self.parent, None, ident=ident,
                                           message=f"branch: created from HEAD by memsite ({store.agent})")
            self._base_tree = store.repo.root_tree(self.parent)
            store.healing(lambda: store.catalog.sync(store.repo, store.config, self.parent))
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        store.thread_state.tx = self
        self._open = True
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        made = None
        try:
            if kind is None:
                made = self._commit()
        finally:
            try:
                self._drop_ahead()
            finally:  # (a second Ctrl-C while the rows and files sent ahead are dropped) still unlocked
                self._open = False
                self.store.thread_state.tx = None
                self._lock.__exit__(None, None, None)
        if made is not None:
            self.store.repo.maintain(made)  # other writers commit meanwhile
            for listener in self.store.commit_listeners:
                listener(made)

    def _check_open(self) -> None:
        if not self._open:
            raise MemsiteError("the transaction is closed; open a new one with store.transaction()")

    # --- operations --------------------------------------------------------

    def remember(self, content: str, category: str = "general", abstract: str | None = None,
                 overview: str | None = None, tags: Iterable[str] = (), source: str | None = None,
                 pinned: bool = False, dedupe: bool | None = None, supersedes: str | None = None, *,
                 extra: Mapping[str, Any] | None = None) -> Memory:
        """As :meth:`MemoryStore.remember`, committed with the transaction.

        ``extra``: frontmatter fields of the integration that writes (written after memsite's own, sorted).
        """
        self._check_open()
        memory = self.store.new_memory(content, category, abstract, overview, tags, source, pinned)
        if extra:
            memory = memory.replace(extra=_extra(extra))
        return self.add(memory, self.store.config.dedupe if dedupe is None else dedupe, supersedes=supersedes,
                        flag=True)

    def supersede(self, old_id: str, new_id: str, *, reason: str | None = None) -> tuple[Memory, Memory]:
        """Mark the memory ``old_id`` replaced by ``new_id`` (both committed, or staged here); (old, new) as staged.

        The old memory gets ``valid_until`` (now) and ``superseded_by``, the
        new one ``supersedes``; both stay in their files. ``reason`` goes
        into the commit message.

        Raises:
            NotFound: either id names no memory.
            InvalidInput: see :func:`memsite.storage.chain.check`; nothing is staged.
        """
        self._check_open()
        old = chain.existing(self.get, old_id, "supersede")
        new = chain.existing(self.get, new_id, "supersede")
        chain.check(old, new, self.get, where="supersede")
        return self._supersede(old, new, reason)

    def _supersede(self, old: Memory, new: Memory, reason: str | None) -> tuple[Memory, Memory]:
        now = self.store.now()
        old = self._stage(old.replace(valid_until=now, superseded_by=new.id, updated=now), self._path_of(old))
        staged = _unflagged(new.replace(supersedes=old.id), old.id)  # a flag it confirms is settled
        if _last_action(self.ops, new.id) not in ("created", "merged", "updated"):  # an existing memory: changed now
            staged = staged.replace(updated=now)
            self.ops.append(_Op("updated", staged, f"supersedes {old.id}"))
        new = self._stage(staged, self._path_of(new))
        self.ops.append(_Op("superseded", old, f"by {new.id}" + (f": {one_line(reason)}" if reason else "")))
        return old, new

    def get(self, id: str) -> Memory:
        """The memory as this transaction would leave it."""
        if id in self._pending:
            memory = self._pending[id]
            if memory is None:
                raise NotFound(f"memory {id} was forgotten in this transaction")
            return memory
        memory = ids.lookup(self.store.catalog, id, live=False)  # a write starts from what is committed
        if isinstance(id, str):
            refuse_unreadable(self.store.catalog, memory.id if memory else id, memory)
        if memory is None:
            raise self.store.not_found(id)
        self._committed.setdefault(memory.id, memory)
        return memory

    def update(self, id: str, /, *, extra: Mapping[str, Any] | None = None, **changes: Any) -> Memory:
        """As :meth:`MemoryStore.update`, committed with the transaction.

        ``extra``: the frontmatter fields beyond memsite's own, all of them (None keeps them as they are).
        """
        self._check_open()
        current = self.get(id)
        changed = current.replace(**self.store.checked_fields(changes, current))
        if extra is not None:
            changed = changed.replace(extra=_extra(extra))
        if changed == current and changed.extra == current.extra:  # (Memory's == leaves extra out)
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

    def merge_into(self, target: str, memory: Memory, reason: str | None = None) -> Memory:
        """Merge the new ``memory`` into the memory ``target`` as dedup merges a near-duplicate (the fuller text,
        the union of tags); ``reason`` goes into the commit. Returns the merged memory."""
        self._check_open()
        existing = self.get(target)
        merged = self._stage(self._merged(existing, memory), self._path_of(existing))
        self._index(merged)
        self.ops.append(_Op("merged", merged, reason))
        return merged.replace(action="merged")

    def dismiss(self, id: str, of: str | None = None) -> Memory:
        """Drop the flag that the memory ``id`` may contradict ``of`` (every flag when None): both hold."""
        self._check_open()
        current = self.get(id)
        flags = current.extra.get("contradicts")
        if not isinstance(flags, list) or (of is not None and of not in flags):
            which = f" of {of}" if of is not None else ""
            raise InvalidInput(f"dismiss: memory {current.id} is not flagged as a possible contradiction{which}; "
                               "'memsite check' lists the flags")
        changed = _unflagged(current, of).replace(updated=self.store.now())
        changed = self._stage(changed, self._path_of(current))
        self.ops.append(_Op("updated", changed, f"dismissed: no contradiction of {of or ', '.join(flags)}"))
        return changed

    def forget(self, id: str, reason: str = "") -> Memory:
        """As :meth:`MemoryStore.forget`, committed with the transaction; returns what was forgotten."""
        self._check_open()
        current = self.get(id)
        self._files[self._path_of(current)] = None
        self._pending[current.id] = None
        self.ops.append(_Op("forgotten", current, self.store.checked_reason(reason) or None))
        return current

    def trim_category(self, name: str) -> None:
        """Apply the capacity marks of the category ``name`` when the transaction commits (see :meth:`Storage.trim`)."""
        self._check_open()
        self._categories.add(name)

    def relocate(self, path: str, to: str, data: bytes, memory: Memory, *, archived: bool = False) -> None:
        """Move the memory file ``path`` (holding ``data``, read as ``memory``) to ``to``, bytes unchanged.

        For ``memsite migrate``: the commit names it with ``Action: migrated``.

        Raises:
            MemsiteError: a file is at ``to`` already; nothing is staged.
        """
        self._check_open()
        if not self._free(to):
            raise MemsiteError(f"{to}: already exists, so {path} cannot move there; "
                               "ids are unique, so one of them was copied by hand")
        self._files[path] = None
        self._files[to] = data
        if not archived:
            self._pending[memory.id] = memory.replace(path=self.store.root / to)
            self._paths[memory.id] = to
            self._moved.add(memory.id)
        self.ops.append(_Op("migrated", memory))

    # --- other files (world state, sessions, notes) --------------------------

    def read_text(self, path: str) -> str | None:
        """The text of ``path`` as this transaction would leave it (None if absent)."""
        data = self.read_bytes(path)
        return None if data is None else decode(data, path)

    def read_bytes(self, path: str) -> bytes | None:
        """The bytes of ``path`` as this transaction would leave it (None if absent)."""
        return self._files[path] if path in self._files else self.store.repo.read_file(self.parent, path)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Stage ``data`` for ``path``, a file memsite derives (published vectors): no text inputs."""
        self._check_open()
        self._files[path] = data

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
        self._drop_ahead()
        self._unsent.clear()
        self._files.clear()
        self._pending.clear()
        self._committed.clear()
        self._paths.clear()
        self._moved.clear()
        self._owned.clear()
        self._categories.clear()
        self._segments.clear()
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
        return final.replace(commit=self.commit if self.commit else final.commit,
                             action=_last_action(self.ops, memory.id))

    # --- internals ---------------------------------------------------------

    def add(self, memory: Memory, dedupe: bool, *, supersedes: str | None = None,
            reason: str | None = None, flag: bool = False) -> Memory:
        """Stage the new ``memory`` (see :meth:`Storage.new_memory`), or recognise one already there (``dedupe``).

        ``supersedes``: the id of the memory it replaces, marked so in the same
        commit (no dedup then: the new text is meant to stand beside the old
        one); ``reason`` says why in the commit message. ``flag``: a new memory
        that may contradict memories of its category, committed or staged here,
        is flagged so (``contradicts``; see :mod:`memsite.foundation.likeness`).
        No language model is asked here: the transaction holds the repository
        lock, and every other writer would wait for its answers.

        Raises:
            NotFound, InvalidInput: ``supersedes`` names no memory, or one that
                cannot be superseded (see :func:`memsite.storage.chain.check`);
                nothing is staged.
        """
        self._check_open()
        if supersedes is not None:
            old = chain.existing(self.get, supersedes, "supersedes")
            chain.check(old, memory, self.get)
            created = self.add(memory, False)
            _, created = self._supersede(old, created, reason)
            return created.replace(action="created")
        if reason is not None:
            self.trailers.append(("Judged", reason))
        mark = fingerprint(memory.content)
        twin, exact = self._twin(memory, mark) if dedupe else (None, False)
        if twin is not None and self.store.catalog.problems_of(twin.id):
            twin, exact = None, False  # two files claim its id: it is changed by no one until that is fixed
        if twin is not None and exact:
            self.skipped.append(twin.id)
            return twin.replace(action="skipped")
        if twin is not None:
            merged = self._merged(twin, memory)
            self._stage(merged, self._path_of(twin))
            self._index(merged)
            self.ops.append(_Op("merged", merged))
            return merged.replace(action="merged")
        near = self._contradicted(memory) if flag and dedupe and not likeness.flagged(memory) else []
        if near:
            memory = memory.replace(extra={**memory.extra, likeness.FIELD: [m.id for m in near]})
        memory = self._stage(memory, self._allocate(memory))
        self._index(memory)
        self._created.setdefault(memory.category, []).append(memory.id)
        self._categories.add(memory.category)
        self.ops.append(_Op("created", memory))
        return memory.replace(action="created")

    def _contradicted(self, memory: Memory) -> list[Memory]:
        """The memories of ``memory``'s category, still holding as this transaction leaves them, that it may
        contradict: the best word matches committed, and the last ``RECENT`` created here (a bound that
        keeps a bulk write linear)."""
        fts_query = likeness.query(memory.content)
        if fts_query is None:
            return []
        found = self.store.catalog.best_matches(fts_query, memory.category, self.store.now(), likeness.SHOWN)
        near = {m.id: self._pending.get(m.id, m) for m in found}
        near.update((i, self._pending.get(i)) for i in self._created.get(memory.category, [])[-RECENT:])
        holding = [m for m in near.values() if m is not None and m.valid_until is None]
        return likeness.candidates(memory.content, holding, self.store.config.dedupe_threshold)[:likeness.SHOWN]

    def _index(self, memory: Memory) -> None:
        self._by_fingerprint[(memory.category, fingerprint(memory.content))] = memory.id
        for value in sketch(memory.content):
            self._by_sketch.setdefault((memory.category, value), set()).add(memory.id)

    def _twin(self, memory: Memory, mark: str) -> tuple[Memory | None, bool]:
        """An existing memory of the same category saying the same thing, and whether exactly."""
        catalog, category = self.store.catalog, memory.category
        marks = sketch(memory.content)
        shared = shared_needed(marks)
        staged = self._by_fingerprint.get((category, mark))
        near: list[tuple[str, str]] | None = None  # what the catalog finds sharing the sketch
        if staged:
            exact = self._pending.get(staged)
        else:
            exact, near = catalog.dedup_candidates(category, mark, marks, shared, seen=self._seen_sketches())
        if exact is not None and exact.id in self._pending:
            exact = self._pending[exact.id]  # as this transaction has it (None: forgotten here)
        if exact is not None and fingerprint(exact.content) == mark and exact.valid_until is None:
            return exact, True
        if near is None:
            near = catalog.dedup_candidates(category, None, marks, shared, seen=self._seen_sketches())[1]
        counts: dict[str, int] = {}
        for h in marks:
            for i in self._by_sketch.get((category, h), ()):
                counts[i] = counts.get(i, 0) + 1
        texts = {i: m.content for i, n in counts.items()
                 if n >= shared and (m := self._pending.get(i)) is not None and m.valid_until is None}
        for mid, content in near:
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

    def _seen_sketches(self) -> bytes | None:
        """The catalog's sketch filter, read once this transaction has asked enough dedup questions for it to pay.

        Read once: the transaction holds the repository lock, so the catalog
        changes meanwhile only when another process catches it up with a
        commit made by hand, which this transaction's commit cannot follow.
        """
        self._dedup_queries += 1
        if self._seen is None and self._dedup_queries == SEEN_AFTER:
            self._seen = self.store.catalog.seen_sketches()
        return self._seen

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

    def record_activity(self, batch: str, counts: Mapping[str, tuple[int, str]], agent: str = "") -> None:
        """Stage the recall counts of a journal batch, recalled by ``agent`` (see MemoryStore.flush_activity)."""
        self.author = agent or None
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
        self._moved.discard(memory.id)
        self._files[path] = format_memory(memory).encode("utf-8")
        self._unsent.append(memory.id)
        if len(self._unsent) >= AHEAD_BATCH:
            self._send_ahead()
        return memory

    def _send_ahead(self) -> None:
        """Have the files of the memories staged since last time written, while the rest is staged.

        The commit uses a file written ahead only if its bytes are still the
        ones staged (see FilesAhead).
        """
        paths = [self._paths[mid] for mid in dict.fromkeys(self._unsent)
                 if self._pending.get(mid) is not None and mid not in self._moved]
        self._unsent.clear()
        if self._files_ahead is None:
            repo = self.store.repo
            if repo.refs.head_target() != self.ref:  # (a branch not checked out has no files to write)
                return
            self._files_ahead = repo.files_ahead()
        self._files_ahead.add((path, self._files[path]) for path in paths)  # type: ignore[misc]  # paths written, not removed

    def _drop_ahead(self) -> None:
        """Remove the files written ahead of a commit that is not made, and those it did not use."""
        files, self._files_ahead = self._files_ahead, None
        if files is not None:
            files.discard()

    def _path_of(self, memory: Memory) -> str:
        """The file of ``memory`` relative to the repository root."""
        path = self._paths.get(memory.id)
        if path is None:
            assert memory.path is not None
            path = str(memory.path)[len(str(self.store.root)) + 1 :]
        return path

    def _allocate(self, memory: Memory) -> str:
        """A new file path: ``memories/<category>/<YYYY-MM>/<NNN>/<slug>-<id tail>.md``, longer tail on a clash.

        The month is the one it was created in, so a memory that changes
        category keeps its month and no write ever moves a file between
        months; the numbered folder is the month's last one with room (see
        :meth:`segment`).
        """
        folder = self._months.get((memory.category, memory.created))
        if folder is None:  # (memories staged together mostly share their second)
            config = self.store.config
            folder = self._months[(memory.category, memory.created)] = config.memory_folder(
                config.category(memory.category), memory.created)
        folder = self.segment(folder)
        slug = slugify(memory.abstract)
        for tail in (memory.id[-6:], memory.id):
            path = f"{folder}/{slug}-{tail.lower()}.md"
            if self._free(path):
                return path
        raise MemsiteError(f"{path}: already exists; ids are unique, so this file was copied by hand")

    def segment(self, month_folder: str) -> str:
        """The numbered folder of ``month_folder`` a new file goes in, counted there: ``<month_folder>/<NNN>``.

        Like log segments: the highest-numbered folder of the month, unless
        it holds ``segment_size`` files (at the base commit, with those this
        transaction put there), then the next one. A path is chosen once and
        never changes, so a folder never holds many more than
        ``segment_size`` files: a merge of clones that filled the same
        folder at once may leave more, and the next write opens a new one.
        """
        slot = self._segments.get(month_folder)
        number, count = slot if slot is not None else self._last_segment(month_folder)
        if count >= self.store.config.segment_size:
            number, count = number + 1, 0
        self._segments[month_folder] = (number, count + 1)
        return f"{month_folder}/{segment_name(number)}"

    def _last_segment(self, month_folder: str) -> tuple[int, int]:
        """(number, files) of the highest-numbered folder of ``month_folder`` at the base commit; (1, 0) if none."""
        objects = self.store.repo.objects
        month = objects.tree_at(self._base_tree, month_folder)
        numbered = [(int(name), name) for name, entry in (month.items_from("0", ":") if month else ())
                    if entry.is_tree and SEGMENT_FOLDER.fullmatch(name)]
        if not numbered:
            return 1, 0
        number, name = max(numbered)
        last = objects.tree_at(self._base_tree, f"{month_folder}/{name}")
        return number, len(last) if last is not None else 0

    def _free(self, path: str) -> bool:
        """Nothing is at ``path``: neither staged in this transaction nor at the base commit."""
        return path not in self._files and self.store.repo.objects.lookup(self._base_tree, path) is None

    def _trim(self) -> None:
        store = self.store
        now = store.now()
        for name in sorted(self._categories):
            category = store.config.category(name)
            if not category.capacity.bounded:
                continue
            members = {c.id: c for c in store.catalog.trim_candidates(name, format_time(now))}
            for mid, memory in self._pending.items():
                members.pop(mid, None)
                if memory is not None and memory.category == name and memory.valid_at(now):
                    members[mid] = TrimCandidate(memory.id, memory.created, memory.active_count, memory.pinned,
                                                 memory.lines)
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
                    archived = memory.replace(extra={**memory.extra, "archived": format_time(now),
                                                     "archive_reason": reason})
                    folder = self.segment(store.config.memory_folder(category, memory.created, archived=True))
                    self._files[f"{folder}/{Path(path).name}"] = format_memory(archived).encode("utf-8")
                self.ops.append(_Op("trimmed", memory, reason))

    def _commit(self) -> str | None:
        """Make the commit (under the write lock); its id, None when there was nothing to commit."""
        store = self.store
        self._trim()
        if not self._files:
            return None
        return store.repo.commit(
            self.ref, self.parent, self._files,
            message=self._message(), author=self._author(),
            when=int(store.now().timestamp()), owned=self._owned, record=self._record, ahead=self._files_ahead,
        )

    def _author(self) -> Author:
        name = self.author or self.store.agent
        return Author.writer(name)

    def _record(self) -> Callable[[str | None], None]:
        """Start recording this transaction's memories in the catalog while the commit is made.

        See Repository.commit."""
        upserts, moves, rewrites = [], [], []
        for mid, memory in self._pending.items():
            if memory is not None:
                path = self._path_of(memory)
                if mid in self._moved:  # same text: the catalog changes its path alone
                    moves.append((mid, path))
                    continue
                blob = blob_id(self._files[path] or b"").hex()
                before = self._committed.get(mid)
                if before is not None and before.path == memory.path and same_text(before, memory):
                    rewrites.append((before, memory, blob))  # its row changes in place (a superseded one, say)
                else:
                    upserts.append((memory, path, blob))
        deletes = [mid for mid, memory in self._pending.items() if memory is None]
        created = {op.memory.id for op in self.ops if op.action == "created"}  # (no row has their id or path)
        settle = self.store.catalog.record(upserts, deletes, moves, created, rewrites)

        def landed(sha: str | None) -> None:
            if sha is not None:
                self.commit = sha  # result() gives each memory this commit
            settle(sha)

        return landed

    def _message(self) -> str:
        main = [op for op in self.ops if op.action != "trimmed"]
        trims = [op for op in self.ops if op.action == "trimmed"]
        superseded = [op for op in main if op.action == "superseded"]
        if self.message:
            subject = self.message
        elif len(superseded) == 1 and len(main) <= 2:
            op = superseded[0]
            new = self._pending.get(op.memory.superseded_by or "")
            subject = f"Supersede {op.memory.category}: {new.abstract if new else op.memory.abstract}"
        elif len(main) == 1:
            op = main[0]
            verb = {"created": "Remember", "updated": "Update", "forgotten": "Forget", "merged": "Merge into",
                    "recalled": "Recall", "superseded": "Supersede"}[op.action]
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
            elif op.action == "superseded":
                lines.append(f"Superseded {op.memory.id} ({truncate(op.memory.abstract, 60)}) {op.reason}.")
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


def refuse_unreadable(catalog: Catalog, mid: str, memory: Memory | None) -> None:
    """Refuse to change a memory whose file cannot be read, or whose id another file claims too.

    Raises:
        FormatError: naming every file involved and the fix.
    """
    problems = catalog.problems_of(mid)
    if not problems:
        return
    copies = [path for path, duplicate, _ in problems if duplicate]
    if memory is not None and copies:
        kept = str(memory.path)[len(str(catalog.root)) + 1 :]
        raise FormatError(f"memory {mid} is in {len(copies) + 1} files: {kept} and {', '.join(copies)}; "
                          "give one of them a new id (or git rm the copy), then retry")
    path, _, message = problems[0]
    raise FormatError(f"memory {mid}: its file {path} cannot be read: {message.removeprefix(path + ': ')}")


def _extra(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Frontmatter fields of an integration, checked: none of memsite's own names."""
    taken = sorted(set(fields) & set(FIELD_ORDER))
    if taken:
        raise InvalidInput(f"extra: {', '.join(taken)} are memsite's own fields; "
                           "name the integration's fields otherwise")
    return dict(fields)


def _unflagged(memory: Memory, of: str | None) -> Memory:
    """``memory`` without the flag that it may contradict ``of`` (every flag when None)."""
    flags = memory.extra.get("contradicts")
    if not isinstance(flags, list):
        return memory
    kept = [mid for mid in flags if of is not None and mid != of]
    extra = {k: v for k, v in memory.extra.items() if k != "contradicts"}
    return memory.replace(extra={**extra, "contradicts": kept} if kept else extra)


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
