"""What a purge leaves to expire in a clone once its refs moved: the reflog entries, stashes, objects, vectors
and catalogs that still hold the purged memories, and only those.

A purge (or a clone following one on its sync) writes down what it rewrote
(``.memsite/purging``: the commits, the text keys of the vectors) before any
ref moves, so that :func:`expire` finishes the work on the next run when the
first was killed. The stash entries that held the memories were written
again with the branches (into refs of memsite's, ``refs/memsite/stash/<old
commit>``, moved to the new commit with the branches in one transaction);
here the stash takes them, in place, and the old ones expire with the rest.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..git import stash
from ..git.commands import Git
from ..git.maintenance import keep_of
from ..storage import Storage
from ..storage.vectors import erase

PENDING = "purging"  # in .memsite/: what a purge that moved the refs has still to expire
SITE_PARSED = "site-parsed"  # in .memsite/: the site build's parsed memories (memsite.site.parsed), text and all
STASH_REFS = "refs/memsite/stash/"  # a stash entry to write again: named by its commit, moved to its new one


def expire(store: Storage) -> None:
    """Drop what in this clone still holds the purged memories, and only that: the reflog entries naming a
    commit that held them, the objects only those commits reach, their vectors in the cache, their recalls
    waiting in the activity journal; then the catalogs (text in SQLite's free pages) are built again from
    the files.

    The stash entries that held them were written again with the branches: the stash takes the new ones
    first. What to drop was written down (``.memsite/purging``) before any ref moved, so a purge killed on
    the way finishes here on its next run. A person's other reflog entries, stashes and unreachable objects
    stay for git to expire by its own rules.
    """
    found = _noted(store)
    if found is None:
        return
    commits, keys, noted, ids = found
    root, git_dir = store.root, store.repo.git_dir
    with store.repo.locked():  # (no write of this clone is between its objects and its ref meanwhile)
        tainted = noted | _follow_stashes(store) | _tainted(root, commits)
        if tainted - noted:  # (noted before the reflogs that find them go: a killed run finds them there)
            with open(store.state.path / PENDING, "a", encoding="ascii") as file:
                file.write("".join(f"tainted {sha}\n" for sha in sorted(tainted - noted)))
                file.flush()
                os.fsync(file.fileno())
        _drop_entries(store, tainted)
        for name in ("ORIG_HEAD", "FETCH_HEAD"):  # (naming such a commit: one naming another commit stays)
            with contextlib.suppress(FileNotFoundError):
                if any(line[:40] in tainted for line in (git_dir / name).read_text(errors="replace").splitlines()):
                    os.remove(git_dir / name)
        _drop_objects(store, tainted)
        held = held_stashes(root)
        if held:
            run_git(root, "update-ref", "--stdin", input="".join(f"delete {ref}\n" for ref in held))
    _erase_vectors(store, keys)
    store.healing(lambda: store.activity.drop(ids))  # (their recalls waiting for a commit: no file takes them)
    store.rebuild_caches()
    shutil.rmtree(store.state.path / SITE_PARSED, ignore_errors=True)  # (the next build parses the files again)
    forget_note(store)


def note(store: Storage, ids: Iterable[str], commits: Iterable[str], keys: Iterable[bytes]) -> None:
    """Write down what a purge must expire (the memories, the commits it rewrote, the text keys of their
    vectors) before any ref moves."""
    path = store.state.path / PENDING
    lines = [f"id {mid}" for mid in ids] + [f"commit {sha}" for sha in commits] + [f"key {key.hex()}" for key in keys]
    temporary = path.with_suffix(".tmp")
    temporary.write_text("\n".join(lines) + "\n", encoding="ascii")
    os.replace(temporary, path)


def forget_note(store: Storage) -> None:
    """Nothing is left to expire (the refs never moved)."""
    with contextlib.suppress(FileNotFoundError):
        (store.state.path / PENDING).unlink()


def _noted(store: Storage) -> tuple[set[str], set[bytes], set[str], set[str]] | None:
    """What :func:`note` wrote down (commits, keys), with the commits :func:`expire` found holding them, and
    the memories (None: nothing is left to expire)."""
    path = store.state.path / PENDING
    try:
        lines = path.read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    pairs = list(zip(lines[::2], lines[1::2]))
    return ({v for k, v in pairs if k == "commit"}, {bytes.fromhex(v) for k, v in pairs if k == "key"},
            {v for k, v in pairs if k == "tainted"}, {v for k, v in pairs if k == "id"})


def _tainted(root: Path, changed: set[str]) -> set[str]:
    """The commits no ref reaches any more (reflogs only) that hold a purged memory: the purge's ``changed``
    commits and every commit after them."""
    tainted: set[str] = set()
    for line in run_git(root, "rev-list", "--topo-order", "--reverse", "--parents", "--reflog", "--not", "--all"
                     ).stdout.splitlines():
        sha, *parents = line.split()
        if sha in changed or not tainted.isdisjoint(parents):
            tainted.add(sha)
    return tainted


def _drop_entries(store: Storage, tainted: set[str]) -> None:
    """Delete the reflog entries naming a ``tainted`` commit, and those alone (a reflog's other entries, a
    person's among them, stay), each log written again under its ref's lock as git does.

    (``git reflog delete`` takes one entry at a time and rewrites the log each time: hours at 20,000.)
    """
    logs = store.repo.common_dir / "logs"
    if not tainted or not logs.is_dir():
        return
    for path in sorted(p for p in logs.rglob("*") if p.is_file() and not p.name.endswith(".lock")):
        data = path.read_bytes()
        if not any(sha.encode() in data for sha in tainted):
            continue
        ref = path.relative_to(logs)
        locks = store.repo.locks
        ref_lock = locks.acquire(store.repo.common_dir / ref)  # (as git's reflog expire: the ref, then its log)
        try:
            log_lock = locks.acquire(path)
            try:
                kept, previous = [], None
                for line in path.read_bytes().splitlines(keepends=True):
                    old, new = line[:40].decode(errors="replace"), line[41:81].decode(errors="replace")
                    if new in tainted:
                        continue
                    if old in tainted:  # (as ``--rewrite`` does: the entry now follows the one kept before it)
                        line = (previous or b"0" * 40) + line[40:]
                    kept.append(line)
                    previous = line[41:81]
                log_lock.write(b"".join(kept))
                log_lock.commit()
            finally:
                log_lock.rollback()
        finally:
            ref_lock.rollback()
    store.repo.locks.drop_retired()


def _drop_objects(store: Storage, tainted: set[str]) -> None:
    """Delete the objects only ``tainted`` commits reach: every pack is written again without them (memsite's
    own packs included; a pack someone else keeps is left alone), and loose ones are deleted."""
    root, objects = store.root, store.repo.git_dir / "objects"
    if not tainted:
        return
    # (``rev-list --objects A --not B`` leaves out only what B's own trees hold: the sets are compared here)
    doomed = set(run_git(root, "rev-list", "--objects", "--no-object-names", "--ignore-missing", "--missing=allow-any",
                         "--stdin", input="".join(f"{sha}\n" for sha in tainted)).stdout.split())
    doomed -= set(run_git(root, "rev-list", "--objects", "--no-object-names", "--all", "--reflog",
                          "--indexed-objects").stdout.split())
    if not doomed:
        return
    store.repo.objects.release()
    packs = objects / "pack"
    for keep in packs.glob("*.keep"):  # (a pack memsite keeps until its ref moves: the lock is held, so none)
        if (keep_of(str(keep)) or b"").startswith(b"memsite "):
            with contextlib.suppress(FileNotFoundError):
                keep.unlink()
    kept = {p.with_suffix(".pack") for p in packs.glob("*.keep")}
    holding = [p for p in packs.glob("*.pack") if p not in kept]
    if holding:
        listed = run_git(root, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").stdout.split()
        made = run_git(root, "pack-objects", "-q", "--delta-base-offset", str(packs / "pack"),
                       input="".join(f"{sha}\n" for sha in listed if sha not in doomed)).stdout.strip()
        for pack in holding:
            if pack.stem != f"pack-{made}":
                for suffix in (".pack", ".idx", ".rev", ".bitmap", ".mtimes"):
                    with contextlib.suppress(FileNotFoundError):
                        pack.with_suffix(suffix).unlink()
        run_git(root, "prune-packed", "-q")
    for sha in doomed:
        with contextlib.suppress(FileNotFoundError):
            (objects / sha[:2] / sha[2:]).unlink()


def _erase_vectors(store: Storage, keys: set[bytes]) -> None:
    """The purged memories' vectors go from the cache; every other memory's stay."""
    if store.vectors is not None:
        store.vectors.close()
    erase(Path(store.state.path) / "vectors.sqlite3", keys)


def stashes_holding(store: Storage, changed: set[str]) -> dict[str, str]:
    """The stash entries whose commits reach one of ``changed`` (made on a commit that held the memories, or
    holding an edit of their files): {``stash@{n}``: its commit}."""
    entries = stash.entries(store.repo.common_dir)
    if not entries or not changed:
        return {}
    holding: set[str] = set()
    for line in run_git(store.root, "rev-list", "--topo-order", "--reverse", "--parents", *set(entries)
                     ).stdout.splitlines():
        sha, *parents = line.split()
        if sha in changed or not holding.isdisjoint(parents):
            holding.add(sha)
    return {f"stash@{{{n}}}": sha for n, sha in enumerate(entries) if sha in holding}


def hold_stashes(root: Path, entries: Iterable[str]) -> list[str]:
    """A ref of memsite's for each stash entry ``entries`` names (its commit), for the rewrite to take up with
    the branches; the refs' names."""
    refs = [f"{STASH_REFS}{sha}" for sha in dict.fromkeys(entries)]
    if refs:
        run_git(root, "update-ref", "--stdin", input="".join(f"update {ref} {ref.removeprefix(STASH_REFS)}\n"
                                                             for ref in refs))
    return refs


def held_stashes(root: Path) -> dict[str, str]:
    """The stash entries held for a rewrite: {their ref: the commit it names now (their own until moved)}."""
    listed = run_git(root, "for-each-ref", "--format=%(refname) %(objectname)", STASH_REFS).stdout
    return dict(line.split(" ", 1) for line in listed.splitlines())


def drop_unmoved_stashes(root: Path) -> None:
    """Let go of the stash entries held for a rewrite that never moved (a purge stopped or killed before)."""
    unmoved = [ref for ref, sha in held_stashes(root).items() if ref.endswith(f"/{sha}")]
    if unmoved:
        run_git(root, "update-ref", "--stdin", input="".join(f"delete {ref}\n" for ref in unmoved))


def _follow_stashes(store: Storage) -> set[str]:
    """The stash takes the entries written again (each keeps its place, date and who made it; its message is its
    new commit's subject, the purged words taken out); returns the commits only the old entries reached."""
    root = store.root
    held = held_stashes(root)
    moved = {ref.removeprefix(STASH_REFS): sha for ref, sha in held.items() if not ref.endswith(f"/{sha}")}
    if not moved:
        return set()
    listed = run_git(root, "log", "--no-walk=unsorted", "--format=%H %s", *moved.values()).stdout.splitlines()
    subjects = {sha: subject for sha, _, subject in (line.partition(" ") for line in listed)}
    stash.replace(store.repo.refs, moved, lambda sha: subjects.get(sha, ""))
    old = [sha for sha, kind in _kinds(root, moved).items() if kind == "commit"]  # (gone: a run killed after)
    return set(run_git(root, "rev-list", *old, "--not", "--all").stdout.split()) if old else set()


def _kinds(root: Path, shas: Iterable[str]) -> dict[str, str]:
    listed = run_git(root, "cat-file", "--batch-check=%(objectname) %(objecttype)", check=False,
                     input="".join(f"{sha}\n" for sha in shas)).stdout
    return {fields[0]: fields[1] for fields in (line.split() for line in listed.splitlines()) if len(fields) == 2}


def run_git(root: Path, *args: str, check: bool = True, input: str | None = None) -> Any:
    return Git(root).run(*args, input=input, check=check)  # (raises GitFailed: "git <command> failed in <root>: …")
