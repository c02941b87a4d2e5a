"""memsite.git.commits: commit objects memsite writes are the ones git commit-tree writes, and the history it reads
(trees, parents, the files a commit holds, the last commit that changed each path) is the history git shows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsite.git import Author, ObjectDatabase
from memsite.git.commits import Commits
from memsite.git.settings import GitSettings

from .conftest import WHEN, commit_files, fsck, run, text


@pytest.fixture
def commits(repo: Path) -> Iterator[Commits]:
    objects = ObjectDatabase(repo / ".git" / "objects", GitSettings())
    try:
        yield Commits(objects)
    finally:
        objects.close()


NAMES = st.text(st.characters(whitelist_categories=("L", "N")), min_size=1, max_size=12)
MESSAGES = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=80)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES, message=MESSAGES, when=st.integers(0, 4_000_000_000), merge=st.booleans())
def test_a_commit_memsite_writes_is_the_commit_git_commit_tree_writes(repo: Path, commits: Commits, name: str,
                                                                      message: str, when: int, merge: bool) -> None:
    tree = text(repo, "rev-parse", "HEAD^{tree}").strip()
    parents = [text(repo, "rev-parse", "HEAD").strip()]
    if merge:
        parents.append(text(repo, "commit-tree", tree, "-m", "another").strip())
    author = Author.writer(name)
    ours = commits.write(bytes.fromhex(tree), parents, message, author, when)
    ident = {"GIT_AUTHOR_NAME": author.name, "GIT_AUTHOR_EMAIL": author.email, "GIT_AUTHOR_DATE": f"@{when} +0000",
             "GIT_COMMITTER_NAME": author.name, "GIT_COMMITTER_EMAIL": author.email,
             "GIT_COMMITTER_DATE": f"@{when} +0000"}
    theirs = run(repo, "commit-tree", tree, *(arg for p in parents for arg in ("-p", p)), "-F", "-",
                 input=(message.rstrip("\n") + "\n").encode(), **ident).decode().strip()
    assert ours == theirs
    assert commits.root_tree(ours) == bytes.fromhex(tree) and commits.parents(ours) == parents
    run(repo, "fsck", "--strict", "--no-dangling", ours)


def test_history_memsite_reads_is_the_history_git_shows(repo: Path, commits: Commits) -> None:
    first = commit_files(repo, {"notes/a.md": b"a1\n", "notes/b.md": b"b1\n", "shared.md": b"s\n"}, "one")
    run(repo, "checkout", "-q", "-b", "side")
    side = commit_files(repo, {"notes/b.md": b"b, side\n"}, "side")
    run(repo, "checkout", "-q", "main")
    main = commit_files(repo, {"notes/a.md": b"a2\n"}, "main")
    run(repo, "merge", "-q", "--no-edit", "side")  # takes side's b.md: the merge itself changes no path of its own
    merged = text(repo, "rev-parse", "HEAD").strip()
    run(repo, "checkout", "-q", "-b", "later", "side")
    other = commit_files(repo, {"shared.md": b"s, later\n"}, "later")
    run(repo, "checkout", "-q", "main")
    run(repo, "merge", "-q", "--no-commit", "later")
    (repo / "shared.md").write_text("s, settled in the merge\n")  # a merge with a version of its own
    run(repo, "commit", "-q", "-am", "settled")
    tip = text(repo, "rev-parse", "HEAD").strip()
    assert commits.parents(tip) == text(repo, "rev-parse", f"{tip}^@").split() == [merged, other]
    assert commits.header(tip)[b"author"] == [text(repo, "log", "-1", "--format=%an <%ae> %at +0000", tip).strip()
                                              .encode()]
    assert commits.read_file(side, "notes/b.md") == run(repo, "show", f"{side}:notes/b.md")
    assert commits.read_file(tip, "notes") is None and commits.read_file(tip, "none.md") is None
    assert commits.files_under(tip, "notes") == {path: run(repo, "show", f"{tip}:{path}")
                                                 for path in text(repo, "ls-tree", "-r", "--name-only", tip,
                                                                  "notes").split()}
    assert commits.files_under(tip, "none") == {}
    assert commits.parents(main) == [first]
    for commit in (first, merged, tip):  # the first line of the message, and the committer's time
        assert commits.subject(commit) == (text(repo, "log", "-1", "--format=%s", commit).strip(),
                                           int(text(repo, "log", "-1", "--format=%ct", commit)))
    fsck(repo)


def test_a_change_that_leaves_the_tree_as_it_was_writes_no_commit(repo: Path, commits: Commits) -> None:
    head = text(repo, "rev-parse", "HEAD").strip()
    base = commits.root_tree(head)
    entry = commits.objects.lookup(base, "README.md")
    assert commits.write_change(base, {"README.md": entry}, head, "nothing", Author.writer("planner"), WHEN) is None
    removed = commits.write_change(base, {"README.md": None}, head, "empty", Author.writer("planner"), WHEN)
    assert removed is not None
    assert text(repo, "ls-tree", removed) == "" and text(repo, "rev-parse", f"{removed}^{{tree}}").strip() == \
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree
