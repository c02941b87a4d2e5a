"""memsite.git.settings: the configuration read as git reads it, checked against what git itself does with it.

(core.fsync, sha256 repositories, git's variables in hooks: tests/test_git_settings.py.)
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memsite.git import Repository

from .conftest import run, text


def settings_of(repo: Path):  # type: ignore[no-untyped-def]
    opened = Repository(repo)
    try:
        return opened.settings
    finally:
        opened.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(number=st.integers(-5000, 5000), unit=st.sampled_from(["", "k", "K", "m", "M", "g", "G"]),
       option=st.sampled_from(["gc.auto", "gc.autoPackLimit"]))
def test_numbers_are_read_as_git_reads_them(repo: Path, number: int, unit: str, option: str) -> None:
    assume(abs(number) << {"": 0, "k": 10, "m": 20, "g": 30}[unit.lower()] < 1 << 31)  # (git's are C ints)
    run(repo, "config", option, f"{number}{unit}")
    expected = int(text(repo, "config", "--type=int", option))
    found = settings_of(repo)
    assert (found.auto_gc if option == "gc.auto" else found.auto_pack_limit) == expected
    assert found.maintained == (expected > 0 and (found.auto_gc if option == "gc.autoPackLimit" else
                                                  found.auto_pack_limit) > 0)


REFS = ["refs/heads/topic", "refs/remotes/origin/topic", "refs/notes/topic", "refs/tags/topic", "refs/other/topic"]


@pytest.mark.parametrize("value", [None, "true", "false", "yes", "off", "1", "0", "2", "TRUE", "always"])
def test_a_reflog_is_created_for_exactly_the_refs_git_creates_one_for(repo: Path, value: str | None) -> None:
    if value is not None:
        run(repo, "config", "core.logAllRefUpdates", value)
    head = text(repo, "rev-parse", "HEAD").strip()
    found = settings_of(repo)
    for ref in REFS:
        run(repo, "update-ref", "-m", "made by git", ref, head)
        assert found.autocreate_reflog(ref) == (repo / ".git" / "logs" / ref).exists(), (value, ref)


def flevel(raw: bytes) -> int:
    """The compression level class a zlib stream's header records (0 fastest ... 3 best)."""
    return raw[1] >> 6


@pytest.mark.parametrize(("config", "level"), [
    ({}, 1), ({"core.compression": "9"}, 9), ({"core.compression": "-1"}, 6), ({"core.looseCompression": "0"}, 0),
    ({"core.compression": "9", "core.looseCompression": "3"}, 3),
])
def test_loose_objects_are_compressed_at_the_level_git_uses(repo: Path, config: dict[str, str], level: int) -> None:
    for key, value in config.items():
        run(repo, "config", key, value)
    data = b"the same words again and again, " * 64
    by_git = run(repo, "hash-object", "-w", "--stdin", input=data).decode().strip()
    theirs = (repo / ".git" / "objects" / by_git[:2] / by_git[2:]).read_bytes()
    (repo / ".git" / "objects" / by_git[:2] / by_git[2:]).unlink()
    opened = Repository(repo)
    try:
        assert opened.objects.write(b"blob", data).hex() == by_git
    finally:
        opened.close()
    ours = (repo / ".git" / "objects" / by_git[:2] / by_git[2:]).read_bytes()
    assert flevel(ours) == flevel(theirs) == flevel(zlib.compress(b"x", level))
    assert text(repo, "cat-file", "-p", by_git).encode() == data
