"""memsite.git.object_database: trees memsite writes along changed paths are the trees git writes for the same files,
its walks and diffs are git's, its batches land in one pack or not at all, and it reads whatever git stored.

(Freshening reused objects, packs kept until the branch moves, deltas read through git: tests/test_git_settings.py.)
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsite.foundation.errors import RepositoryError
from memsite.git import Entry, ObjectDatabase, Repository, blob_id
from memsite.git.object_database import PACK_THRESHOLD
from memsite.git.objects import MODE_EXEC, MODE_FILE, MODE_LINK
from memsite.git.settings import GitSettings

from .conftest import commit_files, init, run, text


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Path, ObjectDatabase]]:
    repo = init(tmp_path / "store")
    objects = ObjectDatabase(repo / ".git" / "objects", GitSettings())
    try:
        yield repo, objects
    finally:
        objects.close()


def packs(repo: Path) -> set[str]:
    return {p.stem for p in (repo / ".git" / "objects" / "pack").glob("*.idx")}


def loose(repo: Path) -> set[str]:
    folder = repo / ".git" / "objects"
    return {f"{d.name}{f.name}" for d in folder.iterdir() if len(d.name) == 2 for f in d.iterdir()}


def git_tree(repo: Path, files: dict[str, tuple[int, bytes]]) -> str:
    """The root tree git writes for ``files`` (path -> (mode, blob id)), through an index of its own."""
    index = repo / ".git" / "scratch-index"
    index.unlink(missing_ok=True)
    listing = b"".join(b"%o %s\t%s\x00" % (mode, sha.hex().encode(), path.encode("utf-8", "surrogateescape"))
                       for path, (mode, sha) in files.items())
    run(repo, "update-index", "-z", "--index-info", input=listing, GIT_INDEX_FILE=str(index))
    return run(repo, "write-tree", "--missing-ok", GIT_INDEX_FILE=str(index)).decode().strip()


def listed_by_git(repo: Path, tree: str) -> dict[str, tuple[int, str]]:
    out = {}
    for record in run(repo, "ls-tree", "-r", "-z", tree).split(b"\x00")[:-1]:
        info, path = record.split(b"\t", 1)
        mode, _, sha = info.decode().split()
        out[path.decode("utf-8", "surrogateescape")] = (int(mode, 8), sha)
    return out


def diff_by_git(repo: Path, old: str, new: str) -> set[tuple[str, str | None, str | None]]:
    fields = run(repo, "diff-tree", "-r", "-z", "--no-renames", old, new).split(b"\x00")
    out = set()
    for info, path in zip(fields[0:-1:2], fields[1::2]):
        _, _, a, b, status = info[1:].decode().split()
        out.add((path.decode("utf-8", "surrogateescape"), None if status == "A" else a, None if status == "D" else b))
    return out


NAME = (st.text(st.characters(min_codepoint=1, max_codepoint=0x2FF, blacklist_characters="/"), min_size=1,
                max_size=6)
        | st.binary(min_size=1, max_size=4).map(lambda raw: raw.decode("utf-8", "surrogateescape"))) \
    .filter(lambda name: name not in (".", "..") and "/" not in name and "\x00" not in name
            and ".git" not in name.lower())
PATH = st.lists(st.sampled_from(["a", "a.md", "b", "a-b"]) | NAME, min_size=1, max_size=4).map("/".join)
FILE = st.tuples(st.sampled_from([MODE_FILE, MODE_FILE, MODE_EXEC, MODE_LINK]), st.binary(max_size=24))


def folders(paths: object) -> set[str]:
    return {path.rsplit("/", i)[0] for path in paths for i in range(1, path.count("/") + 1)}  # type: ignore[attr-defined]


def consistent(files: dict[str, object]) -> dict[str, object]:
    """``files`` without paths that are another's folder (a file and a folder of one name cannot both be)."""
    return {path: data for path, data in files.items() if path not in folders(files)}


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.dictionaries(PATH, FILE, min_size=1, max_size=12),
       edits=st.dictionaries(PATH, st.none() | FILE, min_size=1, max_size=8),
       batched=st.booleans())
def test_trees_written_along_changed_paths_are_the_trees_git_writes(store: tuple[Path, ObjectDatabase],
                                                                   files: dict[str, tuple[int, bytes]],
                                                                   edits: dict[str, tuple[int, bytes] | None],
                                                                   batched: bool) -> None:
    repo, objects = store
    files = consistent(files)  # type: ignore[assignment]
    added = {path: change for path, change in edits.items() if change is not None}
    final = {path: change for path, change in consistent({**files, **added}).items()
             if edits.get(path, ()) is not None}  # (an edit that removes it)
    # One change set, as a commit gives it: removals, additions, changes; a file may become a folder or back.
    changes: dict[str, tuple[int, bytes] | None] = {path: None for path in files if path not in final}
    changes.update((path, change) for path, change in final.items() if files.get(path) != change)
    changes.update((path, None) for path, change in edits.items()  # removing what is not there changes nothing
                   if change is None and path not in files and path not in folders([*files, *final]))

    def entries(given: dict[str, tuple[int, bytes] | None]) -> dict[str, Entry | None]:
        return {path: None if change is None else Entry(change[0], objects.write(b"blob", change[1]))
                for path, change in given.items()}

    with objects.batch() if batched else contextlib.nullcontext():
        root = objects.apply(None, entries(files))  # type: ignore[arg-type]
        new_root = objects.apply(root, entries(changes))
    objects.release()
    assert root is not None and root.hex() == git_tree(repo, {p: (m, blob_id(d)) for p, (m, d) in files.items()})
    expected = {path: (mode, blob_id(data)) for path, (mode, data) in final.items()}
    if not expected:
        assert new_root is None
        return
    assert new_root is not None and new_root.hex() == git_tree(repo, expected)
    # Walks, lookups and diffs of them are git's.
    walked = {path: (entry.mode, entry.sha.hex()) for path, entry in objects.walk(new_root)}
    assert walked == listed_by_git(repo, new_root.hex()) == {p: (m, s.hex()) for p, (m, s) in expected.items()}
    for path, (mode, sha) in expected.items():
        assert objects.lookup(new_root, path) == Entry(mode, sha)
    found = {(path, a.sha.hex() if a else None, b.sha.hex() if b else None)
             for path, a, b in objects.diff(root, new_root)}
    assert found == diff_by_git(repo, root.hex(), new_root.hex())
    run(repo, "fsck", "--strict", "--no-dangling", "--connectivity-only", new_root.hex())


def test_removing_a_path_below_a_file_changes_nothing_as_in_git(store: tuple[Path, ObjectDatabase]) -> None:
    repo, objects = store
    blob = objects.write(b"blob", b"a file named a\n")
    root = objects.apply(None, {"a": Entry(MODE_FILE, blob), "keep.md": Entry(MODE_FILE, blob)})
    assert root is not None
    # git's index: removing a/b, which is not there, leaves the file a.
    assert objects.apply(root, {"a/b": None}) == root
    assert root.hex() == git_tree(repo, {"a": (MODE_FILE, blob), "keep.md": (MODE_FILE, blob)})


def test_a_folder_replaced_by_a_file_of_its_name_in_one_change_keeps_the_file(
        store: tuple[Path, ObjectDatabase]) -> None:
    repo, objects = store
    one, two = objects.write(b"blob", b"in the folder\n"), objects.write(b"blob", b"the file that replaces it\n")
    root = objects.apply(None, {"a/b.md": Entry(MODE_FILE, one), "keep.md": Entry(MODE_FILE, one)})
    new = objects.apply(root, {"a/b.md": None, "a": Entry(MODE_FILE, two)})
    assert new is not None and new.hex() == git_tree(repo, {"a": (MODE_FILE, two), "keep.md": (MODE_FILE, one)})


def test_a_batch_is_one_pack_git_verifies_kept_until_released_and_nothing_if_it_raises(
        store: tuple[Path, ObjectDatabase]) -> None:
    repo, objects = store
    before_packs, before_loose = packs(repo), loose(repo)
    with objects.batch():
        root = objects.apply(None, {"a/one.md": Entry(MODE_FILE, objects.write(b"blob", b"one\n")),
                                    "a/two.md": Entry(MODE_FILE, objects.write(b"blob", b"two\n"))})
        assert root is not None
        assert objects.read(root)[0] == "tree"  # readable inside the block, before anything is stored
    [added] = packs(repo) - before_packs
    assert loose(repo) == before_loose
    pack = repo / ".git" / "objects" / "pack" / added
    assert pack.with_suffix(".keep").read_text().startswith(f"memsite {os.getpid()}:")
    shown = text(repo, "verify-pack", "-v", str(pack.with_suffix(".idx")))
    assert shown.count(" blob ") == 2 and shown.count(" tree ") == 2
    assert text(repo, "ls-tree", "-r", "--name-only", root.hex()).split() == ["a/one.md", "a/two.md"]
    objects.release()
    assert not pack.with_suffix(".keep").exists()
    # A block that raises stores nothing.
    with pytest.raises(RuntimeError), objects.batch():
        lost = objects.write(b"blob", b"never stored\n")
        raise RuntimeError("the write failed")
    assert packs(repo) == {added} | before_packs and loose(repo) == before_loose
    assert subprocess.run(["git", "cat-file", "-e", lost.hex()], cwd=repo).returncode != 0
    with pytest.raises(RepositoryError, match=f"git object {lost.hex()}"):
        objects.read(lost)
    # A batch of one object is a loose file, as git writes it.
    with objects.batch():
        single = objects.write(b"blob", b"alone\n")
    assert loose(repo) == before_loose | {single.hex()}
    assert run(repo, "cat-file", "blob", single.hex()) == b"alone\n"


@pytest.mark.parametrize("maintained", [True, False], ids=["gc on", "gc.auto=0"])
def test_many_objects_at_once_go_into_one_pack_and_with_git_maintenance_off_a_batch_is_loose(
        tmp_path: Path, maintained: bool) -> None:
    repo = init(tmp_path / "many")
    if not maintained:
        run(repo, "config", "gc.auto", "0")
    commit_files(repo, {"README.md": b"x\n"})
    opened = Repository(repo)
    try:
        objects = opened.objects
        before_packs, before_loose = packs(repo), loose(repo)
        blobs = [b"blob %d\n" % i for i in range(PACK_THRESHOLD)]
        shas = objects.write_many(b"blob", blobs)
        assert len(packs(repo) - before_packs) == 1 and loose(repo) == before_loose  # one pack, maintained or not
        assert [run(repo, "cat-file", "blob", sha.hex()) for sha in shas] == blobs
        with objects.batch():
            objects.write(b"blob", b"first\n")
            objects.write(b"blob", b"second\n")
        objects.release()
        assert (len(loose(repo) - before_loose) == 2) == (not maintained)
        assert (len(packs(repo) - before_packs) == 2) == maintained
    finally:
        opened.close()


def test_objects_git_stored_loose_packed_whole_or_as_deltas_all_read_back(tmp_path: Path) -> None:
    repo = init(tmp_path / "read")
    shared = b"a runbook step that repeats, " * 60
    blobs = [shared + b"%d\n" % i for i in range(6)]
    commit_files(repo, {f"{i}.md": data for i, data in enumerate(blobs)})
    run(repo, "gc", "-q", "--aggressive")  # packed by git, alike blobs as deltas
    commit_files(repo, {"loose.md": b"loose, written by git after its gc\n"})
    objects = ObjectDatabase(repo / ".git" / "objects", GitSettings())
    try:
        everything = [sha for sha in text(repo, "rev-list", "--objects", "--all").split() if len(sha) == 40]
        for sha in everything:
            kind = text(repo, "cat-file", "-t", sha).strip()
            assert objects.read(bytes.fromhex(sha)) == (kind, run(repo, "cat-file", kind, sha))
        ids = [blob_id(data) for data in blobs] + [blob_id(b"loose, written by git after its gc\n")]
        assert objects.read_blobs(ids) == {blob_id(data): data for data in
                                           [*blobs, b"loose, written by git after its gc\n"]}
        missing = blob_id(b"nobody wrote this")
        with pytest.raises(RepositoryError, match=f"git object {missing.hex()} is missing"):
            objects.read_blobs([ids[0], missing])
        tree = bytes.fromhex(text(repo, "rev-parse", "HEAD^{tree}").strip())
        with pytest.raises(RepositoryError, match="is a tree, expected a file"):
            objects.read_blob(tree)
    finally:
        objects.close()
