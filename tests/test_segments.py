"""A month's memories in numbered folders of ``segment_size`` files: filled in order, never moved, every layout read.

Small ``segment_size`` values stand in for the default 500.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from memsite import ConfigError, MemoryStore
from memsite.cli import main
from memsite.features.check import check_working_tree
from memsite.features.doctor import diagnose
from memsite.features.review import compare
from memsite.foundation.config import parse_config
from memsite.foundation.fileformat import format_memory
from memsite.foundation.record import Memory, new_id, slugify
from memsite.site.snapshot import load
from tests.conftest import START, Clock, assert_clean, git, head
from tests.sites import memsite

MEMORIES = "content/memories"
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
         "romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def text(n: int) -> str:
    """A memory text no other n repeats (nor comes near: dedup stays on)."""
    return f"Note {n}: " + " ".join(WORDS[(n * 7 + k * 3) % len(WORDS)] + str(n) for k in range(6))


def resized(store: MemoryStore, size: int, clock: Clock, **settings: object) -> MemoryStore:
    """``store`` reopened after a person set ``segment_size`` (and ``settings``) in mkdocs.yml and committed it."""
    path = store.root / "mkdocs.yml"
    data = yaml.safe_load(path.read_text())
    data["plugins"]["memsite"].update(segment_size=size, **settings)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    git(store.root, "commit", "-qam", f"segment_size: {size}")
    store.close()
    return MemoryStore(store.root, agent="planner", clock=clock)


def folders(repo: Path, month: str, top: str = MEMORIES) -> dict[str, int]:
    """Files per numbered folder of ``month`` (``<category>/<YYYY-MM>``) at HEAD."""
    counts: dict[str, int] = {}
    for line in git(repo, "ls-tree", "-r", "--name-only", "HEAD", f"{top}/{month}").split():
        counts[line.split("/")[-2]] = counts.get(line.split("/")[-2], 0) + 1
    return counts


def rel(store: MemoryStore, memory: Memory) -> str:
    assert memory.path is not None
    return memory.path.relative_to(store.root).as_posix()


def test_a_writer_fills_the_last_numbered_folder_then_opens_the_next_and_no_path_changes(
        store: MemoryStore, clock: Clock) -> None:
    store = resized(store, 3, clock)
    made = [store.remember(text(n), category="cases") for n in range(7)]
    assert folders(store.root, "cases/2026-11") == {"001": 3, "002": 3, "003": 1}
    assert [rel(store, m).split("/")[-2] for m in made] == ["001"] * 3 + ["002"] * 3 + ["003"]
    paths = {m.id: rel(store, m) for m in made}

    store.forget(made[0].id, reason="wrong")  # room in 001: new memories still go to the last folder
    assert rel(store, store.remember(text(7), category="cases")).split("/")[-2] == "003"
    updated = store.update(made[1].id, content=text(1) + " (confirmed)")
    merged = store.remember(text(2) + " again", category="cases")  # a near duplicate: merged into its twin
    assert merged.action == "merged" and merged.id == made[2].id
    store.recall(text(4))
    store.flush_activity()
    assert rel(store, updated) == paths[made[1].id] and rel(store, merged) == paths[made[2].id]
    for memory in made[1:]:
        assert rel(store, store.get(memory.id)) == paths[memory.id]
    assert folders(store.root, "cases/2026-11") == {"001": 2, "002": 3, "003": 2}

    assert rel(store, store.remember(text(8), category="events")).startswith(f"{MEMORIES}/events/2026-11/001/")
    clock.advance(days=30)  # December: its own folders, from 001
    assert rel(store, store.remember(text(9), category="cases")).startswith(f"{MEMORIES}/cases/2026-12/001/")
    moved = store.update(made[3].id, category="events")  # a new category: its month (November) there, with room
    assert rel(store, moved) == f"{MEMORIES}/events/2026-11/001/{Path(paths[made[3].id]).name}"
    assert_clean(store.root)


def test_a_transaction_across_a_boundary_counts_what_it_adds(store: MemoryStore, clock: Clock) -> None:
    store = resized(store, 3, clock)
    store.remember(text(0), category="cases")
    store.remember(text(1), category="cases")
    before = head(store.root)
    with store.transaction("Import five cases") as tx:
        made = [tx.remember(text(n), category="cases") for n in range(2, 7)]
    assert git(store.root, "rev-list", f"{before}..HEAD").split() == [tx.commit]
    assert [tx.result(m).path.parent.name for m in made] == ["001", "002", "002", "002", "003"]  # type: ignore[union-attr]
    assert folders(store.root, "cases/2026-11") == {"001": 3, "002": 3, "003": 1}
    assert_clean(store.root)


def test_trimming_archives_into_numbered_folders_too(store: MemoryStore, clock: Clock) -> None:
    store = resized(store, 2, clock, categories={"cases": {"capacity": {"entries": {"high": 5, "low": 1}}}})
    for n in range(6):
        store.remember(text(n), category="cases")
        clock.advance(minutes=1)
    assert folders(store.root, "cases/2026-11", top="content/archive") == {"001": 2, "002": 2, "003": 1}
    assert len(store.list()) == 1
    assert check_working_tree(store.root).warnings == []
    assert_clean(store.root)


def test_two_clones_filling_one_folder_merge_past_it_and_the_next_write_opens_another(
        store: MemoryStore, clock: Clock, tmp_path: Path) -> None:
    store = resized(store, 3, clock)
    store.remember(text(0), category="cases")
    store.close()
    clones = []
    for name in ("a", "b"):
        git(tmp_path, "clone", "-q", str(store.root), name)
        clones.append(MemoryStore(tmp_path / name, agent=name, clock=clock))
    a, b = clones
    ours = [a.remember(text(n), category="cases") for n in (1, 2)]
    theirs = [b.remember(text(n), category="cases") for n in (3, 4)]
    written = {m.id: rel(a, m) for m in ours} | {m.id: rel(b, m) for m in theirs}
    assert {path.split("/")[-2] for path in written.values()} == {"001"}  # each filled 001 on its own
    git(a.root, "pull", "-q", "--no-rebase", "--no-edit", str(b.root), "main")
    assert folders(a.root, "cases/2026-11") == {"001": 5}  # two over: a merge never moves a file
    for mid, path in written.items():
        assert rel(a, a.get(mid)) == path
    assert rel(a, a.remember(text(5), category="cases")).split("/")[-2] == "002"
    assert folders(a.root, "cases/2026-11") == {"001": 5, "002": 1}
    for clone in clones:
        clone.close()
    assert_clean(a.root)


# --- every layout at once ----------------------------------------------------------------------------------------


def write_old(store: MemoryStore, texts: list[tuple[int, str, str]], *, months: bool) -> list[Memory]:
    """Memory files as earlier memsite versions wrote them, committed by plain git: flat category folders, or
    (``months``) month folders without numbered ones. ``texts`` are (days after START, category, text)."""
    written = []
    for days, category, words in texts:
        when = START + timedelta(days=days)
        memory = Memory(id=new_id(), category=category, abstract=words, content=words, agent="planner",
                        created=when, updated=when)
        folder = f"{MEMORIES}/{store.config.category(category).folder}" + (f"/{when:%Y-%m}" if months else "")
        path = store.root / folder / f"{slugify(words)}-{memory.id[-6:].lower()}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(format_memory(memory))
        written.append(memory.replace(path=path))
    git(store.root, "add", "-A")
    git(store.root, "commit", "-qm", f"Memories written in the {'month' if months else 'flat'} layout")
    return written


def test_migrate_moves_flat_and_month_layouts_oldest_first_in_one_commit_and_history_follows(
        store: MemoryStore, clock: Clock) -> None:
    store = resized(store, 2, clock)
    flat = write_old(store, [(5, "cases", text(0)), (2, "cases", text(1))], months=False)
    month = write_old(store, [(1, "cases", text(2)), (9, "cases", text(3)), (-20, "cases", text(4))], months=True)
    clock.advance(days=12)
    new = store.remember(text(5), category="cases")  # 2026-11/001, beside the files of the month layout
    before = head(store.root)
    origins = {m.id: git(store.root, "log", "-1", "--format=%H", "--", rel(store, m)).strip() for m in flat + month}
    texts = {m.id: m.path.read_bytes() for m in flat + month}  # type: ignore[union-attr]

    done = store.migrate()

    assert (done.memories, done.archived) == (5, 0)
    assert git(store.root, "rev-list", f"{before}..HEAD").split() == [done.commit]
    paths = {m.id: rel(store, m) for m in store.list()}
    assert paths[new.id] == rel(store, new)  # already in a numbered folder: not moved
    november = [month[0], flat[1], flat[0], month[1]]  # days 1, 2, 5, 9: oldest first, after what 001 held
    assert [paths[m.id].split("/")[-2] for m in november] == ["001", "002", "002", "003"]
    assert paths[month[2].id] == f"{MEMORIES}/cases/2026-10/001/{month[2].path.name}"  # type: ignore[union-attr]
    for memory in flat + month:
        now = paths[memory.id]
        assert (store.root / now).read_bytes() == texts[memory.id] and now.endswith("/" + memory.path.name)  # type: ignore[union-attr]
        assert git(store.root, "log", "--follow", "--format=%H", "--", now).split()[1:] == [origins[memory.id]]
        blamed = git(store.root, "blame", "--porcelain", "--", now).splitlines()[0].split()[0]
        assert blamed == origins[memory.id]  # every line still blamed on the commit that wrote it
    checked = check_working_tree(store.root)
    assert (checked.problems, checked.warnings, checked.count) == ([], [], 6)
    assert store.migrate().commit is None and head(store.root) == done.commit  # idempotent
    assert_clean(store.root)


@pytest.mark.slow
def test_check_doctor_catalog_snapshot_review_and_site_read_every_layout_at_once(
        store: MemoryStore, clock: Clock, tmp_path: Path) -> None:
    [flat] = write_old(store, [(-3, "cases", text(0))], months=False)  # created 2026-10
    [month] = write_old(store, [(2, "cases", text(1))], months=True)  # 2026-11, no numbered folder
    clock.advance(days=3)
    numbered = store.remember(text(2), category="cases")
    everything = [flat, month, numbered]
    git(store.root, "tag", "base")

    assert {m.id: rel(store, m) for m in store.list()} == {m.id: rel(store, m) for m in everything}  # the catalog
    assert store.rebuild_index() == 3

    checked = check_working_tree(store.root)
    assert checked.problems == [] and checked.count == 3
    assert checked.warnings == [
        f"{rel(store, month)}: in the month layout, without a numbered folder; "
        f"'memsite migrate' moves it into a numbered folder of {MEMORIES}/cases/2026-11/",
        f"{rel(store, flat)}: in the flat layout; "
        f"'memsite migrate' moves it into a numbered folder of {MEMORIES}/cases/2026-10/",
    ]
    found = [f for f in diagnose(store.root) if f.kind == "misplaced"]
    assert [f.message for f in found] == checked.warnings and all(f.fixable for f in found)

    snap = load(store.root / "content", store.config, clock())
    assert snap.problems == [] and sorted(s.memory.id for s in snap.memories) == sorted(m.id for m in everything)

    for memory in everything:
        store.update(memory.id, tags=["reviewed"])
    report = compare(store.root, "base")
    assert sorted((c.action, c.id, c.path) for c in report.changes) == \
           sorted(("updated", m.id, rel(store, m)) for m in everything)

    home = tmp_path / "home"
    home.mkdir()
    memsite("-C", str(store.root), "build", home=home)
    for memory in everything:
        page = store.root / "site" / "memories" / "cases" / f"{memory.created:%Y-%m}" / "index.html"
        assert f'id="{memory.id}"' in page.read_text()
    result = CliRunner().invoke(main, ["-C", str(store.root), "--agent", "planner", "check"])
    assert result.exit_code == 0 and result.stdout.count("'memsite migrate'") == 2


def test_segment_size_is_a_whole_number_up_to_1000() -> None:
    assert parse_config({}).segment_size == 500
    assert parse_config({"segment_size": 1000}).segment_size == 1000
    for wrong in (0, 1001, "many", 2.5, True):
        with pytest.raises(ConfigError, match=r"Config value 'plugins.memsite.segment_size': expected a whole number"):
            parse_config({"segment_size": wrong})
