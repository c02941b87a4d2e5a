"""memsite.git.files: a file is put in place whole or not at all, as git writes its own files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memsite.git import files


def test_a_file_is_stored_whole_with_its_mode_and_its_folder_made(tmp_path: Path) -> None:
    target = tmp_path / "new" / "folder" / "object"
    files.store(str(target), str(tmp_path / "new" / "folder" / "tmp_obj_1"), b"x" * 100_000, mode=0o444)
    assert target.read_bytes() == b"x" * 100_000
    assert target.stat().st_mode & 0o777 == 0o444
    assert os.listdir(target.parent) == ["object"]


def test_a_full_disk_leaves_the_old_file_and_no_temporary_one(small_disk: Path) -> None:
    target = small_disk / "index"
    files.store(str(target), str(small_disk / "index.tmp"), b"the old index\n", mode=0o644)
    with pytest.raises(OSError):
        files.store(str(target), str(small_disk / "index.tmp"), b"y" * (8 << 20), mode=0o644)
    assert target.read_bytes() == b"the old index\n"
    assert os.listdir(small_disk) == ["index"]
