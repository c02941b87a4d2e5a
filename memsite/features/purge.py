"""Erasure: a memory that must go leaves every commit of this clone and of the remote, and nothing else changes.

:func:`forget` deletes a memory in a new commit and keeps it in history (the
review trail). :func:`purge` rewrites history so that no commit holds it:
every version of its file is dropped from every commit, and its words from
every commit message; every other file, and every commit's author, committer,
dates and the rest of its message, stay byte for byte. A tombstone commit on
the branch says *that* something was purged, by whom, when and why (trailers
``Action: purged``, ``Purged-By``, ``Reason``, ``Purged-Memory: <id>``), never
what.

Why memsite's own rewrite rather than git-filter-repo (see docs/design.md):
the rewrite is git's own ``fast-export | fast-import`` with a filter of a few
lines in between, written into refs of memsite's (``refs/memsite/purge/``);
the clone's refs then move in one ``git update-ref --stdin`` transaction after
the remote took the rewritten branches with a lease. A killed purge therefore
leaves the clone as it was or purged, and ``--dry-run`` lists exactly what the
same filter changes. filter-repo would move the refs itself as it goes, remove
the ``origin`` remote of a fresh clone, and expire and repack by its own rules.

A person's stash entries made on a commit that held it (or holding an edit
of its file) are written again with the branches, keeping their other
changes, and take their old place in the stash. After the refs moved, what
still holds the text in the clone goes, and only that (see
:func:`~.expiry.expire`): the reflog entries naming a commit that held it,
the objects only those commits reach, its vectors, and the catalogs, built
again. Its vectors go from every version of the published vector files too.
When others push while a purge runs, what they pushed is rewritten as well,
incrementally (``marks``), and the push tried again. Other clones follow on
their next sync (see :func:`follow`): they read the tombstones of a rewritten
shared branch and write their branches again the same way.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from ..foundation.errors import InvalidInput, MemsiteError, NotFound, RepositoryError
from ..foundation.fileformat import parse_memory
from ..git import Author, stash
from ..git.commands import Git
from ..git.objects import MODE_FILE, Entry
from ..git.remote import Remote, is_ancestor, merge_trees
from ..git.rewrite import rewrite
from ..storage import Storage
from ..storage.vectors import PUBLISHED, text_key, without
from .expiry import (
    STASH_REFS,
    drop_unmoved_stashes,
    expire,
    forget_note,
    held_stashes,
    hold_stashes,
    note,
    run_git,
    stashes_holding,
)

PURGE_REFS = "refs/memsite/purge/"  # the rewritten refs, until the clone's own move to them
TOMBSTONE_SUBJECT = "Purge a memory: "
REDACTED = "[purged]"
# A subject '<verb> <category>: <abstract>'.
MEMORY_VERBS = ("Remember ", "Update ", "Forget ", "Merge into ", "Recall ", "Supersede ")
PURGED_PAGE = "content/purged.md"  # the purges, listed for people and the site (never what was purged)
PURGED_HEADING = ("# Purged memories\n\nMemories erased from the history of this repository: when, by whom and why "
                  "(never what).\n\n")
RACE_SECONDS = 120.0  # how long a purge keeps publishing while others push to the remote first
MATCHING_WITHOUT_YES = 3  # more memories than this matching a pattern: the purge asks for --yes
MEMORIES = "content/memories/"
_ID_LINE = re.compile(rb"^id: *['\"]?([0-9A-Za-z]+)['\"]?\s*$", re.MULTILINE)
_FIELD = re.compile(rb"^(abstract|overview): *(.+)$", re.MULTILINE)
CUT = "…"  # what ends a text cut short (a subject's abstract, a stash's message quoting one)
# A text cut short after ': ' or '(' (where subjects and bodies quote an abstract): the start of a purged word?
_CUT_SHORT = re.compile(r"(: |\()([^\n:(]+?)…")


class RemoteMoved(RepositoryError):
    """The remote's branch moved since the purge fetched it (others pushed): nothing changed here or there."""


@dataclass(frozen=True)
class PurgePlan:
    """What a purge changes: the memories, every path their files had, and the commits it rewrites."""

    ids: tuple[str, ...]
    paths: tuple[str, ...]  # every path any version of their files had
    commits: tuple[str, ...]  # commits whose files or message change (their descendants get new ids too)
    messages: tuple[str, ...]  # of those, the commits whose message changes
    refs: tuple[str, ...]  # the refs of this clone that reach them
    words: tuple[str, ...] = field(default=(), repr=False)  # what is taken out of commit messages
    vectors: tuple[str, ...] = ()  # the published vector files that held their vectors
    keys: tuple[bytes, ...] = field(default=(), repr=False)  # the text keys of every version (their vectors)
    blobs: Mapping[str, bytes] = field(default_factory=dict, repr=False, compare=False)  # vector file versions, anew
    stashes: Mapping[str, str] = field(default_factory=dict)  # the stash entries that hold them: {stash@{n}: commit}
    elsewhere: tuple[str, ...] = ()  # files other than memories that hold the pattern, now or before: kept as they are


@dataclass(frozen=True)
class PurgeResult:
    """What a purge did."""

    plan: PurgePlan
    tombstone: str | None  # the commit on the branch saying something was purged (None: a dry run)
    branch: str
    pushed: tuple[str, ...] = ()  # the remote's branches that took the rewritten history


def plan(store: Storage, ids: Iterable[str] = (), matching: str | None = None, *,
         refs: Iterable[str] = (), words: Iterable[str] = ()) -> PurgePlan:
    """Find every version of the memories ``ids`` (or of those whose text, now or ever, holds ``matching``).

    ``words``: more text to take out of commit messages (what a purge elsewhere took out, see
    :func:`~.following.follow`).

    Raises:
        NotFound: no memory ever had that id, or none ever held the pattern.
    """
    root = store.root
    reach = list(refs) or rewritable_refs(root)
    if not reach:
        raise NotFound(f"{root}: the repository has no commits, so there is nothing to purge")
    added = _added_paths(root, reach)
    wanted: dict[str, set[str]] = {}  # id -> paths
    elsewhere: set[str] = set()
    if matching is not None:
        if not matching.strip():
            raise InvalidInput("purge --matching: the pattern is empty")
        found = run_git(root, "log", "--format=", "--name-only", f"-S{matching}", *reach, "--",
                        MEMORIES.rstrip("/")).stdout.split()
        for path in set(found):
            for blob in _versions(root, reach, path):
                mid = _id_of(blob)
                if mid:
                    wanted.setdefault(mid, set())
        if not wanted:
            raise NotFound(f"no memory, current or past, holds {matching!r}; nothing to purge")
        elsewhere = set(run_git(root, "log", "--format=", "--name-only", f"-S{matching}", *reach, "--", ".",
                                f":(exclude){MEMORIES}").stdout.splitlines()) - {""}
    for given in ids:
        try:
            mid = store.get(given).id  # (a memory there now: the catalog knows it)
        except (NotFound, InvalidInput):
            mid = _resolve(root, added, reach, given)
        wanted.setdefault(mid, set())
    for mid, found_paths in wanted.items():
        ends = (f"-{mid[-6:].lower()}.md", f"-{mid.lower()}.md")
        for path, commit in added.items():
            if path.endswith(ends) \
                    and _id_of(_blob(root, commit, path)) == mid:
                found_paths.add(path)
    paths = sorted({p for found in wanted.values() for p in found})
    found_words, keys = _words(root, reach, paths)
    words = found_words | set(words)
    if matching is not None:
        words.add(matching)
    touched = set(run_git(root, "log", "--format=%H", *reach, "--", *paths).stdout.split()) if paths else set()
    blobs, vector_paths, vector_commits = _published_without(root, reach, keys)
    messages = set()
    for record in run_git(root, "log", "--format=%H%x00%B%x01", *reach).stdout.split("\x01"):
        sha, _, body = record.strip("\n").partition("\x00")
        if sha and redacted(body, words, touched=sha in touched) != body:
            messages.add(sha)
    changed = touched | messages | vector_commits
    holding = [ref for ref in reach if changed and _reaches(root, ref, changed)]
    return PurgePlan(tuple(sorted(wanted)), tuple(paths), tuple(sorted(changed)), tuple(sorted(messages)),
                     tuple(holding), tuple(sorted(words, key=len, reverse=True)), tuple(sorted(vector_paths)),
                     tuple(sorted(keys)), blobs, stashes_holding(store, changed), tuple(sorted(elsewhere)))


def purge(store: Storage, ids: Iterable[str] = (), reason: str = "", *, matching: str | None = None,
          remote: str | None = "origin", dry_run: bool = False) -> PurgeResult:
    """Rewrite history so that no commit holds the memories ``ids`` (or those matching ``matching``).

    Args:
        reason: why (the tombstone says it; required).
        remote: the remote to publish the rewritten branches to, with a lease (None, or a clone
            without that remote: this clone only).
        dry_run: find what would change and change nothing.

    Returns:
        A :class:`PurgeResult`.

    Raises:
        InvalidInput: no reason, or no id and no pattern.
        NotFound: no such memory, or nothing matches.
        RepositoryError: a detached HEAD, a rebase or merge in progress, the remote moved or
            refused a force push (a protected branch): nothing changed in this clone.
    """
    reason = " ".join(str(reason or "").split())
    if not reason:
        raise InvalidInput("purge: --reason is required (the tombstone says why, never what)")
    ids = [i for i in ids if i]
    if not ids and matching is None:
        raise InvalidInput("purge: name a memory id or give --matching PATTERN")
    busy = store.repo.in_progress()
    if busy:
        raise RepositoryError(f"{store.root}: {busy}; then purge")
    if store.repo.refs.head_target() is None:
        raise RepositoryError(f"{store.root}: HEAD is detached; check out the branch to purge first")
    ref = store.writable_ref()
    branch = ref.removeprefix("refs/heads/")
    root = store.root
    origin = _remote(root, remote)
    if origin is not None and not dry_run:
        origin.fetch(patterns=["*"])
    if not dry_run:
        _drop_purge_refs(root)  # (what a purge killed before moving any ref of the clone left)
    try:
        found = plan(store, ids, matching)
    except NotFound:
        done = None if dry_run or matching is not None else _tombstone_of(root, ref, ids)
        if done is None:
            raise
        expire(store)  # a purge killed after it moved the refs: what it had left to do
        return PurgeResult(PurgePlan(tuple(ids), (), (), (), ()), done, branch)
    if dry_run or not found.commits:
        return PurgeResult(found, None, branch)
    refuse_changed(store, [*found.paths, *found.vectors, PURGED_PAGE], "purge")
    hold_stashes(root, found.stashes.values())  # (written again with the branches, then taken by the stash)
    expected = ref_values(root)  # what the rewrite starts from: a ref that moves meanwhile stops the purge
    when = int(store.now().timestamp())
    marks = Path(tempfile.mkdtemp(prefix="purge-", dir=store.state.path))
    started = time.monotonic()
    try:
        for attempt in itertools.count(1):
            rewritten = rewrite_refs(root, found.refs, found, marks)
            tree, parents = _joined(store, ref, rewritten, origin)
            tombstone = store.repo.write_commit(_listed(store, tree, reason, when), parents,
                                                _tombstone(store.agent, reason, found.ids, when),
                                                Author.writer(store.agent), when)
            rewritten[ref] = tombstone
            try:
                pushed = _publish(root, origin, rewritten) if origin is not None else {}
                break
            except RemoteMoved:
                if time.monotonic() - started > RACE_SECONDS:
                    raise
            # Others pushed meanwhile (a busy team): what they pushed is rewritten too, on what is done.
            time.sleep(random.uniform(0, min(2.0, 0.05 * 2 ** attempt)))
            before = ref_values(root)
            origin.fetch(patterns=["*"])  # type: ignore[union-attr]
            found = _extended(store, found, before)
            expected.update((r, sha) for r, sha in ref_values(root).items() if r.startswith("refs/remotes/"))
    except BaseException:
        _drop_purge_refs(root)  # (nothing of the purge stays: the refs it wrote, the stash entries it held)
        raise
    finally:
        shutil.rmtree(marks, ignore_errors=True)
    for name, commit in pushed.items():  # (the remote has them now: so does this clone's record of it)
        rewritten[origin.tracking(name)] = commit  # type: ignore[union-attr]
        expected[origin.tracking(name)] = commit  # type: ignore[union-attr]  # (git push moved it already)
    note(store, found.ids, found.commits, found.keys)
    move_refs(store, rewritten, expected)
    expire(store)
    return PurgeResult(found, tombstone, branch, tuple(pushed))


def _joined(store: Storage, ref: str, rewritten: dict[str, str], origin: Remote | None) -> tuple[bytes, list[str]]:
    """The tree and parents of the tombstone: the rewritten branch, merged with the remote's rewritten copy of
    it when that holds commits this clone has not merged yet (else they would leave the remote).

    Raises:
        RepositoryError: the two changed the same text differently (a sync merges them first, or says why).
    """
    mine = rewritten.get(ref) or store.repo.refs.read(ref)
    assert mine is not None
    theirs = None
    if origin is not None:
        tracking = origin.tracking(ref.removeprefix("refs/heads/"))
        theirs = rewritten.get(tracking) or store.repo.refs.read(tracking)
    if theirs is None or is_ancestor(store.root, theirs, mine):
        return store.repo.root_tree(mine), [mine]
    if is_ancestor(store.root, mine, theirs):
        return store.repo.root_tree(theirs), [theirs]
    merged = merge_trees(store.root, mine, theirs)
    if merged.tree is None:
        raise RepositoryError(f"{store.root}: {ref.removeprefix('refs/heads/')} and its copy on {origin.name} "  # type: ignore[union-attr]
                              f"changed {', '.join(merged.conflicts)} differently; nothing changed: run memsite sync, "
                              "then the purge again")
    return merged.tree, [mine, theirs]


def _extended(store: Storage, found: PurgePlan, before: dict[str, str]) -> PurgePlan:
    """The plan, with the refs a fetch brought (``before`` it: every ref's commit) and the versions of published
    vector files they wrote."""
    root = store.root
    changed = set(found.commits)
    now, values = rewritable_refs(root), ref_values(root)
    new_tips = [r for r in now if before.get(r) != values.get(r)]
    blobs, paths, commits = _published_without(root, [*new_tips, "--not", *set(before.values())], set(found.keys)) \
        if new_tips else ({}, set(), set())
    changed |= commits
    holding = sorted({*found.refs, *(r for r in new_tips if _reaches(root, r, changed))} & set(now))
    return replace(found, refs=tuple(holding), commits=tuple(sorted(changed)),
                   vectors=tuple(sorted({*found.vectors, *paths})), blobs={**found.blobs, **blobs})


def _listed(store: Storage, tree: bytes, reason: str, when: int) -> bytes:
    """``tree`` with the purge listed in ``content/purged.md`` (a page of the site: when, who, why)."""
    objects = store.repo.objects
    entry = objects.lookup(tree, PURGED_PAGE)
    text = objects.read_blob(entry.sha) if entry else PURGED_HEADING.encode()
    text += f"- {_stamp(when)} by {store.agent}: {reason}\n".encode()
    new = objects.apply(tree, {PURGED_PAGE: Entry(MODE_FILE, objects.write(b"blob", text))})
    assert new is not None
    return new


def _stamp(when: int) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tombstone(agent: str, reason: str, ids: Iterable[str], when: int) -> str:
    stamp = _stamp(when)
    lines = [TOMBSTONE_SUBJECT + reason, "",
             "A memory was purged from the history of this branch: every version of its file and its",
             "words in commit messages were removed; every other file is as it was.", "",
             "Action: purged", f"Purged-By: {agent}", f"Purged-At: {stamp}", f"Reason: {reason}"]
    lines += [f"Purged-Memory: {mid}" for mid in ids]
    return "\n".join(lines) + "\n"


def _tombstone_of(root: Path, ref: str, ids: list[str]) -> str | None:
    """The newest tombstone on ``ref`` naming every one of ``ids`` (None: they were never purged here)."""
    for record in run_git(root, "log", "--format=%H%x00%B%x01", "--grep=^Action: purged$", ref).stdout.split("\x01"):
        sha, _, body = record.strip("\n").partition("\x00")
        named = re.findall(r"^Purged-Memory: (\S+)$", body, re.MULTILINE)
        if sha and all(any(n.upper().startswith(i.upper()) for n in named) for i in ids):
            return sha
    return None


def rewrite_refs(root: Path, refs: Iterable[str], found: PurgePlan, marks: Path | None = None) -> dict[str, str]:
    """Write ``refs`` again without the plan's files, words and vectors, into refs of memsite's;
    {ref: its new commit}. The stash entries held for it (see :func:`~.expiry.hold_stashes`) go too.

    No ref of the clone moves here.
    """
    words = found.words
    return rewrite(root, [*refs, *held_stashes(root)], found.paths,
                   lambda message, touched: redacted(message, words, touched=touched), PURGE_REFS, found.blobs, marks)


def redacted(message: str, words: Iterable[str], *, touched: bool) -> str:
    """``message`` without ``words``, whole or cut short (``Jane Roe addr…``); a commit that changed a purged
    file loses its subject's text too (it was the memory's abstract)."""
    for word in words:
        message = message.replace(word, REDACTED)
    if CUT in message:
        message = _CUT_SHORT.sub(lambda m: m.group(1) + REDACTED if _starts_one(m.group(2).rstrip(), words)
                                 else m.group(0), message)
    if touched:
        subject, newline, rest = message.partition("\n")
        verb, colon, _ = subject.partition(": ")
        if colon and verb.startswith(MEMORY_VERBS):
            message = f"{verb}: {REDACTED}{newline}{rest}"
    return message


def refuse_changed(store: Storage, paths: list[str], then: str) -> None:
    """Refuse to purge while a file the purge changes has changes not committed (the branch's files follow the
    rewritten branch, and these would hold the text, or stop them).

    Raises:
        RepositoryError: naming the file and what to do.
    """
    listed = run_git(store.root, "status", "--porcelain", "-z", "--untracked-files=no", "--", *paths).stdout
    changed = [entry[3:] for entry in listed.split("\0") if len(entry) > 3 and entry[2] == " "]
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise RepositoryError(f"{store.root}: {changed[0]}{more} has changes not committed and is purged; stash them "
                              f"(the stash is purged with it) or discard them, then {then}; nothing changed")


def _starts_one(text: str, words: Iterable[str]) -> bool:
    return len(text) >= 8 and any(word.startswith(text) for word in words)


def _publish(root: Path, origin: Remote, rewritten: dict[str, str]) -> dict[str, str]:
    """Push the rewritten branches the remote has, each with a lease on what this clone fetched, all or none;
    {branch: the commit it has now}."""
    prefix = origin.tracking("")
    leases, specs, names = [], [], []
    for ref, new in rewritten.items():
        if ref.startswith(prefix):
            name = ref.removeprefix(prefix)
        elif ref.startswith("refs/heads/"):
            name = ref.removeprefix("refs/heads/")
            if run_git(root, "rev-parse", "-q", "--verify", origin.tracking(name), check=False).returncode:
                continue  # a branch the remote does not have stays in this clone
        else:
            continue
        if name in names or name == "HEAD":
            continue
        local = f"refs/heads/{name}"
        value = rewritten.get(local, new)  # (the branch itself wins over its tracking ref: it has the tombstone)
        old = run_git(root, "rev-parse", origin.tracking(name)).stdout.strip()
        leases.append(f"--force-with-lease=refs/heads/{name}:{old}")
        specs.append(f"{value}:refs/heads/{name}")
        names.append(name)
    if not specs:
        return {}
    result = run_git(root, "push", "--porcelain", "--atomic", *leases, origin.name, *specs, check=False)
    if result.returncode:
        said = (result.stdout + result.stderr).lower()
        _drop_purge_refs(root)
        # (a lease that no longer holds, or a push of someone else's moving the ref at that moment: the same race)
        if "stale info" in said or "fetch first" in said or ("cannot lock ref" in said and "but expected" in said):
            raise RemoteMoved(f"{origin.name} moved since the purge fetched it; nothing changed here or there: "
                                  "run the purge again (it fetches first)")
        if "non-fast-forward" in said or "denied" in said or "protected" in said or "declined" in said:
            raise RepositoryError(f"{origin.name} refused to rewrite {', '.join(names)} (a protected branch: force "
                                  "pushes denied); nothing changed here or there: allow force pushes for the purge, "
                                  "then run it again")
        raise RepositoryError(f"cannot push the purged history to {origin.name}: "
                              f"{(result.stderr.strip().splitlines() or ['git push failed'])[-1]}; "
                              "nothing changed here")
    return {name: spec.partition(":")[0] for name, spec in zip(names, specs)}


def move_refs(store: Storage, moves: dict[str, str], expected: dict[str, str]) -> None:
    """Move every ref at once (``git update-ref --stdin``) from its ``expected`` commit, then bring the
    checked-out branch's files along.

    Raises:
        RepositoryError: a ref moved since (a write landed during the purge); none moved.
    """
    root, repo = store.root, store.repo
    head = repo.refs.head_target()
    with repo.locked():
        lines = ["start"] + [f"update {r} {new} {expected.get(r, '')}".rstrip() for r, new in moves.items()]
        if any(r.startswith(STASH_REFS) for r in moves) and expected.get(stash.STASH):
            lines.append(f"verify {stash.STASH} {expected[stash.STASH]}")  # (a stash made meanwhile: not rewritten)
        lines += [f"delete {r}" for r in _purge_refs(root)]
        lines += ["prepare", "commit"]
        moved = run_git(root, "update-ref", "--stdin", input="\n".join(lines) + "\n", check=False)
        if moved.returncode:
            _drop_purge_refs(root)
            forget_note(store)
            raise RepositoryError(f"{store.root}: a branch moved while the purge ran (a write landed, or a stash); "
                                  "nothing changed in this clone: run the purge again")
        if head in moves and expected.get(head):
            # the index and working tree follow the branch (a file edited by hand stays edited)
            run_git(root, "read-tree", "-m", "-u", expected[head], moves[head])
    store.fresh()


def ref_values(root: Path) -> dict[str, str]:
    listed = run_git(root, "for-each-ref", "--format=%(refname) %(objectname)").stdout
    return dict(line.split(" ", 1) for line in listed.splitlines())


def _purge_refs(root: Path) -> list[str]:
    return run_git(root, "for-each-ref", "--format=%(refname)", PURGE_REFS).stdout.split()


def _drop_purge_refs(root: Path) -> None:
    refs = _purge_refs(root)
    if refs:
        run_git(root, "update-ref", "--stdin", input="".join(f"delete {r}\n" for r in refs))
    drop_unmoved_stashes(root)


def _remote(root: Path, name: str | None) -> Remote | None:
    if not name or name not in run_git(root, "remote").stdout.split():
        return None
    return Remote(root, name)


def rewritable_refs(root: Path) -> list[str]:
    """Every ref a purge rewrites if it reaches the memories: branches, the remote's, tags, and any other a person
    or git keeps (``refs/original/`` of a filter-branch, ``refs/prefetch/`` of ``git maintenance``); not the
    stash (its entries are rewritten one by one) nor memsite's own."""
    listed = run_git(root, "for-each-ref", "--format=%(refname)", "refs/").stdout
    return [r for r in listed.split() if not r.endswith("/HEAD") and r != stash.STASH
            and not r.startswith(("refs/memsite/", "refs/bisect/"))]


def _added_paths(root: Path, refs: list[str]) -> dict[str, str]:
    """Every memory file path ever added on ``refs``: {path: a commit that added it}."""
    out: dict[str, str] = {}
    commit = ""
    for line in run_git(root, "log", "--format=%x00%H", "--name-only", "--diff-filter=AR", *refs, "--",
                        MEMORIES.rstrip("/")).stdout.splitlines():
        if line.startswith("\x00"):
            commit = line[1:]
        elif line:
            out.setdefault(line, commit)
    return out


def _resolve(root: Path, added: dict[str, str], refs: list[str], given: str) -> str:
    """The full id of the memory ``given`` names (an id or its unique prefix), current or past."""
    key = given.strip()
    if not re.fullmatch(r"[0-9A-Za-z]{4,40}", key):
        raise InvalidInput(f"purge: {given!r} is not a memory id")
    ids = set()
    tail = f"-{key[-6:].lower()}.md" if len(key) == 26 else ""
    for path, commit in added.items():
        if tail and not path.endswith(tail) and not path.endswith(f"-{key.lower()}.md"):
            continue
        mid = _id_of(_blob(root, commit, path)) if path.endswith(".md") else None
        if mid and mid.upper().startswith(key.upper()):
            ids.add(mid)
    if not ids:
        raise NotFound(f"no memory, current or past, has the id {given}; nothing to purge")
    if len(ids) > 1:
        raise InvalidInput(f"purge: {given} is the start of {len(ids)} ids ({', '.join(sorted(ids))}); give more of it")
    return ids.pop()


def _versions(root: Path, refs: list[str], path: str) -> list[bytes]:
    shas = run_git(root, "log", "--format=%H", *refs, "--", path).stdout.split()
    return [b for b in (_blob(root, sha, path) for sha in shas) if b]


def _words(root: Path, refs: list[str], paths: list[str]) -> tuple[set[str], set[bytes]]:
    """What of the memories' text a commit message could hold (abstracts, overviews, body lines), and the
    text keys their vectors have (of every version)."""
    words: set[str] = set()
    keys: set[bytes] = set()
    for path in paths:
        for blob in _versions(root, refs, path):
            text = blob.decode("utf-8", "replace")
            with contextlib.suppress(MemsiteError):  # (a version that does not parse had no vector)
                memory = parse_memory(text, path)
                keys.add(text_key(memory.abstract, memory.content))
            front, _, body = text.partition("\n---\n")
            for match in _FIELD.finditer(front.encode()):
                value = match.group(2).decode("utf-8", "replace").strip().strip("'\"")
                if len(value) >= 4:
                    words.add(value)
            words.update(line.strip() for line in body.splitlines() if len(line.strip()) >= 8)
    return words, keys


def _published_without(root: Path, refs: list[str], keys: set[bytes]) -> tuple[dict[str, bytes], set[str], set[str]]:
    """Every version of the published vector files that holds one of ``keys``, without it:
    ({its blob id: the file without those records}, the files' paths, the commits that wrote them)."""
    if not keys:
        return {}, set(), set()
    written: dict[str, tuple[str, str]] = {}  # blob -> (path, a commit that wrote it)
    commit = ""
    for line in run_git(root, "log", "--format=%x00%H", "--raw", "--no-abbrev", "--no-renames", *refs, "--",
                        PUBLISHED).stdout.splitlines():
        if line.startswith("\x00"):
            commit = line[1:]
        elif line.startswith(":"):
            fields, _, path = line.partition("\t")
            sha = fields.split()[3]
            if sha.strip("0"):
                written.setdefault(sha, (path, commit))
    blobs, paths, commits = {}, set(), set()
    for sha, data in _read_blobs(root, list(written)).items():
        purged = without(data, keys)
        if purged is not None:
            blobs[sha] = purged
            paths.add(written[sha][0])
    if blobs:  # (each commit that wrote such a version: a blob can be written by more than one)
        for line in run_git(root, "log", "--format=%x00%H", "--raw", "--no-abbrev", "--no-renames", *refs, "--",
                            *sorted(paths)).stdout.splitlines():
            if line.startswith("\x00"):
                commit = line[1:]
            elif line.startswith(":") and line.split()[3] in blobs:
                commits.add(commit)
    return blobs, paths, commits


def _read_blobs(root: Path, shas: list[str]) -> dict[str, bytes]:
    """The content of each of the blobs ``shas``, read by one ``git cat-file --batch``."""
    if not shas:
        return {}
    out = Git(root).run("cat-file", "--batch", input="".join(f"{sha}\n" for sha in shas).encode(), text=False).stdout
    found, pos = {}, 0
    for sha in shas:
        header = out[pos : out.index(b"\n", pos)]
        pos += len(header) + 1
        parts = header.split()
        if len(parts) == 3:
            size = int(parts[2])
            found[sha] = out[pos : pos + size]
            pos += size + 1
    return found


def _blob(root: Path, commit: str, path: str) -> bytes:
    result = Git(root).run("cat-file", "blob", f"{commit}:{path}", text=False)
    return result.stdout if result.returncode == 0 else b""


def _id_of(blob: bytes) -> str | None:
    match = _ID_LINE.search(blob[:2048])
    return match.group(1).decode() if match else None


def _reaches(root: Path, ref: str, commits: set[str]) -> bool:
    listed = run_git(root, "rev-list", ref).stdout.split()
    return not commits.isdisjoint(listed)
