"""Sharing one memory through an ordinary git remote: publish, integrate, queue.

A team's clones share one remote. :func:`sync` publishes this clone's commits
to a branch only this agent pushes (``agent/<name>``), which never loses a
race, and integrates them into the shared branch (``main``) as a plain
fast-forward push, tried again with exponential backoff and jitter while other
clones push first (for up to ``RACE_SECONDS``). While the merge queue runs
(:func:`integrate`, which any clone or a CI job runs, merging every published
agent branch into the shared branch in one commit, pushed once), a sync that
lost the race succeeds at once: its commits are published and queued.

Nothing is force-pushed and no local commit is dropped or rewritten: what the
remote has is merged in with memsite's merge drivers (world state key by key,
recall counts adding up), computed by ``git merge-tree`` outside any lock;
only moving the local branch to the merge takes the repository lock, for a
few milliseconds, so the agent's own writes go on while a sync waits for the
network. One sync or integrate runs at a time in a clone.

A sync also publishes the vectors its clone has embedded for recall by
meaning and the repository lacks (:func:`publish_vectors`), so that a clone
made later reads them rather than embedding every memory.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

from ..foundation.errors import ConflictError, MemsiteError, RepositoryError
from ..git import Author, RefMoved
from ..git.mutex import LockTimeout, ProcessLock
from ..git.remote import (
    Busy,
    Pushed,
    Remote,
    TreeMerge,
    ahead_behind,
    count,
    is_ancestor,
    merge_base,
    merge_trees,
    trailers,
)
from ..storage import Storage
from ..storage.vectors import model_name
from . import world
from .embedders import by_name, normal
from .following import follow, unfollowed

log = logging.getLogger("memsite")
T = TypeVar("T")

BACKOFF_SECONDS = 0.05  # the first wait before trying the shared branch again; doubled each time, with full jitter
BACKOFF_CAP_SECONDS = 2.0
RACE_SECONDS = 60.0  # how long a sync keeps trying the shared branch while other clones push first (no queue runs)
INTEGRATE_ATTEMPTS = 12  # an integrator keeps at it longer than an agent's sync: it is the queue
BUSY_ATTEMPTS = 5  # tries of a fetch or push while another git command in this clone holds a ref
SYNC_LOCK_SECONDS = 600.0  # how long a sync waits for another one of this clone (a slow network) to end
QUEUE_RUNNING_SECONDS = 120.0  # a merge of the queue this recent on the shared branch: the queue is running
INTEGRATE_SUBJECT = "Integrate agent branches: "  # the first line of the merge queue's commits
PUBLISH_AT_LEAST = 32  # vectors waiting before a sync publishes them (a fresh clone embeds fewer in a blink)
PUBLISH_OTHERS_AFTER = timedelta(hours=1)  # another agent's memory: published by this clone only once this old

INTEGRATED, QUEUED, UP_TO_DATE = "integrated", "queued", "up to date"


@dataclass(frozen=True)
class SyncResult:
    """What a sync did."""

    remote: str
    branch: str  # the shared branch
    status: str  # 'integrated' (on the shared branch), 'queued' (published, waiting for integrate) or 'up to date'
    fetched: int  # commits taken from the remote
    pushed: int  # local commits the shared branch did not have
    attempts: int
    published: str | None = None  # the agent branch the commits were published to
    created: bool = False  # the shared branch was not on the remote: the push created it
    restored: int = 0  # commits the remote had lost (a force-push) that this sync published again
    note: str = ""  # why the commits are queued rather than integrated


@dataclass(frozen=True)
class IntegrateResult:
    """What one run of the merge queue did."""

    remote: str
    branch: str
    merged: tuple[str, ...]  # the agent branches merged into the shared branch
    left_out: tuple[tuple[str, str], ...]  # (agent branch, why): conflicts only a person can resolve
    commit: str | None  # the commit the shared branch moved to; None when there was nothing to merge
    attempts: int


def publish_branch(store: Storage) -> str | None:
    """The branch this store's agent publishes to (``sync.publish``), or None when agents publish none."""
    pattern = store.config.sync_publish
    return pattern.format(agent=store.agent) if pattern else None


def sync(store: Storage, remote: str = "origin", branch: str | None = None, *,
         attempts: int | None = None) -> SyncResult:
    """Merge the remote's shared branch into this clone's, publish this clone's commits and integrate them.

    Args:
        remote: the git remote to share through.
        branch: the shared branch on the remote (default: the store's branch's name).
        attempts: how many times to try the shared branch while it keeps moving (``sync.attempts``;
            default: once while the merge queue runs, otherwise for up to ``RACE_SECONDS``).

    Returns:
        A :class:`SyncResult`; ``status`` is ``queued`` when the commits are
        published on the agent branch but left for ``integrate`` to merge:
        the merge queue is running, the shared branch refuses pushes (a
        protected branch), or it kept moving through every attempt.

    Raises:
        ConflictError: the shared branch changed the same world-state key or
            memory text differently; nothing merged (the commits are
            published on the agent branch all the same).
        RepositoryError: no such remote, the remote cannot be reached, or it refused the push.
    """
    ref = store.writable_ref()
    _ready(store, ref)
    shared = branch or ref.removeprefix("refs/heads/")
    publish = publish_branch(store)
    if publish == shared or ref == f"refs/heads/{review_branch(store)}":
        publish = None  # (pushing the branch is all there is; a branch for review never goes to the merge queue)
    origin = Remote(store.root, remote)
    tries = attempts if attempts is not None else store.config.sync_attempts
    if tries is not None and tries < 1:
        raise RepositoryError(f"sync: attempts must be 1 or more, got {tries}")
    refs = store.repo.refs
    with _one_at_a_time(store):
        publish_vectors(store)
        restored = fetched = 0
        own_moved = False  # the agent branch holds commits this clone lacks (the same agent on another machine)
        note = ""
        started = time.monotonic()
        for attempt in itertools.count(1):
            began = time.monotonic()
            seen = unfollowed(store) or refs.read(origin.tracking(shared))
            missing = _fetch(origin, [shared, *([publish] if publish and own_moved else [])])
            theirs = None if shared in missing else refs.read(origin.tracking(shared))
            if seen and theirs and not _moved_on_from(store, seen, theirs) \
                    and follow(store, ref, seen, theirs, remote) is None:  # (a purge elsewhere rewrote it)
                gone = count(store.root, seen, [theirs])
                if gone > restored:
                    restored = gone
                    log.warning("%s/%s was rewound (a force-push?): %d commit(s) this clone had seen there are gone; "
                                "publishing them again (forget a memory instead of rewinding the branch)",
                                remote, shared, gone)
            if own_moved and publish is not None and publish not in missing:
                _take_in(store, ref, refs.read(origin.tracking(publish)), f"{remote}/{publish}")
            brought, mine, pushed = _take_in(store, ref, theirs, f"{remote}/{shared}", publish=publish, origin=origin)
            fetched += brought
            if mine is None or mine == theirs:
                return SyncResult(remote, shared, UP_TO_DATE, fetched, 0, attempt, publish, restored=restored)
            # Left to the merge queue: only the agent branch is pushed.
            queued = publish if publish is not None and _leave_to_queue(store, theirs) else None
            if tries is None and attempt == 1 and publish is not None and _queue_seen(store, theirs):
                tries = 1  # a merge queue runs: a sync that lost the race is queued, as it has always been
            updates = {queued: mine} if queued else {shared: mine, **({publish: mine} if publish else {})}
            outcome = _push(origin, updates)
            if publish and not queued and not outcome[publish].ok and not outcome[publish].rejected \
                    and not outcome[shared].ok:
                # A hook refused the whole push for the shared branch's sake (protected): publish alone.
                outcome[publish] = _push(origin, {publish: mine})[publish]
            if publish and not outcome[publish].ok:
                if not outcome[publish].rejected:
                    raise RepositoryError(f"{remote} refused {publish}: {outcome[publish].reason}; nothing was "
                                          "published (the commits stay in this clone)")
                own_moved = True
            if queued:
                if outcome[queued].ok:
                    return SyncResult(remote, shared, QUEUED, fetched, pushed, attempt, publish, restored=restored,
                                      note="the merge queue is running" if store.config.sync_integrate == "auto"
                                      else "sync.integrate: queue")
                note = f"{remote}/{publish} kept moving (this agent publishes from another clone too)"
                if _last(attempt, tries, started):
                    break
                _backoff(attempt, time.monotonic() - began)
                continue
            result = outcome[shared]
            if result.ok:
                return SyncResult(remote, shared, INTEGRATED, fetched, pushed, attempt, publish,
                                  created=theirs is None, restored=restored)
            if not result.rejected:  # refused by the remote itself: a protected branch, a hook
                if publish and outcome[publish].ok:
                    note = f"{remote} refused {shared}: {result.reason}"
                    break
                raise RepositoryError(f"{remote} refused the push to {shared}: {result.reason}; "
                                      "nothing was lost (the commits stay in this clone)")
            note = f"{remote}/{shared} kept moving"
            if _last(attempt, tries, started):
                break
            _backoff(attempt, time.monotonic() - began)
        if publish and outcome[publish].ok:
            return SyncResult(remote, shared, QUEUED, fetched, pushed, attempt, publish, restored=restored,
                              note=note)
        hint = "" if publish else " (or publish agent branches: sync.publish in mkdocs.yml)"
        raise RepositoryError(f"{note}: the push was rejected {attempt} times; nothing was lost; sync again{hint}")


def publish_vectors(store: Storage) -> int:
    """Publish with the repository the vectors this clone has embedded already and the repository lacks, once
    ``PUBLISH_AT_LEAST`` are waiting, in a commit the sync then shares: a fresh clone reads them rather than
    embedding every memory. Only the configured model's (``embedding.model``) are published, and nothing is
    embedded here; another agent's memory only when it is ``PUBLISH_OTHERS_AFTER`` old (its writer publishes
    it first; twelve clones syncing at once published each memory five times over); how many were published.
    """
    vectors = store.vectors
    if vectors is None or vectors.model != configured_model(store):
        return 0
    try:
        return store.publish_vectors(PUBLISH_AT_LEAST, embed=False, others_after=PUBLISH_OTHERS_AFTER)[0]
    except MemsiteError as exc:  # (the sync goes on: a fresh clone embeds what is not published)
        log.warning("vectors not published: %s", exc)
        return 0


def configured_model(store: Storage) -> str | None:
    """The name of the model the repository's settings choose (``embedding.model``; ``auto`` is memsite's own
    minilm, whatever this machine has installed), None when it is words only or not installed here."""
    name = store.config.embedding_model or "none"
    try:
        chosen = by_name(normal("minilm" if name == "auto" else name), "embedding.model")
    except MemsiteError:
        return None
    return None if chosen is None else model_name(chosen)


def integrate(store: Storage, remote: str = "origin", branch: str = "main", *,
              pattern: str | None = None, attempts: int = INTEGRATE_ATTEMPTS) -> IntegrateResult:
    """Merge every published agent branch into the shared branch, in one commit, pushed once: a merge queue.

    Safe beside agents' syncs and other integrators (in other clones or CI):
    a push that lost the race is tried again from a new fetch, and a branch
    already merged is not merged again. An agent branch whose merge leaves a
    conflict the merge drivers cannot resolve is left out and named; the
    others are merged. Neither the working tree nor a local branch is touched.

    Raises:
        RepositoryError: no such remote or shared branch, the remote cannot
            be reached or refused the push, or it kept moving.
    """
    pattern = pattern or (store.config.sync_publish.format(agent="*") if store.config.sync_publish else "agent/*")
    origin = Remote(store.root, remote)
    author = Author.writer(store.agent)
    with _one_at_a_time(store):
        chain: _Chain | None = None
        for attempt in range(1, attempts + 1):
            # The agent branches are fetched once; a push that lost the race fetches the shared branch alone
            # and merges what it gained into the merges already made, so each new try is quick.
            if branch in _fetch(origin, [branch], [pattern] if chain is None else []):
                raise RepositoryError(f"{remote} has no branch {branch} to integrate into; sync from a clone first")
            base = store.repo.refs.read(origin.tracking(branch))
            assert base is not None
            waiting = dict(sorted((name, sha) for name, sha in origin.unmerged(pattern, base).items()
                                  if name != branch))
            if chain is None or not chain.rebase(base, waiting) or not chain.merged:
                chain = _Chain(store, base, waiting, author)
            for name, why in chain.left_out if attempt == 1 else ():
                log.warning("%s left out of this integration: %s", name, why)
            if not chain.merged:
                return IntegrateResult(remote, branch, (), tuple(chain.left_out), None, attempt)
            commit = chain.commit()
            result = _push(origin, {branch: commit})[branch]
            if result.ok:
                return IntegrateResult(remote, branch, tuple(chain.merged), tuple(chain.left_out), commit, attempt)
            if not result.rejected:
                raise RepositoryError(f"{remote} refused the push to {branch}: {result.reason}")
            if attempt < attempts:
                _backoff(attempt)
        raise RepositoryError(f"{remote}/{branch} kept moving: the integration was rejected {attempts} times; "
                              "nothing was lost; run it again")


class _Chain:
    """The agent branches waiting to be integrated, merged one after another onto the shared branch's tip."""

    def __init__(self, store: Storage, base: str, waiting: dict[str, str], author: Author) -> None:
        self.store, self.base, self.author = store, base, author
        self.merged: dict[str, str] = {}
        self.left_out: list[tuple[str, str]] = []
        self.settled: list[str] = []  # world keys set two ways, and which value was kept
        self.current = base  # a commit whose tree is every merge so far
        for name, sha in waiting.items():
            outcome, settled = _merge(store, self.current, sha)
            if outcome.tree is None:
                self.left_out.append((name, _conflict(outcome)))
                continue
            self.merged[name] = sha
            self.settled += settled
            self.current = _commit(store, outcome.tree, [self.current, sha], f"Integrate {name}", author)

    def rebase(self, base: str, waiting: dict[str, str]) -> bool:
        """Carry the merges onto a shared branch that moved to ``base``; False when they must be made again
        (what was pushed there conflicts with them).

        An agent branch that moved on meanwhile keeps the commit merged here
        (its newer ones wait for the next run); one that ``base`` holds now
        (its agent's sync got there first) is no longer a parent of its own.
        """
        if base == self.base:
            return True
        outcome, settled = _merge(self.store, self.current, base)
        if outcome.tree is None:
            return False
        self.settled += settled
        self.current = _commit(self.store, outcome.tree, [base, self.current], "Integrate", self.author)
        self.base = base
        self.merged = {name: sha for name, sha in self.merged.items()
                       if waiting.get(name) == sha or (name in waiting and not is_ancestor(self.store.root, sha, base))}
        return True

    def commit(self) -> str:
        """One commit: the shared branch and every merged agent branch as its parents.

        Never a fast-forward, even for one branch: the shared branch's
        newest commit then tells agents' syncs the queue is running.
        """
        lines = [INTEGRATE_SUBJECT + ", ".join(self.merged), ""]
        lines += [f"Integrated: {name} {sha}" for name, sha in self.merged.items()]
        lines += [f"Left-Out: {name} ({why})" for name, why in self.left_out]
        lines += [f"{world.CONFLICT_TRAILER}: {line}" for line in dict.fromkeys(self.settled)]
        return _commit(self.store, self.store.repo.root_tree(self.current), [self.base, *self.merged.values()],
                       "\n".join(lines), self.author)


def _take_in(store: Storage, ref: str, theirs: str | None, label: str, *, publish: str | None = None,
             origin: Remote | None = None) -> tuple[int, str | None, int]:
    """Merge ``theirs`` into the store's branch ``ref``.

    The merge is computed without the lock; the branch moves under it, and
    the merge is made again if a write landed meanwhile.

    Returns:
        (commits it brought, the branch's commit now, commits the branch has that ``theirs`` lacks).
    """
    root, repo = store.root, store.repo
    while True:
        mine = repo.refs.read(ref)
        if theirs is None or mine == theirs:
            return 0, mine, 0 if mine is None or theirs is not None else count(root, mine)
        ahead, behind = ahead_behind(root, mine, theirs) if mine is not None else (0, 1)
        if not behind:
            return 0, mine, ahead
        tree: bytes | None = None  # a fast-forward
        settled: list[str] = []
        if ahead and mine is not None:  # (nothing is ahead without a branch of one's own)
            outcome, settled = _merge(store, mine, theirs)
            if outcome.tree is None:
                published = ""
                if publish and origin is not None:  # the agent's work is safe on the remote all the same
                    if _push(origin, {publish: mine})[publish].ok:
                        published = f"; this clone's commits are published on {publish}"
                raise ConflictError(f"merging {label} left conflicts in {_conflict(outcome)}: both sides changed "
                                    f"the same key or text differently; nothing was merged{published}. Merge by hand "
                                    f"(git merge {label}), resolve, commit, then sync again")
            tree = outcome.tree
        with repo.locked():
            if repo.refs.read(ref) != mine:
                continue  # a write landed while the merge was computed
            try:
                now = repo.merge(ref, mine, theirs, tree, message=_with_trailers(f"Sync memory with {label}", settled),
                                 author=Author.writer(store.agent), when=int(store.now().timestamp()))
            except RefMoved:
                continue
        return behind, now, ahead + (tree is not None)


def _merge(store: Storage, ours: str, theirs: str) -> tuple[TreeMerge, list[str]]:
    """Merge two commits; a world key both sides set differently keeps the value written last.

    git's merge (with memsite's drivers) leaves such a key in conflict; when
    it is the only conflict, each side's value is dated by the newest commit
    of that side that set or removed the key (since the merge base), and
    the later one is kept (a tie: the agent name that sorts last). Both
    clones that merge the same two sides keep the same value.

    Returns:
        (the merge, a ``World-Conflict`` trailer value per key settled: what was kept over what).
    """
    outcome = merge_trees(store.root, ours, theirs)
    path = store.config.world_path
    if outcome.tree is not None or outcome.conflicts != (path,) or outcome.marked is None:
        return outcome, []
    base = merge_base(store.root, ours, theirs)
    texts = [(store.repo.read_file(commit, path) or b"").decode("utf-8", "replace") if commit else ""
             for commit in (base, ours, theirs)]
    try:
        keys = world.conflict_keys(*texts)
        logs = trailers(store.root, ours, theirs, path, ("World-Set", "World-Unset"))
        sides = [_settings(store, log, commit, keys, world.parse(text)[1])
                 for log, commit, text in zip(logs, (ours, theirs), texts[1:])]
    except MemsiteError:
        return outcome, []  # a world file a hand edit broke: a person merges it
    winners: dict[str, str] = {}
    settled = []
    for key in keys:
        mine, other = sides[0][key], sides[1][key]
        kept, lost = (mine, other) if mine.wins_over(other) else (other, mine)
        winners[key] = "ours" if kept is mine else "theirs"
        settled.append(world.conflict_trailer(key, kept, lost))
        log.warning("world key %s was set two ways: kept %s over %s", key, kept.describe(), lost.describe())
    text, left = world.three_way(*texts, winners=winners)
    if left:
        return outcome, []
    tree = store.repo.with_file(outcome.marked, path, text.encode("utf-8"))
    return TreeMerge(tree, (), ""), settled


def _settings(store: Storage, commits: list[tuple[int, str, list[tuple[str, str]]]], tip: str, keys: list[str],
              values: dict[str, str]) -> dict[str, world.Setting]:
    """Each key's value at ``tip``, dated by the newest of ``commits`` (the side's own, newest first) that set or
    removed it (or, with no such trailer, that changed the world file at all)."""
    newest = commits[0][:2] if commits else (store.repo.subject(tip)[1], "")
    found: dict[str, world.Setting] = {}
    for key in keys:
        when, agent = next(((w, a) for w, a, named in commits if any(v == key for _, v in named)), newest)
        found[key] = world.Setting(values.get(key), when, agent)
    return found


def _with_trailers(message: str, settled: list[str]) -> str:
    return message + ("\n\n" + "\n".join(f"{world.CONFLICT_TRAILER}: {line}" for line in settled) if settled else "")


def _leave_to_queue(store: Storage, shared: str | None) -> bool:
    """Whether a sync publishes its commits only, leaving the shared branch (now at ``shared``) to the merge
    queue: always (``sync.integrate: queue``), never (``push``), or while the queue runs (``auto``: the
    shared branch's newest commit is its merge, made less than ``QUEUE_RUNNING_SECONDS`` ago)."""
    mode = store.config.sync_integrate
    if mode != "auto" or shared is None:
        return mode == "queue"
    subject, when = store.repo.subject(shared)
    return subject.startswith(INTEGRATE_SUBJECT) and abs(store.now().timestamp() - when) < QUEUE_RUNNING_SECONDS


def _last(attempt: int, tries: int | None, started: float) -> bool:
    """Whether a sync that lost the race gives up now: after ``tries``, or with none set, after ``RACE_SECONDS``."""
    return attempt >= tries if tries is not None else time.monotonic() - started >= RACE_SECONDS


def _queue_seen(store: Storage, shared: str | None) -> bool:
    """Whether a merge queue runs beside this clone's syncs: one of its merges (``integrate``) reached the shared
    branch (now at ``shared``) less than ``QUEUE_RUNNING_SECONDS`` ago, even if other pushes came after it.

    Then a sync tries the shared branch once, and leaves what lost the race to the queue: fifty clones trying
    again and again would keep the queue's own pushes losing.
    """
    if shared is None or store.config.sync_integrate != "auto":
        return False
    since = int(store.now().timestamp() - QUEUE_RUNNING_SECONDS)
    found = store.repo.git.run("log", "-1", "--merges", "--format=%ct", f"--since={since}", "--fixed-strings",
                               f"--grep={INTEGRATE_SUBJECT}", shared)
    return found.returncode == 0 and bool(found.stdout.strip())


def _moved_on_from(store: Storage, seen: str, theirs: str, steps: int = 16) -> bool:
    """Whether ``theirs`` is ``seen`` or a commit after it along first parents (a few steps), read here: the
    shared branch moved on by merges, as it does, spares a git process asking whether it was rewound."""
    commit = theirs
    for _ in range(steps):
        if commit == seen:
            return True
        parents = store.repo.parents(commit)
        if not parents:
            return False
        commit = parents[0]
    return False


def _ready(store: Storage, ref: str) -> None:
    """Repair what a writer killed in this clone left (as every write does first), and create the store's
    branch from HEAD if it does not exist yet (a store opened on a branch it names)."""
    repo = store.repo
    with repo.locked():
        head = repo.refs.head_commit()
        if repo.refs.read(ref) is None and head is not None:
            repo.refs.update(ref, head, None, ident=Author.writer(store.agent).ident(int(store.now().timestamp())),
                             message=f"branch: created from HEAD by memsite ({store.agent})")


def _commit(store: Storage, tree: bytes | None, parents: list[str], message: str, author: Author) -> str:
    """A commit object (no branch moves): the merges of the queue, pushed by their id."""
    assert tree is not None
    return store.repo.write_commit(tree, parents, message, author, int(store.now().timestamp()))


def _conflict(outcome: TreeMerge) -> str:
    paths = ", ".join(outcome.conflicts) or "the merge"
    return f"{paths} ({outcome.detail})" if outcome.detail else paths


def _fetch(origin: Remote, branches: list[str], patterns: list[str] | None = None) -> set[str]:
    return _while_busy(lambda: origin.fetch(branches, patterns or ()))


def _push(origin: Remote, updates: dict[str, str]) -> dict[str, Pushed]:
    return _while_busy(lambda: origin.push(updates))


def _while_busy(call: Callable[[], T]) -> T:
    """``call()``, tried again while another git command in this clone holds a ref it updates."""
    for attempt in range(1, BUSY_ATTEMPTS):
        try:
            return call()
        except Busy:
            _backoff(attempt)
    return call()


def _backoff(attempt: int, cycle: float = 0.0) -> None:
    """Wait before trying again: exponential, with full jitter, so that clones that collided spread out.

    ``cycle``: how long the try that lost took (fetch, merge, push). The
    waits grow from it rather than from a fixed step when it is longer: on a
    busy machine or a slow network, clones that wait less than one try
    lasts collide again, every time.
    """
    step = max(BACKOFF_SECONDS, cycle)
    time.sleep(random.uniform(0, min(max(BACKOFF_CAP_SECONDS, 4 * cycle), step * 2 ** attempt)))


class _one_at_a_time:
    """One sync or integrate at a time in a clone (they update the same tracking refs), threads included."""

    def __init__(self, store: Storage) -> None:
        self.lock = ProcessLock(store.repo.state_dir / "sync.lock")

    def __enter__(self) -> None:
        try:
            self.lock.acquire(SYNC_LOCK_SECONDS)
        except LockTimeout:
            self.lock.close()
            raise RepositoryError(f"another sync of this clone has run for {SYNC_LOCK_SECONDS:.0f} s; "
                                  "try again when it ends") from None

    def __exit__(self, *exc: object) -> None:
        self.lock.release()
        self.lock.close()


class Syncer:
    """Syncs a store on a thread of its own after every ``every`` commits, and a last time when closed.

    Writes never wait for it: a commit only tells the thread. A failed sync
    is logged and kept in :attr:`error`; the next one tries again (nothing
    is lost meanwhile: the commits are in the clone).
    """

    def __init__(self, store: Storage, every: int, remote: str = "origin", branch: str | None = None,
                 run: Callable[[], SyncResult] | None = None) -> None:
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise RepositoryError(f"sync_every: expected a whole number >= 1, got {every!r}")
        self.every = every
        self.last: SyncResult | None = None
        self.error: MemsiteError | None = None
        self._run = run or (lambda: sync(store, remote, branch))
        self._commits = 0
        self._due = threading.Condition()
        self._wanted = False
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="memsite-syncer", daemon=True)
        self._thread.start()

    def committed(self, commit: str) -> None:
        """Count a commit; every ``every``-th asks for a sync."""
        with self._due:
            self._commits += 1
            if self._commits % self.every == 0:
                self._wanted = True
                self._due.notify()

    def close(self, timeout: float | None = None) -> None:
        """Sync what is left (if anything was committed since the last sync) and stop the thread."""
        with self._due:
            self._wanted = self._wanted or self._commits % self.every != 0
            self._closing = True
            self._due.notify()
        self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            with self._due:
                while not self._wanted and not self._closing:
                    self._due.wait()
                wanted, closing, self._wanted = self._wanted, self._closing, False
            if wanted:
                try:
                    self.last, self.error = self._run(), None
                except MemsiteError as exc:
                    self.error = exc
                    log.warning("sync failed: %s", exc)
            if closing:
                return


def review_branch(store: Storage) -> str:
    """The branch ``agent_branch=True`` writes to and ``propose`` pushes for a pull request: ``review/<name>``.

    Not ``agent/<name>``: the merge queue (``integrate``, run by CI on every
    push there) would merge it before anyone reviewed it.
    """
    return f"review/{store.agent}"


def propose(store: Storage, remote: str = "origin", base: str = "main") -> tuple[str, str]:
    """Push this agent's branch and return (branch, the pull request's body: the change report).

    The store writes to its agent branch from then on (as with
    ``MemoryStore(agent_branch=True)``, created from HEAD if need be):
    that branch is pushed, and main is left to the pull request.

    Raises:
        RepositoryError: the branch cannot be pushed.
        MemsiteError: there is nothing to propose: the branch has no commit the base lacks (nothing is pushed).
    """
    from .review import compare, markdown

    name = review_branch(store)
    store.ref = f"refs/heads/{name}"  # (created from HEAD if need be; nothing is checked out)
    origin = Remote(store.root, remote)
    start = base if base in _fetch(origin, [base]) else origin.tracking(base)
    tip = store.repo.refs.read(store.ref) or store.repo.refs.head_commit()
    if tip is None or not count(store.root, tip, [start]):
        raise MemsiteError(f"nothing to propose: {name} has no commit that {remote}/{base} lacks; nothing was "
                           f"pushed (write with MemoryStore(path, agent={store.agent!r}, agent_branch=True) first)")
    sync(store, remote, name)
    return name, markdown(compare(store.root, start, name))
