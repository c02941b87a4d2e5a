"""memsite.git.commands: git run, streamed and asked for objects gives exactly what git prints; failures say so."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from memsite.foundation.errors import RepositoryError
from memsite.git.commands import CatFile, Git, GitFailed, merge_file

from .conftest import commit_files, run, text


@pytest.mark.slow
def test_one_batch_reads_thousands_of_objects_by_any_name_git_takes(repo: Path) -> None:
    files = {f"notes/{i:04d}.md": b"note %d\n" % i * (i % 7 + 1) for i in range(1500)}
    commit_files(repo, files)
    blobs = {rel: bytes.fromhex(text(repo, "rev-parse", f"HEAD:{rel}").strip()) for rel in list(files)[:3]}
    names: list[str | bytes] = [*blobs.values(), *(f"HEAD:{rel}" for rel in files), "HEAD", "HEAD:none.md",
                                b"\x01" * 20]
    found = Git(repo).cat_file(names)
    assert len(found) == len(names)
    assert found[:3] == [("blob", files[rel]) for rel in blobs]
    assert found[3 : 3 + len(files)] == [("blob", data) for data in files.values()]  # (more than a pipe holds)
    assert found[-3] == ("commit", run(repo, "cat-file", "commit", "HEAD"))
    assert found[-2:] == [None, None]
    assert Git(repo.parent, git_dir=repo / ".git").cat_file(["HEAD:README.md"]) == [("blob", b"# notes\n")]
    (repo.parent / "nowhere").mkdir()
    with pytest.raises(GitFailed, match="cat-file --batch failed in"):
        Git(repo.parent / "nowhere").cat_file(["HEAD"])


def test_the_object_reader_reads_as_git_restarts_after_git_is_killed_and_names_a_missing_object(repo: Path) -> None:
    commit_files(repo, {"a.md": b"a\n", "b.md": b"b\n"})
    reader = CatFile(repo / ".git")
    try:
        head = bytes.fromhex(text(repo, "rev-parse", "HEAD").strip())
        assert reader.read(head) == ("commit", run(repo, "cat-file", "commit", "HEAD"))
        children = git_children()
        assert children  # its git cat-file runs on
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        blob = bytes.fromhex(text(repo, "rev-parse", "HEAD:b.md").strip())
        assert reader.read(blob) == ("blob", b"b\n")  # started again
        with pytest.raises(RepositoryError, match=f"git object {'ab' * 20} is missing; run 'git fsck'"):
            reader.read(bytes.fromhex("ab" * 20))
    finally:
        reader.close()
    assert not git_children()


def git_children() -> list[int]:
    """The git processes this process started that still run (Linux: /proc)."""
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("needs /proc")
    pids = []
    for task in os.listdir("/proc/self/task"):
        try:
            pids += [int(pid) for pid in Path(f"/proc/self/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return [pid for pid in pids if Path(f"/proc/{pid}/comm").read_text().strip().startswith("git")
            and Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] not in "ZX"]


def test_a_failing_command_says_what_git_said_and_output_keeps_bytes_that_are_no_utf8(repo: Path) -> None:
    with pytest.raises(GitFailed, match=rf"^git cat-file -t failed in {repo}: fatal: Not a valid object name nope$") \
            as failure:
        Git(repo).run("cat-file", "-t", "nope", check=True)
    assert failure.value.returncode != 0 and isinstance(failure.value, RepositoryError)
    name = b"caf\xe9.md"  # Latin-1, not UTF-8: a name git keeps as bytes
    (repo / os.fsdecode(name)).write_bytes(b"x\n")
    run(repo, "add", "--", os.fsdecode(name))
    assert os.fsdecode(name) in Git(repo).run("ls-files", "-z").stdout.split("\0")
    assert Git(repo).run("ls-files", "-z", text=False).stdout.split(b"\0")[:-1] == [b"README.md", name]
    assert Git(repo).run("var", "GIT_AUTHOR_IDENT", env={"GIT_AUTHOR_NAME": "Planner"}).stdout.startswith("Planner <")


@pytest.mark.slow
def test_streams_and_logs_give_gits_records_and_leaving_early_ends_git(repo: Path) -> None:
    commit_files(repo, {f"f/{i:04d}.md": b"%d\n" % i for i in range(3000)}, "many")
    commit_files(repo, {"f/0001.md": b"changed\n"}, "one")
    git = Git(repo)
    assert list(git.stream("ls-files", "-z", sep=b"\x00")) == run(repo, "ls-files", "-z").split(b"\x00")[:-1]
    assert list(git.log("HEAD", "--format=%H %s", paths=["f/0001.md"])) == \
        run(repo, "log", "--format=%H %s", "HEAD", "--", "f/0001.md").splitlines()
    record = next(iter(git.stream("log", "--format=%H", "--all")))  # the rest left unread
    assert record == run(repo, "rev-parse", "HEAD").strip()
    assert not git_children()
    assert git.toplevel() == repo and Git(repo / "f").toplevel() == repo
    assert Git(repo.parent).toplevel() is None


def test_configuration_is_read_as_git_config_lists_it(repo: Path) -> None:
    run(repo, "config", "memsite.Agent", "planner")
    run(repo, "config", "merge.memsite.driver", "memsite merge %O %A %B")
    run(repo, "config", "--add", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*")
    run(repo, "config", "--add", "remote.origin.fetch", "+refs/notes/*:refs/notes/*")
    config = Git(repo).config()
    assert config.get("memsite.agent") == config.get("MEMSITE.AGENT") == "planner"
    assert config.get("merge.memsite.driver") == text(repo, "config", "--get", "merge.memsite.driver").strip()
    assert config.get("remote.origin.fetch") == text(repo, "config", "--get", "remote.origin.fetch").strip()  # the last
    assert config.local("memsite.agent") == "planner" and config.local("user.name") is None
    assert config.get("no.such") is None and "no.such" not in config


def test_a_file_merges_as_git_merge_file_merges_it(tmp_path: Path) -> None:
    base, ours, theirs = tmp_path / "base", tmp_path / "ours", tmp_path / "theirs"
    base.write_text("one\ntwo\nthree\n")
    ours.write_text("one, ours\ntwo\nthree\n")
    theirs.write_text("one\ntwo\nthree, theirs\n")
    assert merge_file(ours, base, theirs, in_place=False) == (b"one, ours\ntwo\nthree, theirs\n", True)
    theirs.write_text("one, theirs\ntwo\nthree\n")
    merged, clean = merge_file(ours, base, theirs, labels=("mine", "base", "yours"), in_place=False)
    assert not clean and b"<<<<<<< mine\none, ours\n=======\none, theirs\n>>>>>>> yours\n" in merged
    assert merge_file(ours, base, theirs, labels=("mine", "base", "yours")) == (b"", False)
    assert ours.read_bytes() == merged  # in place: the result, conflict markers and all


def test_background_maintenance_runs_at_the_lowest_priority_with_what_it_starts(repo: Path) -> None:
    ask = ("-c", "alias.niceness=!nice", "niceness")  # (a shell git starts, as a detaching 'git gc' starts its own)
    assert Git(repo).run(*ask, check=True).stdout.strip() == str(os.nice(0))
    assert Git(repo).run(*ask, idle=True, check=True).stdout.strip() == "19"
