"""memsite.git.remote: fetches, pushes and tree merges agree with what git shows on both sides of a remote."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsite.foundation.errors import RepositoryError
from memsite.git.remote import Remote, Unreachable, ahead_behind, count, is_ancestor, merge_trees

from .conftest import commit_files, fsck, run, text


@pytest.fixture
def clones(tmp_path: Path, repo: Path) -> tuple[Path, Path, Path]:
    """(a bare remote holding ``repo``'s main, ``repo`` with it as origin, a second clone of it)."""
    remote = tmp_path / "remote.git"
    run(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    run(repo, "remote", "add", "origin", str(remote))
    run(repo, "fetch", "-q", "origin")
    other = tmp_path / "other"
    run(tmp_path, "clone", "-q", str(remote), str(other))
    return remote, repo, other


def test_a_push_lands_refs_one_by_one_and_a_branch_someone_moved_first_is_rejected(
        clones: tuple[Path, Path, Path]) -> None:
    remote, ours, theirs = clones
    commit_files(theirs, {"theirs.md": b"theirs\n"})
    run(theirs, "push", "-q", "origin", "main")
    mine = commit_files(ours, {"mine.md": b"mine\n"})
    run(ours, "branch", "agent/planner")
    result = Remote(ours, "origin").push({"main": mine, "agent/planner": mine})
    assert result["agent/planner"].ok and not result["agent/planner"].rejected
    assert not result["main"].ok and result["main"].rejected  # not a fast-forward: someone pushed first
    assert text(remote, "rev-parse", "refs/heads/agent/planner").strip() == mine
    assert text(remote, "rev-parse", "refs/heads/main").strip() == text(theirs, "rev-parse", "HEAD").strip()
    fsck(remote)


def test_a_push_the_remotes_hook_declines_says_what_the_hook_said(clones: tuple[Path, Path, Path]) -> None:
    remote, ours, _ = clones
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'memories are reviewed first' >&2\nexit 1\n")
    hook.chmod(0o755)
    mine = commit_files(ours, {"mine.md": b"mine\n"})
    [pushed] = Remote(ours, "origin").push({"main": mine}).values()
    assert not pushed.ok and not pushed.rejected
    assert "memories are reviewed first" in pushed.reason


def test_fetch_brings_branches_and_patterns_prunes_and_names_what_the_remote_lacks(
        clones: tuple[Path, Path, Path]) -> None:
    remote, ours, theirs = clones
    for name in ("agent/a", "agent/b"):
        run(theirs, "checkout", "-q", "-b", name, "main")
        commit_files(theirs, {f"{name}.md": name.encode()})
        run(theirs, "push", "-q", "origin", name)
    origin = Remote(ours, "origin")
    assert origin.fetch(["main", "gone"], ["agent/*"]) == {"gone"}
    listed = text(ours, "for-each-ref", "--format=%(refname) %(objectname)", "refs/remotes/origin/agent")
    assert listed == text(remote, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/agent") \
        .replace("refs/heads/", "refs/remotes/origin/")
    assert origin.unmerged("agent/*", "main") == {
        "agent/a": text(remote, "rev-parse", "agent/a").strip(),
        "agent/b": text(remote, "rev-parse", "agent/b").strip()}
    run(remote, "update-ref", "-d", "refs/heads/agent/a")
    origin.fetch([], ["agent/*"])
    assert text(ours, "for-each-ref", "--format=%(refname)", "refs/remotes/origin/agent").split() == [
        "refs/remotes/origin/agent/b"]


def test_a_remote_that_cannot_be_reached_or_does_not_exist_is_said_in_one_line(tmp_path: Path, repo: Path) -> None:
    run(repo, "remote", "add", "lost", str(tmp_path / "nowhere.git"))
    with pytest.raises(Unreachable, match="cannot reach the remote lost"):
        Remote(repo, "lost").fetch(["main"])
    with pytest.raises(RepositoryError, match="no git remote named 'nope'; this clone has lost"):
        Remote(repo, "nope").fetch(["main"])


def merged_by_git(repo: Path, ours: str, theirs: str) -> tuple[str | None, list[str]]:
    """(the tree of ``git merge``, the paths it left in conflict) in a scratch worktree of ``repo``."""
    scratch = repo.parent / f"scratch-{ours[:8]}-{theirs[:8]}"
    run(repo, "worktree", "add", "-q", "--detach", str(scratch), ours)
    try:
        run(scratch, "merge", "-q", "--no-edit", theirs, check=False)
        conflicts = text(scratch, "diff", "--name-only", "--diff-filter=U").split()
        tree = None if conflicts else text(scratch, "rev-parse", "HEAD^{tree}").strip()
        return tree, conflicts
    finally:
        run(repo, "worktree", "remove", "--force", str(scratch))


def test_a_tree_merge_is_the_tree_git_merge_makes_and_conflicts_are_the_paths_git_leaves(repo: Path) -> None:
    base = commit_files(repo, {"a.md": b"a\n", "b.md": b"b\n", "shared.md": b"line one\nline two\n"})
    run(repo, "checkout", "-q", "-b", "side")
    theirs = commit_files(repo, {"b.md": b"b, theirs\n", "new.md": b"new\n"})
    run(repo, "checkout", "-q", "main")
    ours = commit_files(repo, {"a.md": b"a, ours\n"})
    merged = merge_trees(repo, ours, theirs)
    assert merged.conflicts == () and merged.tree is not None
    assert merged_by_git(repo, ours, theirs) == (merged.tree.hex(), [])
    clash = commit_files(repo, {"shared.md": b"line one, ours\nline two\n"})
    run(repo, "checkout", "-q", "side")
    other = commit_files(repo, {"shared.md": b"line one, theirs\nline two\n"})
    conflicted = merge_trees(repo, clash, other)
    assert conflicted.tree is None
    assert list(conflicted.conflicts) == merged_by_git(repo, clash, other)[1] == ["shared.md"]
    # Counting commits as git's rev-list does.
    assert ahead_behind(repo, clash, other) == tuple(
        int(n) for n in text(repo, "rev-list", "--left-right", "--count", f"{clash}...{other}").split())
    assert is_ancestor(repo, base, clash) and not is_ancestor(repo, clash, other)
    assert count(repo, other, [base]) == int(text(repo, "rev-list", "--count", other, f"^{base}"))
