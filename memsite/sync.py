"""Sharing one memory through an ordinary git remote: sync, and proposals for review.

``sync`` fetches the remote branch, merges it into the local one with
memsite's merge drivers (world state key by key, memory files with recall
counts added up), and pushes; a push rejected because someone pushed first
is retried from the fetch. It never force-pushes and never drops a local
commit: local commits are merged, not rebased away, and a merge that cannot
be resolved is aborted, leaving the branch as it was.

The repository lock is held throughout, so memsite writers in this clone
wait rather than commit under a merge.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from .errors import ConflictError, RepositoryError
from .git import Author, git_environment
from .store import Store

ATTEMPTS = 8


@dataclass(frozen=True)
class SyncResult:
    remote: str
    branch: str
    fetched: int  # commits taken from the remote
    pushed: int  # local commits the remote did not have
    attempts: int
    created: bool = False  # the branch was not on the remote: the push created it


def sync(store: Store, remote: str = "origin", branch: str | None = None) -> SyncResult:
    """Merge the remote's memory into this clone's and push the result.

    Raises:
        ConflictError: the same world-state key or memory text was changed
            differently on both sides; the merge was aborted, nothing pushed.
        RepositoryError: no such remote, the remote cannot be reached, or
            it keeps rejecting the push.
    """
    repo = store.repo
    with repo.locked():
        local = store._writable_ref().removeprefix("refs/heads/")
        if repo.refs.head_target() != store.ref:  # git merges in the working tree
            raise RepositoryError(f"sync merges {local} in the working tree, where {repo.branch()} is checked out; "
                                  f"check out {local} first (git checkout {local})")
        target = branch or local
        _check_remote(store, remote)
        for attempt in range(1, ATTEMPTS + 1):
            exists = _on_remote(store, remote, target)
            fetched = 0
            if exists:
                _git(store, "fetch", "--quiet", remote, f"+refs/heads/{target}:refs/remotes/{remote}/{target}")
                theirs = f"refs/remotes/{remote}/{target}"
                fetched = int(_git(store, "rev-list", "--count", f"HEAD..{theirs}").stdout)
                if fetched:
                    _merge(store, theirs, remote, target)
                pushed = int(_git(store, "rev-list", "--count", f"{theirs}..HEAD").stdout)
            else:
                pushed = int(_git(store, "rev-list", "--count", "HEAD").stdout)
            if not pushed:
                return SyncResult(remote, target, fetched, 0, attempt)
            push = _git(store, "push", "--quiet", remote, f"HEAD:refs/heads/{target}", check=False)
            if push.returncode == 0:
                return SyncResult(remote, target, fetched, pushed, attempt, created=not exists)
            if "rejected" not in push.stderr and "fetch first" not in push.stderr and "non-fast-forward" not in push.stderr:
                raise RepositoryError(f"git push {remote} {target} failed: {push.stderr.strip()}")
            time.sleep(0.05 * attempt)  # someone pushed first: fetch their work and try again
        raise RepositoryError(f"{remote}/{target} kept moving: the push was rejected {ATTEMPTS} times; "
                              "run 'memsite sync' again")


def _check_remote(store: Store, remote: str) -> None:
    """Refuse a remote this clone does not have, in one line."""
    names = _git(store, "remote").stdout.split()
    if not names:
        raise RepositoryError(f"{store.root}: no git remote is configured to sync with; add one "
                              "(git remote add origin URL) and run 'memsite sync' again")
    if remote not in names:
        raise RepositoryError(f"no git remote named {remote!r}; this clone has {', '.join(names)} "
                              "(memsite sync --remote NAME)")


def _on_remote(store: Store, remote: str, branch: str) -> bool:
    """Whether ``branch`` is on ``remote``; an unreachable remote is an error, not a missing branch."""
    result = _git(store, "ls-remote", "--exit-code", "--heads", remote, branch, check=False)
    if result.returncode == 0:
        return True
    if result.returncode == 2:  # reached the remote: no such branch there (yet)
        return False
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    reason = next((line for line in lines if line.startswith("fatal:")), lines[0] if lines else "no reason given")
    raise RepositoryError(f"cannot reach the remote {remote} ({reason.removeprefix('fatal: ')}); "
                          "nothing was fetched or pushed")


def _merge(store: Store, theirs: str, remote: str, target: str) -> None:
    merge = _git(store, "-c", f"user.name={store.agent}", "-c", f"user.email={Author.writer(store.agent).email}",
                 "merge", "--no-edit", "--quiet", "-m", f"Sync memory with {remote}/{target}", theirs, check=False)
    if merge.returncode == 0:
        return
    conflicted = _git(store, "diff", "--name-only", "--diff-filter=U", check=False).stdout.split()
    _git(store, "merge", "--abort", check=False)
    if conflicted:
        raise ConflictError(f"merging {remote}/{target} left conflicts in {', '.join(conflicted)}: both sides "
                            "changed the same key or text differently; the merge was aborted and nothing pushed. "
                            "Merge by hand (git merge " + theirs + "), resolve, commit, then sync again")
    raise RepositoryError(f"git merge {theirs} failed: {merge.stderr.strip() or merge.stdout.strip()}")


def agent_branch(agent: str) -> str:
    return f"agent/{agent}"


def use_agent_branch(store: Store) -> str:
    """Check out ``agent/<name>`` (created from the current branch) and write there; for ``propose``, whose merge
    needs the branch in the working tree. (``MemoryStore(agent_branch=True)`` writes there without a checkout.)"""
    name = agent_branch(store.agent)
    with store.repo.locked():
        if store.repo.refs.head_target() != f"refs/heads/{name}":
            exists = store.repo.refs.read(f"refs/heads/{name}") is not None
            _git(store, "checkout", "--quiet", *([name] if exists else ["-b", name]))
        store.ref = f"refs/heads/{name}"
    return name


def propose(store: Store, remote: str = "origin", base: str = "main") -> tuple[str, str]:
    """Push this agent's branch and return (branch, the pull request's body: the change report).

    Raises:
        RepositoryError: the branch cannot be pushed.
    """
    from .review import compare, markdown

    name = use_agent_branch(store)
    sync(store, remote, name)
    _git(store, "fetch", "--quiet", remote, f"+refs/heads/{base}:refs/remotes/{remote}/{base}", check=False)
    start = f"refs/remotes/{remote}/{base}"
    if _git(store, "rev-parse", "--verify", "--quiet", start, check=False).returncode != 0:
        start = base
    return name, markdown(compare(store.root, start, name))


def _git(store: Store, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["git", *args], cwd=store.root, capture_output=True, text=True, env=git_environment())
    if check and result.returncode != 0:
        raise RepositoryError(f"git {' '.join(args[:2])} failed in {store.root}: {result.stderr.strip()}")
    return result
