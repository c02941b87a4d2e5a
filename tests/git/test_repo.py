"""memsite.git.repo: commits memsite writes are what git shows, on a checked-out branch and beside it, and what
memsite reads back from history is what git says."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsite.errors import InvalidInput, RepositoryError
from memsite.git import Author, RefMoved, Repository
from memsite.git.remote import merge_trees

from .conftest import commit_files, fsck, run, text

WHEN = 1_764_230_400
PLANNER = Author.writer("planner")


@pytest.fixture
def opened(repo: Path) -> Iterator[Repository]:
    (repo / ".git" / "info" / "exclude").write_text(".memsite/\n")  # its state folder (memsite init ignores it)
    repository = Repository(repo)
    try:
        yield repository
    finally:
        repository.close()


def commit(repository: Repository, files: dict[str, bytes | None], message: str, *, ref: str = "refs/heads/main",
           when: int = WHEN) -> str | None:
    with repository.locked():
        return repository.commit(ref, repository.refs.read(ref), files, message=message, author=PLANNER, when=when)


def test_a_commit_on_the_checked_out_branch_is_what_git_shows_with_index_and_files_in_step(
        opened: Repository, repo: Path) -> None:
    commit_files(repo, {"a/old.md": b"old\n", "a/gone.md": b"gone\n"})
    parent = text(repo, "rev-parse", "HEAD").strip()
    sha = commit(opened, {"a/old.md": b"old, edited\n", "a/gone.md": None, "b/c/new.md": b"new\n"},
                 "Remember a thing\n\nMemory-Id: m1")
    assert sha == text(repo, "rev-parse", "HEAD").strip()
    assert text(repo, "log", "-1", "--format=%P|%an|%ae|%at|%cn|%B", "HEAD").strip() == \
        f"{parent}|planner|planner@memsite.invalid|{WHEN}|planner|Remember a thing\n\nMemory-Id: m1"
    assert text(repo, "diff-tree", "-r", "--name-status", "--no-commit-id", "HEAD").splitlines() == [
        "D\ta/gone.md", "M\ta/old.md", "A\tb/c/new.md"]
    assert (repo / "b" / "c" / "new.md").read_bytes() == b"new\n" and not (repo / "a" / "gone.md").exists()
    assert text(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert text(repo, "diff-index", "--cached", "HEAD") == ""
    assert text(repo, "reflog", "-1", "--format=%gs", "main") == "memsite: Remember a thing\n"
    fsck(repo)


def test_a_commit_to_a_branch_not_checked_out_moves_only_that_branch(opened: Repository, repo: Path) -> None:
    run(repo, "branch", "agent/planner")
    (repo / "README.md").write_text("# notes, being edited by a person\n")
    status = text(repo, "status", "--porcelain")
    sha = commit(opened, {"memory.md": b"on the agent's branch\n"}, "Remember", ref="refs/heads/agent/planner")
    assert text(repo, "rev-parse", "agent/planner").strip() == sha
    assert text(repo, "show", "agent/planner:memory.md") == "on the agent's branch\n"
    assert not (repo / "memory.md").exists() and text(repo, "status", "--porcelain") == status
    fsck(repo)


def test_a_commit_that_changes_nothing_makes_none(opened: Repository, repo: Path) -> None:
    head = text(repo, "rev-parse", "HEAD")
    assert commit(opened, {"README.md": b"# notes\n"}, "Same bytes") is None
    assert text(repo, "rev-parse", "HEAD") == head


def test_a_write_on_a_branch_git_moved_meanwhile_or_over_a_persons_edit_is_refused_and_changes_nothing(
        opened: Repository, repo: Path) -> None:
    stale = text(repo, "rev-parse", "HEAD").strip()
    moved = commit_files(repo, {"by-hand.md": b"by hand\n"})
    with opened.locked(), pytest.raises(RefMoved):
        opened.commit("refs/heads/main", stale, {"memory.md": b"m\n"}, message="late", author=PLANNER, when=WHEN)
    (repo / "by-hand.md").write_text("edited, not committed\n")
    with pytest.raises(InvalidInput, match="by-hand.md"):
        commit(opened, {"by-hand.md": b"memsite's version\n"}, "over an edit")
    assert text(repo, "rev-parse", "HEAD").strip() == moved
    assert (repo / "by-hand.md").read_text() == "edited, not committed\n" and not (repo / "memory.md").exists()
    assert text(repo, "status", "--porcelain") == " M by-hand.md\n"


def test_history_memsite_reads_is_the_history_git_shows(opened: Repository, repo: Path) -> None:
    first = commit(opened, {"notes/a.md": b"a1\n", "notes/b.md": b"b1\n"}, "One\n\nMemory-Id: one", when=WHEN)
    second = commit(opened, {"notes/a.md": b"a2\n"}, "Two\n\nMemory-Id: two", when=WHEN + 1)
    third = commit_files(repo, {"other/c.md": b"c\n"}, "Three by hand")
    assert opened.resolve("HEAD~2") == first and opened.resolve("main") == third
    with pytest.raises(RepositoryError, match="'nope' is not a commit"):
        opened.resolve("nope")
    assert opened.parents(third) == text(repo, "rev-parse", f"{third}^@").split()
    assert opened.root_tree(second) == bytes.fromhex(text(repo, "rev-parse", f"{second}^{{tree}}").strip())
    assert opened.read_file(second, "notes/a.md") == run(repo, "show", f"{second}:notes/a.md")
    assert opened.read_file(second, "notes") is None and opened.read_file(second, "none.md") is None
    assert opened.files_under(third, "notes") == {path: run(repo, "show", f"{third}:{path}")
                                                  for path in text(repo, "ls-tree", "-r", "--name-only", third,
                                                                   "notes").split()}
    paths = ["notes/a.md", "notes/b.md", "other/c.md", "README.md"]
    assert opened.last_commits(paths, None, third) == {
        path: text(repo, "log", "-1", "--format=%H", third, "--", path).strip() for path in paths}
    assert opened.last_commits(paths, None, third, limit=2) is None  # a longer walk than allowed
    changes = sorted((path, a.sha.hex() if a else None, b.sha.hex() if b else None)
                     for path, a, b in opened.diff_trees(opened.root_tree(first), opened.root_tree(third)))
    assert changes == sorted(by_git_diff(repo, first, third))
    assert changes == sorted((path, a.sha.hex() if a else None, b.sha.hex() if b else None)
                             for path, a, b in opened.objects.diff(opened.root_tree(first), opened.root_tree(third)))
    assert opened.commit_with_trailer("Memory-Id", "two", since=first)
    assert not opened.commit_with_trailer("Memory-Id", "one", since=first)
    assert opened.message_with_trailer("Memory-Id", "one", since=None) == "One\n\nMemory-Id: one\n"


def by_git_diff(repo: Path, old: str, new: str) -> list[tuple[str, str | None, str | None]]:
    out = []
    for line in text(repo, "diff-tree", "-r", "--no-renames", old, new).splitlines():
        info, path = line.split("\t")
        _, _, a, b, _ = info.split()
        out.append((path, None if set(a) == {"0"} else a, None if set(b) == {"0"} else b))
    return out


def test_a_merge_moves_the_checked_out_branch_as_git_merge_would(opened: Repository, repo: Path) -> None:
    run(repo, "branch", "agent/reviewer")
    ahead = commit(opened, {"reviewed.md": b"reviewed\n"}, "Review", ref="refs/heads/agent/reviewer")
    base = text(repo, "rev-parse", "HEAD").strip()
    assert ahead is not None
    with opened.locked():  # a fast-forward: the branch takes the other's commit
        assert opened.merge("refs/heads/main", base, ahead, None, message="m", author=PLANNER, when=WHEN) == ahead
    assert (repo / "reviewed.md").read_text() == "reviewed\n" and text(repo, "status", "--porcelain") == ""
    mine = commit(opened, {"mine.md": b"mine\n"}, "Mine")
    theirs = commit(opened, {"theirs.md": b"theirs\n"}, "Theirs", ref="refs/heads/agent/reviewer")
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
