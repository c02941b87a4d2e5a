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

After the refs moved, what still holds the text in the clone goes: reflogs
are expired, ``ORIG_HEAD`` dropped, every pack (memsite's own included) repacked
with the unreachable objects pruned, and the catalog and vectors in
``.memsite/`` rebuilt. Other clones follow on their next sync (see
:func:`follow`): they read the tombstones of a rewritten shared branch and
move their unpublished commits onto it, purged the same way.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..foundation.errors import InvalidInput, NotFound, RepositoryError
from ..git import Author
from ..git.commands import Git
from ..git.maintenance import keep_of
from ..git.objects import MODE_FILE, Entry
from ..git.remote import Remote
from ..git.rewrite import rewrite
from ..storage import Storage

PURGE_REFS = "refs/memsite/purge/"  # the rewritten refs, until the clone's own move to them
TOMBSTONE_SUBJECT = "Purge a memory: "
REDACTED = "[purged]"
# A subject '<verb> <category>: <abstract>'.
MEMORY_VERBS = ("Remember ", "Update ", "Forget ", "Merge into ", "Recall ", "Supersede ")
PURGED_PAGE = "content/purged.md"  # the purges, listed for people and the site (never what was purged)
PURGED_HEADING = ("# Purged memories\n\nMemories erased from the history of this repository: when, by whom and why "
                  "(never what).\n\n")
MATCHING_WITHOUT_YES = 3  # more memories than this matching a pattern: the purge asks for --yes
MEMORIES = "content/memories/"
_ID_LINE = re.compile(rb"^id: *['\"]?([0-9A-Za-z]+)['\"]?\s*$", re.MULTILINE)
_FIELD = re.compile(rb"^(abstract|overview): *(.+)$", re.MULTILINE)


@dataclass(frozen=True)
class PurgePlan:
    """What a purge changes: the memories, every path their files had, and the commits it rewrites."""

    ids: tuple[str, ...]
    paths: tuple[str, ...]  # every path any version of their files had
    commits: tuple[str, ...]  # commits whose files or message change (their descendants get new ids too)
    messages: tuple[str, ...]  # of those, the commits whose message changes
    refs: tuple[str, ...]  # the refs of this clone that reach them
    words: tuple[str, ...] = field(default=(), repr=False)  # what is taken out of commit messages


@dataclass(frozen=True)
class PurgeResult:
    """What a purge did."""

    plan: PurgePlan
    tombstone: str | None  # the commit on the branch saying something was purged (None: a dry run)
    branch: str
    pushed: tuple[str, ...] = ()  # the remote's branches that took the rewritten history


def plan(store: Storage, ids: Iterable[str] = (), matching: str | None = None, *,
         refs: Iterable[str] = ()) -> PurgePlan:
    """Find every version of the memories ``ids`` (or of those whose text, now or ever, holds ``matching``).

    Raises:
        NotFound: no memory ever had that id, or none ever held the pattern.
    """
    root = store.root
    reach = list(refs) or _refs(root)
    if not reach:
        raise NotFound(f"{root}: the repository has no commits, so there is nothing to purge")
    added = _added_paths(root, reach)
    wanted: dict[str, set[str]] = {}  # id -> paths
    if matching is not None:
        if not matching.strip():
            raise InvalidInput("purge --matching: the pattern is empty")
        found = _git(root, "log", "--format=", "--name-only", f"-S{matching}", *reach, "--",
                     MEMORIES.rstrip("/")).stdout.split()
        for path in set(found):
            for blob in _versions(root, reach, path):
                mid = _id_of(blob)
                if mid:
                    wanted.setdefault(mid, set())
        if not wanted:
            raise NotFound(f"no memory, current or past, holds {matching!r}; nothing to purge")
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
    words = _words(root, reach, paths)
    if matching is not None:
        words.add(matching)
    touched = set(_git(root, "log", "--format=%H", *reach, "--", *paths).stdout.split()) if paths else set()
    messages = set()
    for record in _git(root, "log", "--format=%H%x00%B%x01", *reach).stdout.split("\x01"):
        sha, _, body = record.strip("\n").partition("\x00")
        if sha and _redacted(body, words, touched=sha in touched) != body:
            messages.add(sha)
    changed = touched | messages
    holding = [ref for ref in reach if changed and _reaches(root, ref, changed)]
    return PurgePlan(tuple(sorted(wanted)), tuple(paths), tuple(sorted(changed)), tuple(sorted(messages)),
                     tuple(holding), tuple(sorted(words, key=len, reverse=True)))


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
    expected = _ref_values(root)  # what the rewrite starts from: a ref that moves meanwhile stops the purge
    rewritten = _rewrite(root, found.refs, found.paths, found.words)
    tip = rewritten.get(ref) or store.repo.refs.read(ref)
    assert tip is not None
    when = int(store.now().timestamp())
    tombstone = store.repo.write_commit(_listed(store, tip, reason, when), [tip],
                                        _tombstone(store.agent, reason, found.ids, when),
                                        Author.writer(store.agent), when)
    rewritten[ref] = tombstone
    pushed = _publish(root, origin, rewritten) if origin is not None else {}
    for name, commit in pushed.items():  # (the remote has them now: so does this clone's record of it)
        rewritten[origin.tracking(name)] = commit  # type: ignore[union-attr]  # pushed: origin is set
        expected[origin.tracking(name)] = commit  # type: ignore[union-attr]  # pushed: origin is set (git push moved it)
    _move_refs(store, rewritten, expected)
    expire(store)
    return PurgeResult(found, tombstone, branch, tuple(pushed))


def follow(store: Storage, ref: str, seen: str, theirs: str, remote: str = "origin") -> str | None:
    """Take in a shared branch that a purge elsewhere rewrote: ``seen`` was its commit before, ``theirs`` now.

    The branch's own commits the remote never had are moved onto the
    rewritten history (each keeping its author, date and message, less the
    purged files and words; the sync then merges ``theirs`` in as ever), and
    what held the purged memories here expires.

    Returns:
        The branch's new commit (None: ``theirs`` holds no tombstone this clone has not followed).
    """
    root = store.root
    ids = _tombstoned(root, seen, theirs)
    if not ids:
        return None
    expected = _ref_values(root)
    mine = store.repo.refs.read(ref)
    own = _git(root, "rev-list", "--reverse", "--topo-order", "--no-merges", mine or theirs,
               f"^{seen}", f"^{theirs}").stdout.split() if mine else []
    local = [r for r in _refs(root) if not r.startswith("refs/remotes/")]
    try:
        found: PurgePlan | None = plan(store, ids, refs=[*local, seen])
    except NotFound:  # (this clone never had them)
        found = None
    paths = set(found.paths if found else ())
    words = found.words if found else ()
    repo, objects = store.repo, store.repo.objects

    def purged_tree(commit: str) -> bytes | None:
        return objects.apply(repo.root_tree(commit), dict.fromkeys(paths))

    # The rewritten image of ``seen`` on ``theirs``: the commit whose tree is seen's without the purged files
    # (the rewrite keeps every other blob, so the trees are equal). Own commits go on it, each with its own
    # files less the purged ones; the sync then merges ``theirs`` in with the merge drivers, as ever.
    base = purged_tree(seen).hex()  # type: ignore[union-attr]  # a commit has a tree
    current = next((line.split()[0] for line in _git(root, "log", "--format=%H %T", theirs).stdout.splitlines()
                    if line.split()[1] == base), theirs)
    chain = own if mine in own or mine is None else [*own, mine]  # (a merge at the tip: its files too)
    for sha in chain:
        header, _, message = _git(root, "cat-file", "commit", sha).stdout.partition("\n\n")
        lines = [ln for ln in header.split("\n") if not ln.startswith(("tree ", "parent "))]
        touched = any(p in paths for p, _, _ in objects.diff(repo.root_tree(repo.parents(sha)[0]),
                                                             repo.root_tree(sha)))
        text = (f"tree {purged_tree(sha).hex()}\nparent {current}\n" + "\n".join(lines)  # type: ignore[union-attr]  # a commit has a tree
                + "\n\n" + _redacted(message, words, touched=touched))
        current = _git(root, "hash-object", "-t", "commit", "-w", "--stdin", input=text).stdout.strip()
    moves = {ref: current}
    for other in local:  # the clone's other refs: the purged memories go from them too
        if other != ref and found and other in found.refs:
            moves.update(_rewrite(root, (other,), found.paths, found.words))
    _move_refs(store, moves, expected)
    # The remote's other branches (agent branches) were rewritten too: this clone's copies of them follow.
    _git(root, "fetch", "--quiet", "--prune", "--no-write-fetch-head", remote, f"+refs/heads/*:refs/remotes/{remote}/*")
    expire(store)
    return current


def expire(store: Storage) -> None:
    """Drop what in this clone still holds objects no ref reaches: reflogs, ORIG_HEAD, packs, the catalog.

    Every pack, memsite's own included, is repacked into one and the
    unreachable objects pruned; the catalog and vectors in ``.memsite/`` are
    set aside and built again from the files (the purged memory is in none).
    """
    root, git_dir = store.root, store.repo.git_dir
    for name in ("ORIG_HEAD", "FETCH_HEAD"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(git_dir / name)
    # Under the repository lock: no write of this clone is between its objects and its ref, so the
    # .keep files memsite puts on a pack until then guard nothing now, and nothing reachable is pruned.
    with store.repo.locked():
        _git(root, "reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
        store.repo.objects.release()
        for keep in (git_dir / "objects" / "pack").glob("*.keep"):
            if (keep_of(str(keep)) or b"").startswith(b"memsite "):
                with contextlib.suppress(FileNotFoundError):
                    keep.unlink()
        _git(root, "-c", "gc.autoDetach=false", "gc", "--prune=now", "--quiet")
    store.rebuild_caches()


def _listed(store: Storage, tip: str, reason: str, when: int) -> bytes:
    """The tree of ``tip`` with the purge listed in ``content/purged.md`` (a page of the site: when, who, why)."""
    objects, tree = store.repo.objects, store.repo.root_tree(tip)
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
    for record in _git(root, "log", "--format=%H%x00%B%x01", "--grep=^Action: purged$", ref).stdout.split("\x01"):
        sha, _, body = record.strip("\n").partition("\x00")
        named = re.findall(r"^Purged-Memory: (\S+)$", body, re.MULTILINE)
        if sha and all(any(n.upper().startswith(i.upper()) for n in named) for i in ids):
            return sha
    return None


def _tombstoned(root: Path, seen: str, theirs: str) -> list[str]:
    """The memory ids of the tombstones ``theirs`` has and ``seen`` has not."""
    text = _git(root, "log", "--format=%B", "--grep=^Action: purged$", theirs, f"^{seen}").stdout
    return sorted(set(re.findall(r"^Purged-Memory: (\S+)$", text, re.MULTILINE)))


def _rewrite(root: Path, refs: Iterable[str], paths: Iterable[str], words: Iterable[str]) -> dict[str, str]:
    """Write ``refs`` again without ``paths`` and ``words``, into refs of memsite's; {ref: its new commit}.

    No ref of the clone moves here.
    """
    words = list(words)
    return rewrite(root, refs, paths, lambda message, touched: _redacted(message, words, touched=touched), PURGE_REFS)


def _redacted(message: str, words: Iterable[str], *, touched: bool) -> str:
    """``message`` without ``words``; a commit that changed a purged file loses its subject's text too
    (it was the memory's abstract, perhaps cut short)."""
    for word in words:
        message = message.replace(word, REDACTED)
    if touched:
        subject, newline, rest = message.partition("\n")
        verb, colon, _ = subject.partition(": ")
        if colon and verb.startswith(MEMORY_VERBS):
            message = f"{verb}: {REDACTED}{newline}{rest}"
    return message


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
            if _git(root, "rev-parse", "-q", "--verify", origin.tracking(name), check=False).returncode:
                continue  # a branch the remote does not have stays in this clone
        else:
            continue
        if name in names or name == "HEAD":
            continue
        local = f"refs/heads/{name}"
        value = rewritten.get(local, new)  # (the branch itself wins over its tracking ref: it has the tombstone)
        old = _git(root, "rev-parse", origin.tracking(name)).stdout.strip()
        leases.append(f"--force-with-lease=refs/heads/{name}:{old}")
        specs.append(f"{value}:refs/heads/{name}")
        names.append(name)
    if not specs:
        return {}
    result = _git(root, "push", "--porcelain", "--atomic", *leases, origin.name, *specs, check=False)
    if result.returncode:
        said = (result.stdout + result.stderr).lower()
        _drop_purge_refs(root)
        if "stale info" in said or "fetch first" in said:
            raise RepositoryError(f"{origin.name} moved since the purge fetched it; nothing changed here or there: "
                                  "run the purge again (it fetches first)")
        if "non-fast-forward" in said or "denied" in said or "protected" in said or "declined" in said:
            raise RepositoryError(f"{origin.name} refused to rewrite {', '.join(names)} (a protected branch: force "
                                  "pushes denied); nothing changed here or there: allow force pushes for the purge, "
                                  "then run it again")
        raise RepositoryError(f"cannot push the purged history to {origin.name}: "
                              f"{(result.stderr.strip().splitlines() or ['git push failed'])[-1]}; "
                              "nothing changed here")
    return {name: spec.partition(":")[0] for name, spec in zip(names, specs)}


def _move_refs(store: Storage, moves: dict[str, str], expected: dict[str, str]) -> None:
    """Move every ref at once (``git update-ref --stdin``) from its ``expected`` commit, then bring the
    checked-out branch's files along.

    Raises:
        RepositoryError: a ref moved since (a write landed during the purge); none moved.
    """
    root, repo = store.root, store.repo
    head = repo.refs.head_target()
    with repo.locked():
        lines = ["start"] + [f"update {r} {new} {expected.get(r, '')}".rstrip() for r, new in moves.items()]
        lines += [f"delete {r}" for r in _purge_refs(root)]
        lines += ["prepare", "commit"]
        moved = _git(root, "update-ref", "--stdin", input="\n".join(lines) + "\n", check=False)
        if moved.returncode:
            _drop_purge_refs(root)
            raise RepositoryError(f"{store.root}: a branch moved while the purge ran (a write landed); nothing "
                                  "changed in this clone: run the purge again")
        if head in moves and expected.get(head):
            # the index and working tree follow the branch (a file edited by hand stays edited)
            _git(root, "read-tree", "-m", "-u", expected[head], moves[head])
    store.fresh()


def _ref_values(root: Path) -> dict[str, str]:
    listed = _git(root, "for-each-ref", "--format=%(refname) %(objectname)").stdout
    return dict(line.split(" ", 1) for line in listed.splitlines())


def _purge_refs(root: Path) -> list[str]:
    return _git(root, "for-each-ref", "--format=%(refname)", PURGE_REFS).stdout.split()


def _drop_purge_refs(root: Path) -> None:
    refs = _purge_refs(root)
    if refs:
        _git(root, "update-ref", "--stdin", input="".join(f"delete {r}\n" for r in refs))


def _remote(root: Path, name: str | None) -> Remote | None:
    if not name or name not in _git(root, "remote").stdout.split():
        return None
    return Remote(root, name)


def _refs(root: Path) -> list[str]:
    listed = _git(root, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes", "refs/tags").stdout
    return [r for r in listed.split() if not r.endswith("/HEAD")]


def _added_paths(root: Path, refs: list[str]) -> dict[str, str]:
    """Every memory file path ever added on ``refs``: {path: a commit that added it}."""
    out: dict[str, str] = {}
    commit = ""
    for line in _git(root, "log", "--format=%x00%H", "--name-only", "--diff-filter=AR", *refs, "--",
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
    shas = _git(root, "log", "--format=%H", *refs, "--", path).stdout.split()
    return [b for b in (_blob(root, sha, path) for sha in shas) if b]


def _words(root: Path, refs: list[str], paths: list[str]) -> set[str]:
    """What of the memories' text a commit message could hold: abstracts, overviews, body lines."""
    words: set[str] = set()
    for path in paths:
        for blob in _versions(root, refs, path):
            text = blob.decode("utf-8", "replace")
            front, _, body = text.partition("\n---\n")
            for match in _FIELD.finditer(front.encode()):
                value = match.group(2).decode("utf-8", "replace").strip().strip("'\"")
                if len(value) >= 4:
                    words.add(value)
            words.update(line.strip() for line in body.splitlines() if len(line.strip()) >= 8)
    return words


def _blob(root: Path, commit: str, path: str) -> bytes:
    result = Git(root).run("cat-file", "blob", f"{commit}:{path}", text=False)
    return result.stdout if result.returncode == 0 else b""


def _id_of(blob: bytes) -> str | None:
    match = _ID_LINE.search(blob[:2048])
    return match.group(1).decode() if match else None


def _reaches(root: Path, ref: str, commits: set[str]) -> bool:
    listed = _git(root, "rev-list", ref).stdout.split()
    return not commits.isdisjoint(listed)


def _git(root: Path, *args: str, check: bool = True, input: str | None = None) -> Any:
    result = Git(root).run(*args, input=input)
    if check and result.returncode != 0:
        raise RepositoryError(f"git {args[0]} failed in {root}: {(result.stderr.strip().splitlines() or ['?'])[-1]}")
    return result


