"""Memories sharded by category and month: writes, reading the flat layout, `memsite migrate`, check, diff, site."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.cli import main
from memsite.features.check import check_working_tree
from memsite.foundation.fileformat import format_memory, parse_memory
from memsite.foundation.record import Memory, format_time, new_id, slugify
from tests.conftest import START, Clock, assert_clean, checkout, git, head
from tests.sites import memsite

MEMORIES = "content/memories"


def run(store: MemoryStore, *args: str):
    return CliRunner().invoke(main, ["-C", str(store.root), "--agent", "planner", *args])


def write_flat(store: MemoryStore, texts: list[tuple[int, str, str]]) -> list[Memory]:
    """Memory files as memsite wrote them before sharding (one flat folder per category), committed by plain git.

    ``texts`` are (days after START, category, text).
    """
    written = []
    for days, category, text in texts:
        when = START + timedelta(days=days)
        memory = Memory(id=new_id(), category=category, abstract=text, content=text, agent="planner",
                        created=when, updated=when)
        rel = f"{MEMORIES}/{store.config.category(category).folder}/{slugify(text)}-{memory.id[-6:].lower()}.md"
        (store.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (store.root / rel).write_text(format_memory(memory))
        written.append(memory.replace(path=store.root / rel))
    git(store.root, "add", "-A")
    git(store.root, "commit", "-qm", "Memories written before sharding")
    return written


def archive_flat(store: MemoryStore, days: int, text: str) -> Path:
    """An archived memory in the flat layout (content/archive/<category>/<file>.md), committed by plain git."""
    when = START + timedelta(days=days)
    memory = Memory(id=new_id(), category="cases", abstract=text, content=text, agent="planner", created=when,
                    updated=when, extra={"archived": format_time(when), "archive_reason": "cases capacity"})
    path = store.root / "content" / "archive" / "cases" / f"{slugify(text)}-{memory.id[-6:].lower()}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(format_memory(memory))
    git(store.root, "add", "-A")
    git(store.root, "commit", "-qm", "An archive written before sharding")
    return path


OLD = [(-60, "cases", "The billing job timed out on a cold cache"),  # 2026-09
       (-20, "cases", "Webhook retries arrived twice after a deploy"),  # 2026-10
       (-20, "preferences", "The user prefers tabs in Python files"),
       (3, "entities", "Staging is the vega cluster in eu-central-1")]  # 2026-11


def rel(store: MemoryStore, path: Path | None) -> str:
    assert path is not None
    return path.relative_to(store.root).as_posix()


# --- writing ------------------------------------------------------------------------------------------------------


def test_ids_are_ulids_that_sort_in_the_order_they_were_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file name ends with its id's tail: ids are ULIDs (Crockford base 32, the time first), so they sort by
    creation; within one millisecond the random part counts up."""
    from memsite.foundation import record

    monkeypatch.setattr(record, "_ulid_last", (0, 0))
    monkeypatch.setattr(record.time, "time_ns", lambda: 1_469_918_176_385 * 1_000_000)  # the ULID spec's example
    ids = [new_id() for _ in range(1000)]
    assert ids == sorted(ids) and len(set(ids)) == 1000
    assert all(len(mid) == 26 and mid.startswith("01ARYZ6S41") and mid.isalnum() and mid.isupper()
               and not set(mid) & set("ILOU") for mid in ids)
    crockford = str.maketrans("JKMNPQRSTVWXYZ", "IJKLMNOPQRSTUV")  # to the digits int(..., 32) reads
    assert int(ids[1].translate(crockford), 32) == int(ids[0].translate(crockford), 32) + 1


def test_a_memory_lives_in_the_folder_of_its_category_and_month_and_never_moves(store: MemoryStore,
                                                                                clock: Clock) -> None:
    november = store.remember("Deploys go through make release", category="patterns")
    clock.advance(days=31)
    december = store.remember("The release train leaves on Thursdays", category="events")
    assert rel(store, november.path) == f"{MEMORIES}/patterns/2026-11/001/deploys-go-through-make-release-" \
                                        f"{november.id[-6:].lower()}.md"
    assert rel(store, december.path).startswith(f"{MEMORIES}/events/2026-12/001/")
    updated = store.update(november.id, content="Deploys go through make release, then a canary")
    assert updated.path == november.path and "canary" in november.path.read_text()  # type: ignore[union-attr]
    store.forget(december.id, reason="wrong")
    assert not december.path.exists()  # type: ignore[union-attr]
    assert git(store.root, "ls-tree", "-r", "--name-only", "HEAD", MEMORIES).split() == [rel(store, november.path)]
    assert_clean(store.root)


# --- reading the flat layout ----------------------------------------------------------------------------------------


def test_a_repository_in_the_flat_layout_is_read_and_written_in_place(store: MemoryStore, clock: Clock) -> None:
    flat = write_flat(store, OLD)  # committed by plain git: the catalog catches up by diffing
    assert {m.id: rel(store, m.path) for m in store.list()} == {m.id: rel(store, m.path) for m in flat}
    assert store.get(flat[0].id).abstract == flat[0].abstract
    assert [h.memory.id for h in store.recall("billing cold cache")] == [flat[0].id]

    updated = store.update(flat[0].id, content="The billing job timed out on a cold cache; warm it first")
    assert updated.path == flat[0].path and "warm it first" in flat[0].path.read_text()  # type: ignore[union-attr]
    store.forget(flat[1].id, reason="fixed upstream")
    assert not flat[1].path.exists()  # type: ignore[union-attr]
    moved = store.update(flat[2].id, category="general")  # a category change writes the new layout
    assert rel(store, moved.path) == f"{MEMORIES}/general/2026-10/001/{flat[2].path.name}"  # type: ignore[union-attr]

    assert store.rebuild_index() == 3  # a full rebuild reads both layouts
    assert {m.id for m in store.list()} == {flat[0].id, flat[2].id, flat[3].id}
    assert_clean(store.root)


# --- memsite migrate ------------------------------------------------------------------------------------------------


def test_migrate_moves_every_file_to_its_month_folder_in_one_commit(store: MemoryStore) -> None:
    flat = write_flat(store, OLD)
    archived = archive_flat(store, -45, "The ledger crashed on a full disk")
    wrong = store.remember("Releases happen on Thursdays", category="events")  # 2026-11
    wrong_month = store.root / MEMORIES / "events" / "2026-10" / wrong.path.name  # type: ignore[union-attr]
    wrong_month.parent.mkdir()
    git(store.root, "mv", rel(store, wrong.path), rel(store, wrong_month))
    git(store.root, "commit", "-qm", "Moved by hand into the wrong month")
    kept = store.remember("Kept where it is", category="general")
    before, texts = head(store.root), {m.id: m.path.read_bytes() for m in flat}  # type: ignore[union-attr]

    done = store.migrate()

    assert (done.memories, done.archived) == (5, 1) and done.commit == head(store.root)
    assert git(store.root, "rev-list", f"{before}..HEAD").split() == [done.commit]
    message = git(store.root, "log", "-1", "--format=%B")
    assert message.startswith("Migrate memories to the numbered folders of their month\n")
    for memory in [*flat, wrong]:
        assert f"Memory-Id: {memory.id}\nCategory: {memory.category}\nAction: migrated\n" in message
    assert message.count("Action: migrated") == 6
    months = {flat[0].id: "cases/2026-09", flat[1].id: "cases/2026-10", flat[2].id: "preferences/2026-10",
              flat[3].id: "entities/2026-11", wrong.id: "events/2026-11", kept.id: "general/2026-11"}
    paths = {m.id: rel(store, m.path) for m in store.list()}
    assert {mid: path.rsplit("/", 1)[0] for mid, path in paths.items()} == \
           {mid: f"{MEMORIES}/{month}/001" for mid, month in months.items()}  # ids unchanged, files moved
    for memory in flat:  # not a byte changed, nor the file name
        assert (store.root / paths[memory.id]).read_bytes() == texts[memory.id]
        assert paths[memory.id].endswith("/" + memory.path.name)  # type: ignore[union-attr]
    assert not archived.exists()
    assert (store.root / "content/archive/cases/2026-09/001" / archived.name).is_file()
    assert store.rebuild_index() == 6 and {m.id: rel(store, m.path) for m in store.list()} == paths
    assert_clean(store.root)
    checked = check_working_tree(store.root)
    assert (checked.problems, checked.warnings, checked.count) == ([], [], 6)

    assert store.migrate().commit is None  # idempotent: nothing left to move, no commit
    assert head(store.root) == done.commit


def test_memsite_migrate_from_the_command_line(store: MemoryStore) -> None:
    write_flat(store, OLD[:2])
    archive_flat(store, -45, "The ledger crashed on a full disk")
    first = run(store, "migrate")
    assert first.exit_code == 0, first.output
    assert first.output.startswith("Migrated 2 memories and 1 archived memories to numbered folders of their month "
                                   "(commit ")
    second = run(store, "migrate")
    assert (second.exit_code, second.output) == (0, "Nothing to migrate: every memory is in a numbered folder of its "
                                                    "month.\n")


def test_an_interrupted_migration_leaves_the_repository_as_it_was(store: MemoryStore) -> None:
    flat = write_flat(store, OLD)
    before = head(store.root)

    def interrupt(done: int, total: int) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the files are read

    with pytest.raises(KeyboardInterrupt):
        store.migrate(progress=interrupt)
    assert head(store.root) == before and all(m.path.exists() for m in flat)  # type: ignore[union-attr]
    assert_clean(store.root)
    assert store.migrate().memories == len(flat)  # and it can run again


# --- memsite check --------------------------------------------------------------------------------------------------


def test_check_warns_about_misplaced_files_and_fails_on_another_categorys_folder(store: MemoryStore) -> None:
    flat = write_flat(store, [(-6 + n, "cases", f"Case {n} of the flaky checkout tests") for n in range(12)])
    result = run(store, "check")
    assert result.exit_code == 0, result.output  # existing repositories keep working
    lines = result.stdout.splitlines()
    first = rel(store, flat[0].path)
    assert lines[0] == (f"warning: {first}: in the flat layout; "
                        f"'memsite migrate' moves it into a numbered folder of {MEMORIES}/cases/2026-10/")
    assert lines[10] == ("warning: ... and 2 more memory files in the wrong place; "
                         "run 'memsite migrate' to move them all in one commit")
    assert len(lines) == 11 and result.stderr == "12 memories checked, no problems (see the warnings above).\n"

    run(store, "migrate")
    november = next(m for m in store.list() if m.created.month == 11)
    wrong = store.root / MEMORIES / "cases" / "2026-10" / november.path.name  # type: ignore[union-attr]
    november.path.rename(wrong)  # type: ignore[union-attr]
    result = run(store, "check")
    assert result.exit_code == 0
    assert result.stdout == (f"warning: {rel(store, wrong)}: in the month folder 2026-10, but created in 2026-11; "
                             f"'memsite migrate' moves it into a numbered folder of {MEMORIES}/cases/2026-11/\n")

    other = store.root / MEMORIES / "events" / "2026-10" / wrong.name  # moved by hand to recategorise, or by mistake
    other.parent.mkdir(parents=True)
    wrong.rename(other)
    result = run(store, "check")
    assert result.exit_code == 1
    assert result.stdout == (f"{rel(store, other)}: field 'category': 'cases', but the file is in the folder of "
                             f"'events'; move it to a numbered folder of {MEMORIES}/cases/2026-11/ (git mv) or set "
                             "'category: events'\n")


def test_an_archived_memory_in_the_wrong_month_folder_is_warned_about_and_moved(store: MemoryStore) -> None:
    archived = archive_flat(store, -45, "The ledger crashed on a full disk")  # created 2026-09
    flat = rel(store, archived)
    assert run(store, "check").stdout == (f"warning: {flat}: archived in the flat layout; 'memsite migrate' moves "
                                          "it into a numbered folder of content/archive/cases/2026-09/\n")
    store.migrate()
    wrong = f"content/archive/cases/2026-11/{archived.name}"
    (store.root / wrong).parent.mkdir()
    git(store.root, "mv", f"content/archive/cases/2026-09/001/{archived.name}", wrong)
    broken = store.root / "content/archive/cases/2026-10/broken.md"  # unreadable, so its month is unknown: left
    broken.parent.mkdir()
    broken.write_text("no frontmatter here\n")
    git(store.root, "add", "-A")
    git(store.root, "commit", "-qm", "Archive rearranged by hand")

    result = run(store, "check")
    assert result.exit_code == 0, result.output
    assert result.stdout == (f"warning: {wrong}: archived in the month folder 2026-11, but created in 2026-09; "
                             "'memsite migrate' moves it into a numbered folder of content/archive/cases/2026-09/\n")
    done = store.migrate()
    assert (done.memories, done.archived) == (0, 1)
    assert git(store.root, "show", "--name-status", "--format=", "HEAD").split() == \
           ["R100", wrong, f"content/archive/cases/2026-09/001/{archived.name}"]
    assert broken.read_text() == "no frontmatter here\n"
    assert run(store, "check").stdout == "" and store.migrate().commit is None
    assert_clean(store.root)


def test_an_unreadable_archived_file_of_the_flat_layout_is_named_by_check_and_stops_migrate(
        store: MemoryStore) -> None:
    broken = store.root / "content/archive/cases/broken.md"  # its month is unknown: it cannot be placed
    broken.parent.mkdir(parents=True)
    broken.write_text("no frontmatter here\n")
    git(store.root, "add", "-A")
    git(store.root, "commit", "-qm", "A broken archive file")
    result = run(store, "check")
    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    assert line.startswith("warning: content/archive/cases/broken.md: ")
    assert line.endswith("or move it out of content/archive/ if it is not a memory; "
                         "'memsite migrate' moves this archived memory once it can be read")
    before = head(store.root)
    migrated = run(store, "migrate")
    assert migrated.exit_code != 0
    assert "content/archive/cases/broken.md: " in migrated.output
    assert "move it out of content/archive/" in migrated.output
    assert head(store.root) == before


# --- review ---------------------------------------------------------------------------------------------------------


def test_diff_and_check_base_read_a_migration_as_files_moved(store: MemoryStore) -> None:
    flat = write_flat(store, OLD)
    archive_flat(store, -45, "The ledger crashed on a full disk")
    git(store.root, "tag", "base")
    store.migrate()

    data = json.loads(run(store, "diff", "base", "--json").output)
    moves = {c["id"]: c for c in data["changes"]}
    assert {c["action"] for c in data["changes"]} == {"moved"} and len(moves) == 5
    for memory in flat:
        change = moves[memory.id]
        assert change["moved_from"] == rel(store, memory.path) and change["reason"] == "memsite migrate"
    text = run(store, "diff", "base").output
    assert "**5 moved**" in text and "## Moved to another file, unchanged (5)" in text
    assert "deleted" not in text.lower() and "## Created" not in text
    checked = run(store, "check", "--base", "base")
    assert checked.exit_code == 0, checked.output


# --- the site ---------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_site_reads_both_layouts_at_once_and_a_memorys_address_survives_migration(store: MemoryStore,
                                                                                     tmp_path: Path) -> None:
    flat = write_flat(store, OLD)
    sharded = store.remember("Staging deploys need the vega VPN", category="entities")  # beside a flat file
    written = git(store.root, "log", "-1", "--format=%s").strip()
    home = tmp_path / "home"
    home.mkdir()

    def articles() -> dict[str, str]:
        memsite("-C", str(store.root), "build", home=home)
        found = {}
        for memory in [*flat, sharded]:  # each at /m/<id>/: the address does not depend on the file
            page = (store.root / "site" / "m" / memory.id / "index.html").read_text()
            start = page.index('<article class="memsite-memory"')
            found[memory.id] = page[start:page.index("</article>", start)]
        return found

    before = articles()  # both layouts at once: the flat file and the month folder share the page of 2026-11
    assert rel(store, sharded.path).startswith(f"{MEMORIES}/entities/2026-11/001/")
    assert "Staging deploys need the vega VPN" in before[sharded.id] and written in before[sharded.id]
    store.migrate()
    after = articles()
    assert after.keys() == before.keys()
    assert "Staging deploys need the vega VPN" in after[sharded.id] and written in after[sharded.id]
    for memory in flat:  # the same URL and anchor hold the memory, with its text and its whole history
        assert memory.content in after[memory.id]
        assert "Memories written before sharding" in after[memory.id]  # followed back to the flat file
        assert "Migrate memories to the numbered folders of their month" in after[memory.id]
    assert not list((store.root / "site" / "memories").glob("*/*/*/index.html"))  # no raw page per memory file


# --- merging --------------------------------------------------------------------------------------------------------


def test_git_merge_adds_up_recall_counts_of_a_memory_in_a_month_folder(store: MemoryStore, clock: Clock) -> None:
    memory = store.remember("The staging cluster is vega", category="entities")
    path = rel(store, memory.path)
    assert git(store.root, "check-attr", "merge", "--", path).strip().endswith("merge: memsite-memory")
    git(store.root, "branch", "other")
    for _ in range(2):
        store.recall("staging cluster vega")
    store.flush_activity()
    checkout(store, "-q", "other")
    with MemoryStore(store.root, agent="coder", clock=clock) as coder:
        for _ in range(3):
            coder.recall("staging cluster vega")
        coder.flush_activity()
    checkout(store, "-q", "main")
    git(store.root, "merge", "-q", "--no-edit", "other")
    merged = parse_memory((store.root / path).read_text(), path)
    assert merged.active_count == 5
    assert store.get(memory.id).active_count == 5
    assert_clean(store.root)


def test_a_branch_still_in_the_flat_layout_merges_into_the_migrated_files(store: MemoryStore, clock: Clock) -> None:
    flat = write_flat(store, OLD)
    git(store.root, "branch", "agent/coder")  # an agent's branch from before the migration
    store.migrate()
    checkout(store, "-q", "agent/coder")
    with MemoryStore(store.root, agent="coder", clock=clock) as coder:
        coder.recall("billing cold cache")
        coder.flush_activity()
        coder.update(flat[1].id, content="Webhook retries arrived twice after a deploy; dedupe by event id")
        assert coder.get(flat[1].id).path == flat[1].path  # written in place, in the flat layout
    checkout(store, "-q", "main")
    git(store.root, "merge", "-q", "--no-edit", "agent/coder")  # git follows the moves (same bytes)
    names = [m.path.name for m in flat[:2]]  # type: ignore[union-attr]
    assert git(store.root, "ls-files", "content/memories/cases").split() == [
        f"{MEMORIES}/cases/2026-09/001/{names[0]}", f"{MEMORIES}/cases/2026-10/001/{names[1]}"]
    assert store.get(flat[0].id).active_count == 1
    assert store.get(flat[1].id).content.endswith("dedupe by event id")
    assert check_working_tree(store.root).warnings == []
    assert_clean(store.root)
