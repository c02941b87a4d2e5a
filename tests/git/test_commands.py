"""memsite.git.commands: git run, streamed and asked for objects gives exactly what git prints, failures say so."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from memsite.errors import RepositoryError
from memsite.git.commands import CatFile, GitFailed, cat_file_batch, run_git, stream_git

from .conftest import commit_files, run, text


def test_one_batch_reads_thousands_of_objects_by_any_name_git_takes(repo: Path) -> None:
    files = {f"notes/{i:04d}.md": b"note %d\n" % i * (i % 7 + 1) for i in range(1500)}
    commit_files(repo, files)
    blobs = {rel: bytes.fromhex(text(repo, "rev-parse", f"HEAD:{rel}").strip()) for rel in list(files)[:3]}
    names: list[str | bytes] = [*blobs.values(), *(f"HEAD:{rel}" for rel in files), "HEAD", "HEAD:none.md",
                                b"\x01" * 20]
    found = cat_file_batch(repo / ".git", names)
    assert len(found) == len(names)
    assert found[:3] == [("blob", files[rel]) for rel in blobs]
    assert found[3 : 3 + len(files)] == [("blob", data) for data in files.values()]  # (more than a pipe holds)
    assert found[-3] == ("commit", run(repo, "cat-file", "commit", "HEAD"))
    assert found[-2:] == [None, None]


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
    with pytest.raises(GitFailed, match=r"^git cat-file -t failed: fatal: Not a valid object name nope$") as failure:
        run_git(repo, "cat-file", "-t", "nope", check=True)
    assert failure.value.returncode != 0 and isinstance(failure.value, RepositoryError)
    name = b"caf\xe9.md"  # Latin-1, not UTF-8: a name git keeps as bytes
    (repo / os.fsdecode(name)).write_bytes(b"x\n")
    run(repo, "add", "--", os.fsdecode(name))
    listed = run_git(repo, "-c", "core.quotePath=false", "ls-files", "-z").stdout
    assert os.fsdecode(name) in listed.split("\0")
    assert run_git(repo, "ls-files", "-z", text=False).stdout.split(b"\0")[:-1] == [b"README.md", name]


def test_a_stream_gives_gits_records_and_leaving_it_early_ends_git(repo: Path) -> None:
    commit_files(repo, {f"f/{i:04d}.md": b"%d\n" % i for i in range(3000)})
    records = list(stream_git(repo, "ls-files", "-z"))
    assert records == run(repo, "ls-files", "-z").split(b"\x00")[:-1]
    for i, record in enumerate(stream_git(repo, "log", "-z", "--format=%H", "--all")):
        break
    assert record == run(repo, "rev-parse", "HEAD").strip() and i == 0
    assert not git_children()
