"""memsite.git.pack: packs memsite writes are packs git verifies and indexes the same way, and packs git wrote are
read by memsite's reader (whole objects itself, deltas left to git).

(A write's pack, and memsite reading git's deltas through git: tests/test_git_settings.py.)
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsite.git.objects import LARGE_TREE_BYTES, MODE_FILE, PACK_TYPES, Entry, Tree, object_id
from memsite.git.pack import PackReader, pack_entry, whole_entries, write_pack

from .conftest import init, run, text

NO_FLUSH = (None, None)


@pytest.fixture
def repo_dir(tmp_path: Path) -> Path:
    return init(tmp_path / "packs")


def pack_dir(repo: Path) -> Path:
    return repo / ".git" / "objects" / "pack"


def objects_of(blobs: list[bytes], names: list[str]) -> list[tuple[bytes, bytes]]:
    """(kind, data) of the blobs, a tree naming them, and a commit of that tree: sound objects for git fsck."""
    tree = Tree.empty().edited({name: Entry(MODE_FILE, object_id(b"blob", data)) for name, data in zip(names, blobs)})
    tree_id = object_id(b"tree", tree.serialize())
    commit = (b"tree %s\nauthor a <a@memsite.invalid> 1764230400 +0000\n"
              b"committer a <a@memsite.invalid> 1764230400 +0000\n\npacked\n" % tree_id.hex().encode())
    return [*((b"blob", data) for data in blobs), (b"tree", tree.serialize()), (b"commit", commit)]


def write_memsite_pack(repo: Path, objects: list[tuple[bytes, bytes]], level: int = 1) -> str:
    entries = {}
    for kind, data in objects:
        entries[object_id(kind, data)] = pack_entry(PACK_TYPES[kind], data, level)
    return write_pack(str(pack_dir(repo)), [(sha, crc, entry) for sha, (crc, entry) in entries.items()], NO_FLUSH)


def verify_pack(repo: Path, name: str) -> dict[str, tuple[str, int, int, bool]]:
    """id -> (type, size, offset, whether a delta) of every object, as ``git verify-pack -v`` lists them."""
    listed = {}
    for line in text(repo, "verify-pack", "-v", str(pack_dir(repo) / f"{name}.idx")).splitlines():
        fields = line.split()
        if len(fields) >= 5 and len(fields[0]) == 40:
            listed[fields[0]] = (fields[1], int(fields[2]), int(fields[4]), len(fields) > 5)
    return listed


def show_index(repo: Path, idx: Path) -> dict[str, tuple[int, int]]:
    """id -> (offset, CRC-32) as ``git show-index`` reads a pack index."""
    out = {}
    for line in run(repo, "show-index", input=idx.read_bytes()).decode().splitlines():
        offset, sha, crc = line.split()
        out[sha] = (int(offset), int(crc.strip("()"), 16))
    return out


BLOBS = st.lists(st.binary(max_size=400), min_size=1, max_size=20, unique=True)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blobs=BLOBS, level=st.sampled_from([0, 1, 6, 9]))
def test_a_pack_memsite_writes_is_verified_by_git_and_its_index_is_the_one_git_makes(repo_dir: Path,
                                                                                     blobs: list[bytes],
                                                                                     level: int) -> None:
    objects = objects_of(blobs, [f"{i:03d}.md" for i in range(len(blobs))])
    name = write_memsite_pack(repo_dir, objects, level)
    listed = verify_pack(repo_dir, name)
    assert listed == {object_id(kind, data).hex(): (kind.decode(), len(data), listed[object_id(kind, data).hex()][2],
                                                    False) for kind, data in objects}
    for kind, data in objects:
        sha = object_id(kind, data).hex()
        assert run(repo_dir, "cat-file", kind.decode(), sha) == data
    # git indexes memsite's pack into the very same bytes memsite wrote as its index.
    again = repo_dir / "again.idx"
    run(repo_dir, "index-pack", "-o", str(again), str(pack_dir(repo_dir) / f"{name}.pack"))
    assert again.read_bytes() == (pack_dir(repo_dir) / f"{name}.idx").read_bytes()
    again.unlink()
    reader = PackReader(str(pack_dir(repo_dir)), name)
    assert reader.names() == sorted(object_id(kind, data) for kind, data in objects)
    for kind, data in objects:
        offset = reader.find(object_id(kind, data))
        assert offset == listed[object_id(kind, data).hex()][2]
        assert reader.read(offset) == (kind.decode(), data)  # type: ignore[arg-type]
    assert reader.find(b"\xff" * 20) is None and reader.find(b"\x00" * 20) is None
    # in the order written (merges keep it, and git's delta window then holds a folder's consecutive versions)
    written = list(dict.fromkeys(object_id(kind, data) for kind, data in objects))
    assert reader.names_in_pack_order() == written
    assert [sha for sha, _, _ in whole_entries(str(pack_dir(repo_dir)), name)] == written
    run(repo_dir, "fsck", "--strict", "--no-dangling")


def test_a_large_folder_is_stored_uncompressed_in_a_pack_git_reads(repo_dir: Path) -> None:
    names = [f"memory-{i:05d}-a-long-enough-name.md" for i in range(600)]
    blobs = [f"memory {i}\n".encode() for i in range(600)]
    objects = objects_of(blobs, names)
    assert len(objects[-2][1]) > LARGE_TREE_BYTES
    name = write_memsite_pack(repo_dir, objects, level=9)
    tree_id = object_id(b"tree", objects[-2][1]).hex()
    stored = int(run(repo_dir, "cat-file", "--batch-check=%(objectsize:disk)", input=f"{tree_id}\n".encode()))
    assert stored > len(objects[-2][1])  # level 0 whatever the level asked: larger than the tree itself
    assert verify_pack(repo_dir, name)[tree_id][:2] == ("tree", len(objects[-2][1]))
    assert run(repo_dir, "ls-tree", "--name-only", tree_id).decode().split() == names
    run(repo_dir, "fsck", "--strict", "--no-dangling")  # (no branch yet: git notes that, and finds nothing wrong)


def git_pack(repo: Path, blobs: list[bytes], *index_options: str) -> tuple[str, dict[str, bytes]]:
    """Store ``blobs`` with git (alike ones as deltas) in one pack of git's, indexed with ``index_options``;
    its name and id -> data."""
    ids = {}
    for data in blobs:
        ids[run(repo, "hash-object", "-w", "--stdin", input=data).decode().strip()] = data
    made = run(repo, "pack-objects", "-q", "--window=50", str(pack_dir(repo) / "pack"),
               input="".join(f"{sha}\n" for sha in ids).encode()).decode().strip()
    name = f"pack-{made}"
    if index_options:
        idx = pack_dir(repo) / f"{name}.idx"
        idx.chmod(0o644)
        idx.unlink()
        run(repo, "index-pack", *index_options, "-o", str(idx), str(pack_dir(repo) / f"{name}.pack"))
    return name, ids


def alike_blobs(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    base = bytes(rng.randrange(256) for _ in range(3000))
    out = [base + b"%d" % i + bytes(rng.randrange(256) for _ in range(rng.randrange(50))) for i in range(count)]
    return out + [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 500))) for _ in range(count)]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 1 << 30), count=st.integers(2, 12))
def test_a_pack_git_wrote_is_read_whole_objects_by_memsite_and_deltas_left_to_git(tmp_path: Path, seed: int,
                                                                                  count: int) -> None:
    repo = init(tmp_path / f"git-{seed}-{count}")
    name, ids = git_pack(repo, alike_blobs(seed, count))
    listed = verify_pack(repo, name)
    assert any(delta for _, _, _, delta in listed.values())  # alike blobs: git stored some as deltas
    reader = PackReader(str(pack_dir(repo)), name)
    indexed = show_index(repo, pack_dir(repo) / f"{name}.idx")
    assert [sha.hex() for sha in reader.names()] == sorted(indexed)
    assert dict(zip((sha.hex() for sha in reader.names()), reader.crcs())) == {s: c for s, (_, c) in indexed.items()}
    for sha, data in ids.items():
        _, _, offset, delta = listed[sha]
        assert reader.find(bytes.fromhex(sha)) == offset == indexed[sha][0]
        assert reader.read(offset) == (None if delta else ("blob", data))
    with pytest.raises(ValueError, match="holds deltas"):
        whole_entries(str(pack_dir(repo)), name)
    shutil.rmtree(repo)


def test_an_index_git_wrote_with_large_offsets_is_read_through_them(repo_dir: Path) -> None:
    """git writes offsets past 2 GB in a second table; ``--index-version=2,<offset>`` makes it do so from there."""
    name, ids = git_pack(repo_dir, [b"object %d\n" % i * 40 for i in range(30)], "--index-version=2,0x100")
    reader = PackReader(str(pack_dir(repo_dir)), name)
    assert any(offset & 0x80000000 for offset in reader.offsets())  # (the index has the table)
    listed = verify_pack(repo_dir, name)
    for sha, data in ids.items():
        offset = reader.find(bytes.fromhex(sha))
        assert offset == listed[sha][2]
        if not listed[sha][3]:
            assert reader.read(offset) == ("blob", data)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="large offsets|deltas"):
        whole_entries(str(pack_dir(repo_dir)), name)


def test_a_damaged_or_unknown_pack_is_refused_by_name(repo_dir: Path) -> None:
    name = write_memsite_pack(repo_dir, objects_of([b"one\n", b"two\n"], ["1.md", "2.md"]))
    folder = str(pack_dir(repo_dir))
    pack = pack_dir(repo_dir) / f"{name}.pack"
    data = bytearray(pack.read_bytes())
    data[20] ^= 0xFF
    pack.chmod(0o644)
    pack.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"{name}: damaged"):
        whole_entries(folder, name)
    old, _ = git_pack(repo_dir, [b"three\n"], "--index-version=1")
    with pytest.raises(ValueError, match=f"{old}: not a version 2 pack index"):
        PackReader(folder, old)
