"""A clone follows a purge made elsewhere: on its sync it writes its own branches and stash again the way the purge
did, and expires what held the purged memories (see :mod:`.purge` and :mod:`.expiry`)."""

from __future__ import annotations

import contextlib
import os
import re
from collections import defaultdict
from pathlib import Path

from ..foundation.errors import NotFound
from ..storage import Storage
from .expiry import drop_unmoved_stashes, expire, held_stashes, hold_stashes, note, run_git
from .purge import (
    REDACTED,
    PurgePlan,
    move_refs,
    plan,
    redacted,
    ref_values,
    refuse_changed,
    rewritable_refs,
    rewrite_refs,
)

FOLLOWING = "following"  # in .memsite/: the shared branch's commit this clone had seen, until it followed a purge
# Who wrote a commit and when, to pair a commit of the rewritten history with the one it was.
_KEY = "%an%x00%ae%x00%ad%x00%cn%x00%ce%x00%cd"


def follow(store: Storage, ref: str, seen: str, theirs: str, remote: str = "origin") -> str | None:
    """Take in a shared branch that a purge elsewhere rewrote: ``seen`` was its commit before, ``theirs`` now.

    The clone's branches and stash entries are written again by the same
    rewrite the purge made (the same commits give the same new ones; what
    the purge took out of messages beyond the memories' own words, the
    pattern of a purge by ``--matching``, is read from the messages it
    rewrote, see :func:`_learned`), so the history they share with
    ``theirs`` becomes ``theirs``'s, and their own commits the remote never
    had (or has on an agent branch, rewritten there too) keep their author,
    date and message, less the purged files and words. The sync then merges
    ``theirs`` in as ever, and what held the purged memories here expires.

    Returns:
        The branch's new commit (None: ``theirs`` holds no tombstone this clone has not followed).
    """
    root = store.root
    if run_git(root, "cat-file", "-e", f"{seen}^{{commit}}", check=False).returncode:
        # (a sync killed after it dropped the objects that held them, the old commits among them)
        return _followed(store, ref, theirs)
    ids = _tombstoned(root, seen, theirs)
    if not ids:
        return None
    _write_seen(store, seen)  # (the fetch moved the remote's branch on: a sync stopped before the end starts here)
    expected = ref_values(root)
    local = [r for r in rewritable_refs(root) if not r.startswith("refs/remotes/")]
    try:
        found: PurgePlan | None = plan(store, ids, refs=[*local, seen])
    except NotFound:  # (this clone never had them)
        found = None
    if found is not None:
        learned = _learned(root, found, seen, theirs) - set(found.words)
        if learned:  # (a purge by pattern: the pattern, written nowhere else)
            found = plan(store, ids, refs=[*local, seen], words=learned)
        refuse_changed(store, [*found.paths, *found.vectors], "sync")
        drop_unmoved_stashes(root)
        hold_stashes(root, found.stashes.values())
        expected.update(held_stashes(root))
        note(store, found.ids, found.commits, found.keys)
        moves = rewrite_refs(root, [r for r in local if r in found.refs], found)
        if moves:
            move_refs(store, moves, expected)
    # The remote's other branches (agent branches) were rewritten too: this clone's copies of them follow.
    run_git(root, "fetch", "--quiet", "--prune", "--no-write-fetch-head", remote,
            f"+refs/heads/*:refs/remotes/{remote}/*")
    return _followed(store, ref, theirs)


def _followed(store: Storage, ref: str, theirs: str) -> str:
    expire(store)  # (what a sync killed after the refs moved left is done here too)
    with contextlib.suppress(FileNotFoundError):
        (store.state.path / FOLLOWING).unlink()
    return store.repo.refs.read(ref) or theirs


def unfollowed(store: Storage) -> str | None:
    """The shared branch's commit before a sync fetched a rewritten one it did not finish following (stopped by
    an error, or killed): the next sync follows from there (None: none)."""
    try:
        seen = (store.state.path / FOLLOWING).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return seen or None


def _write_seen(store: Storage, seen: str) -> None:
    path = store.state.path / FOLLOWING
    if not path.exists():
        temporary = path.with_suffix(".tmp")
        temporary.write_text(f"{seen}\n", encoding="ascii")
        os.replace(temporary, path)


def _tombstoned(root: Path, seen: str, theirs: str) -> list[str]:
    """The memory ids of the tombstones ``theirs`` has and ``seen`` has not."""
    text = run_git(root, "log", "--format=%B", "--grep=^Action: purged$", theirs, f"^{seen}").stdout
    return sorted(set(re.findall(r"^Purged-Memory: (\S+)$", text, re.MULTILINE)))


def _learned(root: Path, found: PurgePlan, seen: str, theirs: str) -> set[str]:
    """What the purge took out of the messages of the history this clone shares with ``theirs`` that the
    memories' own words do not explain (the pattern of a purge by ``--matching``, written nowhere a clone can
    read it): each message of ``theirs`` that says ``[purged]`` is read against the commit it was here, with the
    same author, committer and dates, as this clone would redact it."""
    rewritten = _messages(root, "--fixed-strings", f"--grep={REDACTED}", theirs, f"^{seen}")
    if not rewritten:
        return set()
    was: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for sha, key, message in _messages(root, seen):
        was[key].append((sha, message))
    touched = set(run_git(root, "log", "--format=%H", seen, "--", *found.paths).stdout.split()) \
        if found.paths else set()
    learned: set[str] = set()
    for _, key, message in rewritten:
        holes = re.compile("(.+?)".join(re.escape(part) for part in message.split(REDACTED)), re.DOTALL)
        for sha, old in was.get(key, ()):
            mine = redacted(old, found.words, touched=sha in touched)
            matched = holes.fullmatch(mine)
            if mine == message or matched:
                learned.update(part for part in (matched.groups() if matched else ()) if part != REDACTED)
                break
    return learned


def _messages(root: Path, *revisions: str) -> list[tuple[str, str, str]]:
    """(commit, who wrote it and when, its message) of each commit of ``revisions``."""
    out = run_git(root, "log", "--date=raw", f"--format=%H%x00{_KEY}%x00%B%x01", *revisions).stdout
    found = []
    for record in out.split("\x01"):
        fields = record.lstrip("\n").split("\x00")
        if len(fields) == 8:
            found.append((fields[0], "\x00".join(fields[1:7]), fields[7]))
    return found
