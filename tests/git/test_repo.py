"""memsite.git.repo, the door into git: branches moved by commits and merges as git shows them, refusals that
change nothing (a moved branch, a person's edit, a rebase, a branch another worktree has), and what it resolves,
finds and diffs as git says.

(The working tree and index of a commit on the checked-out branch: test_checkout.py; history reads:
test_commits.py.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from memsite.foundation.errors import InvalidInput, RepositoryError
from memsite.git import Author, RefMoved, Repository
from memsite.git.remote import merge_trees

from .conftest import WHEN, commit_files, fsck, memsite_commit, run, text

PLANNER = Author.writer("planner")


def test_a_commit_to_a_branch_not_checked_out_moves_only_that_branch(opened: Repository, repo: Path) -> None:
    run(repo, "branch", "agent/planner")
    (repo / "README.md").write_text("# notes, being edited by a person\n")
    status = text(repo, "status", "--porcelain")
    sha = memsite_commit(opened, {"memory.md": b"on the agent's branch\n"}, "Remember", ref="refs/heads/agent/planner")
    assert text(repo, "rev-parse", "agent/planner").strip() == sha
    assert text(repo, "show", "agent/planner:memory.md") == "on the agent's branch\n"
    assert not (repo / "memory.md").exists() and text(repo, "status", "--porcelain") == status
    fsck(repo)


def test_a_commit_that_changes_nothing_makes_none(opened: Repository, repo: Path) -> None:
    head = text(repo, "rev-parse", "HEAD")
    assert memsite_commit(opened, {"README.md": b"# notes\n"}, "Same bytes") is None
    assert text(repo, "rev-parse", "HEAD") == head


def test_a_write_on_a_branch_git_moved_meanwhile_or_over_a_persons_edit_is_refused_and_changes_nothing(
        opened: Repository, repo: Path) -> None:
    stale = text(repo, "rev-parse", "HEAD").strip()
    moved = commit_files(repo, {"by-hand.md": b"by hand\n"})
    with opened.locked(), pytest.raises(RefMoved):
        opened.commit("refs/heads/main", stale, {"memory.md": b"m\n"}, message="late", author=PLANNER, when=WHEN)
    (repo / "by-hand.md").write_text("edited, not committed\n")
    with pytest.raises(InvalidInput, match="by-hand.md"):
        memsite_commit(opened, {"by-hand.md": b"memsite's version\n"}, "over an edit")
    assert text(repo, "rev-parse", "HEAD").strip() == moved
    assert (repo / "by-hand.md").read_text() == "edited, not committed\n" and not (repo / "memory.md").exists()
    assert text(repo, "status", "--porcelain") == " M by-hand.md\n"


def test_a_merge_moves_the_checked_out_branch_as_git_merge_would(opened: Repository, repo: Path) -> None:
    run(repo, "branch", "agent/reviewer")
    ahead = memsite_commit(opened, {"reviewed.md": b"reviewed\n"}, "Review", ref="refs/heads/agent/reviewer")
    base = text(repo, "rev-parse", "HEAD").strip()
    assert ahead is not None
    with opened.locked():  # a fast-forward: the branch takes the other's commit
        assert opened.merge("refs/heads/main", base, ahead, None, message="m", author=PLANNER, when=WHEN) == ahead
    assert (repo / "reviewed.md").read_text() == "reviewed\n" and text(repo, "status", "--porcelain") == ""
    mine = memsite_commit(opened, {"mine.md": b"mine\n"}, "Mine")
    theirs = memsite_commit(opened, {"theirs.md": b"theirs\n"}, "Theirs", ref="refs/heads/agent/reviewer")
    assert mine is not None and theirs is not None
    tree = merge_trees(repo, mine, theirs).tree
    with opened.locked():
        merged = opened.merge("refs/heads/main", mine, theirs, tree, message="Merge the reviewer's memories",
                              author=PLANNER, when=WHEN)
    assert text(repo, "rev-parse", f"{merged}^@").split() == [mine, theirs]
    assert text(repo, "rev-parse", "HEAD^{tree}").strip() == tree.hex()  # type: ignore[union-attr]
    assert sorted(os.listdir(repo)) == [".git", ".memsite", "README.md", "mine.md", "reviewed.md", "theirs.md"]
    assert text(repo, "status", "--porcelain") == ""
    fsck(repo)


def test_a_rebase_stopped_on_a_conflict_is_named_and_no_write_starts(opened: Repository, repo: Path) -> None:
    commit_files(repo, {"shared.md": b"base\n"})
    run(repo, "checkout", "-q", "-b", "side")
    commit_files(repo, {"shared.md": b"side\n"})
    run(repo, "checkout", "-q", "main")
    commit_files(repo, {"shared.md": b"main\n"})
    run(repo, "checkout", "-q", "side")
    run(repo, "rebase", "-q", "main", check=False)
    assert opened.in_progress() == "a rebase is in progress: finish it with git rebase --continue or --abort"
    with pytest.raises(RepositoryError, match="a rebase is in progress"):
        opened.check_writable("refs/heads/side")
    run(repo, "rebase", "--abort")
    assert opened.in_progress() is None and opened.branch() == "refs/heads/side"


def test_what_memsite_resolves_finds_and_diffs_is_what_git_says(opened: Repository, repo: Path) -> None:
    first = memsite_commit(opened, {"notes/a.md": b"a1\n", "notes/b.md": b"b1\n"}, "One\n\nMemory-Id: one")
    memsite_commit(opened, {"notes/a.md": b"a2\n"}, "Two\n\nMemory-Id: two", when=WHEN + 1)
    third = commit_files(repo, {"other/c.md": b"c\n"}, "Three by hand")
    assert first is not None
    assert opened.resolve("HEAD~2") == first and opened.resolve("main") == third
    with pytest.raises(RepositoryError, match="'nope' is not a commit"):
        opened.resolve("nope")
    old, new = opened.root_tree(first), opened.root_tree(third)
    assert old is not None and new is not None
    changes = sorted((path, a.sha.hex() if a else None, b.sha.hex() if b else None)
                     for path, a, b in opened.diff_trees(old, new))
    assert changes == sorted(by_git_diff(repo, first, third))
    assert changes == sorted((path, a.sha.hex() if a else None, b.sha.hex() if b else None)
                             for path, a, b in opened.objects.diff(old, new))
    assert opened.commit_with_trailer("Memory-Id", "two", since=first)
    assert not opened.commit_with_trailer("Memory-Id", "one", since=first)
    assert opened.message_with_trailer("Memory-Id", "one", since=None) == "One\n\nMemory-Id: one\n"


def by_git_diff(repo: Path, old: str, new: str) -> list[tuple[str, str | None, str | None]]:
    out = []
    for line in text(repo, "diff-tree", "-r", "--no-renames", old, new).splitlines():
        info, path = line.split("\t")
        _, _, a, b, status = info.split()
        out.append((path, None if status == "A" else a, None if status == "D" else b))
    return out


def test_a_branch_checked_out_in_another_worktree_is_refused_as_git_refuses_to_move_it(opened: Repository,
                                                                                       repo: Path) -> None:
    run(repo, "branch", "agent/reviewer")
    other = repo.parent / "reviewer"
    run(repo, "worktree", "add", "-q", str(other), "agent/reviewer")
    by_git = subprocess.run(["git", "branch", "-f", "agent/reviewer", "HEAD"], cwd=repo, capture_output=True, text=True)
    assert by_git.returncode != 0 and str(other) in by_git.stderr
    with pytest.raises(RepositoryError, match=f"agent/reviewer: is checked out in the worktree {other}"):
        opened.check_writable("refs/heads/agent/reviewer")
    opened.check_writable("refs/heads/main")  # (its own branch is fine)
