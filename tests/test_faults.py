"""The fault suite: real processes killed at random moments, damaged derived files, hostile values.

After each fault every acknowledged memory (and session record) reads back,
``git status`` and ``git fsck --strict`` are clean, no lock blocks git, and
nothing printed a traceback (see tests/faults.py, shared with bench/faults.py).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from . import faults

KILLS = 10


def assert_survived(tally: faults.Tally, kills: int = KILLS) -> None:
    assert tally.failures == []
    assert tally.injected == kills and tally.survived == kills


def test_remember_killed_at_random_moments(tmp_path: Path) -> None:
    tally = faults.kill_writers(faults.new_repository(tmp_path / "m"), KILLS, random.Random(1))
    assert_survived(tally)
    assert tally.acknowledged > KILLS


def test_transactions_killed_at_random_moments(tmp_path: Path) -> None:
    tally = faults.kill_writers(faults.new_repository(tmp_path / "m"), KILLS, random.Random(2), batch=5)
    assert_survived(tally)
    assert tally.acknowledged > KILLS


def test_task_closes_killed_at_random_moments(tmp_path: Path) -> None:
    tally = faults.kill_tasks(faults.new_repository(tmp_path / "m"), KILLS, random.Random(3))
    assert_survived(tally)
    assert tally.acknowledged > 0


def test_builds_killed_at_random_moments(tmp_path: Path) -> None:
    repo = faults.new_repository(tmp_path / "m")
    faults.kill_writers(repo, 1, random.Random(4))  # something to build
    assert_survived(faults.kill_builds(repo, KILLS, random.Random(5)))
    assert (repo / "site" / "index.html").is_file()


def test_migrations_killed_at_random_moments(tmp_path: Path) -> None:
    ids = faults.flat_repository(tmp_path / "template", 150)
    tally = faults.kill_migrations(tmp_path / "template", tmp_path, ids, KILLS, random.Random(6))
    assert_survived(tally)


@pytest.fixture(scope="module")
def damaged_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    path = tmp_path_factory.mktemp("derived") / "template"
    return path, faults.damaged_template(path)


@pytest.mark.parametrize("how", ["truncated", "garbage"])
@pytest.mark.parametrize("name", faults.DERIVED_FILES)
def test_a_damaged_derived_file_heals_with_one_warning(damaged_template: tuple[Path, set[str]], tmp_path: Path,
                                                       name: str, how: str) -> None:
    template, ids = damaged_template
    failures, warnings = faults.damaged_file_round(template, tmp_path, name, how, ids, random.Random(name))
    assert failures == []
    # Garbage in a database is found and set aside with one warning; SQLite itself drops a damaged -wal or -shm,
    # and a truncated file is set aside only when a read meets the missing pages.
    assert len(warnings) <= 1, warnings
    if name.endswith(".sqlite3") and how == "garbage":
        assert len(warnings) == 1, warnings
        assert f"{name} could not be read" in warnings[0] and f"moved aside to {name}.damaged-" in warnings[0]
        lost = "recalls it held that were not yet committed" in warnings[0]
        assert lost == (name == "activity.sqlite3")


def test_every_hostile_value_is_refused_and_the_store_still_works(tmp_path: Path) -> None:
    tally = faults.try_hostile(faults.new_repository(tmp_path / "m"))
    assert tally.failures == []
    assert tally.survived == tally.injected == len(faults.hostile_inputs())


def test_no_host_byte_reaches_a_built_site(tmp_path: Path) -> None:
    repo = faults.new_repository(tmp_path / "m")
    assert faults.host_bytes_in_site(repo, tmp_path / "host") == 0
    assert (tmp_path / "host" / "site" / "index.html").is_file()
