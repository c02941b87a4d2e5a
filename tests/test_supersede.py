"""Facts that change: a memory superseded by another, valid until then, and memory as of a moment."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.cli import main
from memsite.foundation.errors import FormatError, InvalidInput, NotFound
from memsite.foundation.fileformat import format_memory, parse_memory
from memsite.foundation.record import short_id

from .conftest import Clock, assert_clean, git

MARCH = datetime(2026, 3, 1, 9, 0, 0, tzinfo=UTC)
TOMAS = "The user's manager is Tomas Novak, head of payments."
ANA = "The user's manager is now Ana Silva; Tomas Novak moved to the risk team."
QUESTION = "who is the user's manager?"


@pytest.fixture
def march() -> Clock:
    return Clock(MARCH)


@pytest.fixture
def team(tmp_path: Path, march: Clock) -> Iterator[MemoryStore]:
    """A repository first committed on 2026-03-01, written by 'planner'."""
    with MemoryStore.init(tmp_path / "memory", agent="planner", clock=march) as opened:
        git(opened.root, "config", "gc.autoDetach", "false")
        yield opened


def at(clock: Clock, day: str) -> None:
    clock.now = datetime.fromisoformat(day + "T09:00:00+00:00")


def run(repo: Path, *args: str, agent: str = "cli-agent"):
    return CliRunner().invoke(main, ["-C", str(repo), "--agent", agent, *args])


def abstracts(hits) -> list[str]:  # type: ignore[no-untyped-def]
    return [h.memory.abstract for h in hits]


# --- the two examples -----------------------------------------------------------------


def test_the_new_manager_is_recalled_and_the_old_one_only_as_of_a_date_between(team: MemoryStore,
                                                                                march: Clock) -> None:
    at(march, "2026-03-02")
    tomas = team.remember(TOMAS, category="profile")
    at(march, "2026-06-10")
    ana = team.remember(ANA, category="profile", supersedes=tomas.id)
    at(march, "2026-06-11")
    assert abstracts(team.recall(QUESTION)) == [ANA]
    assert abstracts(team.recall(QUESTION, as_of="2026-04-01")) == [TOMAS]
    assert abstracts(team.recall(QUESTION, as_of="2026-04-01", record_time=True)) == [TOMAS]
    both = team.recall(QUESTION, include_superseded=True)
    assert {h.memory.id: h.memory.superseded_by for h in both} == {ana.id: None, tomas.id: ana.id}


def test_moving_from_berlin_to_paris(team: MemoryStore, march: Clock) -> None:
    at(march, "2026-03-05")
    berlin = team.remember("The user lives in Berlin.", category="profile")
    at(march, "2026-09-01")
    team.remember("The user lives in Paris.", category="profile", supersedes=berlin.id)
    at(march, "2026-09-02")
    assert abstracts(team.recall("where does the user live")) == ["The user lives in Paris."]
    assert abstracts(team.recall("where does the user live", as_of="2026-05-01")) == ["The user lives in Berlin."]
    assert "Berlin" not in team.load_core() and "Paris" in team.load_core()
    assert "Berlin" in team.load_core(as_of="2026-05-01") and "Paris" not in team.load_core(as_of="2026-05-01")


# --- the format and the commit ----------------------------------------------------------------


def test_one_commit_writes_the_new_memory_and_marks_the_old_in_its_file(team: MemoryStore, march: Clock) -> None:
    old = team.remember(TOMAS, category="profile")
    old_file = old.path.read_text()
    march.advance(days=100)
    new = team.remember(ANA, category="profile", supersedes=old.id)
    assert new.action == "created" and new.supersedes == old.id
    assert old.path.exists()  # the old file stays in its place
    marked = old.path.read_text()
    removed = set(old_file.splitlines()) - set(marked.splitlines())
    added = [line for line in marked.splitlines() if line not in old_file.splitlines()]
    assert removed == {"updated: '2026-03-01T09:00:00Z'"}  # every other line as it was, the new ones at the end
    assert added == ["updated: '2026-06-09T09:00:00Z'", f"superseded_by: {new.id}",
                     "valid_until: '2026-06-09T09:00:00Z'"]
    assert marked.index("valid_until") > marked.index("pinned: false")
    assert f"supersedes: {old.id}\n---" in new.path.read_text()
    changed = git(team.root, "show", "--name-only", "--format=%s", "HEAD").split()
    assert changed[0] == "Supersede" and {str(old.path.relative_to(team.root)),
                                           str(new.path.relative_to(team.root))} <= set(changed)
    body = git(team.root, "log", "-1", "--format=%B")
    assert f"Memory-Id: {old.id}\nCategory: profile\nAction: superseded\nReason: by {new.id}" in body
    assert_clean(team.root)


def test_the_chain_fields_read_back_and_write_canonically(team: MemoryStore) -> None:
    old = team.remember(TOMAS, category="profile")
    team.remember(ANA, category="profile", supersedes=old.id)
    text = team.get(old.id).path.read_text()
    memory = parse_memory(text, "x.md", category="profile")
    assert format_memory(memory) == text


@pytest.mark.parametrize(("edit", "field"), [
    (lambda t: t.replace("valid_until: ", "expires: "), "valid_until"),  # superseded_by without valid_until
    (lambda t: t.replace("valid_until: '2026-", "valid_until: '26-"), "valid_until"),
    (lambda t: t.replace("superseded_by: ", "superseded_by: x "), "superseded_by"),
])
def test_a_broken_chain_field_names_the_file_the_field_and_the_fix(team: MemoryStore, edit, field) -> None:  # type: ignore[no-untyped-def]
    old = team.remember(TOMAS, category="profile")
    team.remember(ANA, category="profile", supersedes=old.id)
    with pytest.raises(FormatError, match=f"x.md: field '{field}': expected .*; "):
        parse_memory(edit(old.path.read_text()), "x.md", category="profile")


# --- bad input: one line, nothing written ---------------------------------------------------------


def test_refused_supersessions_say_why_and_write_nothing(team: MemoryStore, march: Clock) -> None:
    tomas = team.remember(TOMAS, category="profile")
    ana = team.remember(ANA, category="profile", supersedes=tomas.id)
    tip = team.tip()
    with pytest.raises(NotFound, match="supersedes: no memory with id 'NOSUCHMEMORY01'"):
        team.remember("The user's manager is Li Wei.", category="profile", supersedes="NOSUCHMEMORY01")
    with pytest.raises(InvalidInput, match=f"supersedes: {tomas.id} was already superseded by {ana.id} on "
                                           f"2026-03-01; supersede the newest, {ana.id} .*, instead"):
        team.remember("The user's manager is Li Wei.", category="profile", supersedes=tomas.id)
    with pytest.raises(InvalidInput, match="cannot supersede itself"):
        team.supersede(ana.id, ana.id)
    with pytest.raises(InvalidInput, match=f"superseding {ana.id} by {tomas.id} would make a cycle"):
        team.supersede(ana.id, tomas.id)
    assert team.tip() == tip
    assert_clean(team.root)


def test_another_category_is_allowed_and_shown(team: MemoryStore) -> None:
    old = team.remember("Project Atlas ships in May.", category="events")
    made = run(team.root, "remember", "Project Atlas was cancelled.", "-c", "entities", "--supersedes", old.id[:8])
    assert made.exit_code == 0, made.output
    assert f", superseding {old.id} (in events) (commit " in made.output
    assert team.get(old.id).superseded_by is not None


def test_the_cli_refuses_in_one_line(team: MemoryStore) -> None:
    old = team.remember(TOMAS, category="profile")
    run(team.root, "remember", ANA, "-c", "profile", "--supersedes", old.id)
    again = run(team.root, "remember", "The manager is Li Wei.", "-c", "profile", "--supersedes", old.id)
    assert again.exit_code == 1
    assert again.output.startswith(f"Error: supersedes: {old.id} was already superseded by ")
    assert len(again.output.strip().splitlines()) == 1 and "Traceback" not in again.output


def test_supersede_marks_a_pair_written_already(team: MemoryStore, march: Clock) -> None:
    old = team.remember("The user lives in Berlin.", category="profile")
    march.advance(days=3)
    new = team.remember("The user lives in Paris.", category="profile")
    done = run(team.root, "supersede", old.id, new.id, "--reason", "moved in June", agent="reviewer")
    assert done.exit_code == 0, done.output
    assert done.output.startswith(f"Superseded {old.id} by {new.id} (commit ")
    assert team.get(old.id).superseded_by == new.id and team.get(new.id).supersedes == old.id
    assert git(team.root, "log", "-1", "--format=%an").strip() == "reviewer"
    assert f"Superseded {old.id} (The user lives in Berlin.) by {new.id}: moved in June." in \
        git(team.root, "log", "-1", "--format=%B")


# --- left out by default, brought back when asked ----------------------------------------------------


def test_superseded_memories_leave_rankings_core_and_capacity(tmp_path: Path, march: Clock) -> None:
    with MemoryStore.init(tmp_path / "m", agent="planner", clock=march) as store:
        text = (store.root / "mkdocs.yml").read_text()
        (store.root / "mkdocs.yml").write_text(text.replace("      profile:\n", "      profile:\n        capacity: "
                                                            "{entries: {high: 3, low: 2}}\n", 1))
    with MemoryStore(tmp_path / "m", agent="planner", clock=march) as store:
        assert store.config.category("profile").capacity.bounded
        first = store.remember("The user lives in Berlin.", category="profile", pinned=True)
        chain = [first]
        for city in ("Paris", "Rome", "Oslo"):
            march.advance(days=1)
            chain.append(store.remember(f"The user lives in {city}.", category="profile", pinned=True,
                                        supersedes=chain[-1].id))
        march.advance(days=1)
        store.remember("The user's name is Ada.", category="profile")
        assert [m.id for m in store.list(category="profile")][:4] == [m.id for m in chain]  # nothing was trimmed
        assert {h.memory.abstract for h in store.rank(category="profile")} == {"The user lives in Oslo.",
                                                                                "The user's name is Ada."}
        assert len(store.rank(category="profile", include_superseded=True)) == 5
        core = store.load_core()
        assert "Oslo" in core and "Berlin" not in core and "Paris" not in core


def test_what_the_writer_reads_after_a_supersession_is_what_a_rebuilt_catalog_reads(team: MemoryStore,
                                                                                     march: Clock) -> None:
    """The superseded memory's row changes in place (its text, words and sketch stay indexed as they were): every
    field, its commit and its words read as from a catalog built again from the files."""
    old = team.remember(TOMAS, category="profile", tags=["org"])
    other = team.remember("The user's office is on the fourth floor.", category="profile")
    march.advance(days=30)
    new = team.remember(ANA, category="profile", supersedes=old.id)
    team.update(other.id, pinned=True)  # a change of no indexed text either
    team.update(new.id, content=ANA + " She started on Monday.")  # and one of the text
    ids = [old.id, other.id, new.id]

    def seen(store: MemoryStore) -> list[object]:
        fields = [(m.replace(active_count=0, last_recalled=None), m.extra, m.commit, m.path)  # (recalls: below)
                  for m in (store.get(i) for i in ids)]
        hits = [(h.memory.id, h.memory.superseded_by) for h in store.recall("Tomas Novak payments", limit=3,
                                                                            include_superseded=True)]
        twin = store.remember(TOMAS, category="profile", tags=["org"])  # superseded: not a duplicate of it
        return [fields, hits, twin.action, twin.id == old.id]

    written = seen(team)
    assert written[1][0] == (old.id, new.id) and written[2] == "created"
    git(team.root, "reset", "--hard", "--quiet", "HEAD~1")  # (the twin written just now)
    team.close()
    (team.root / ".memsite" / "catalog.sqlite3").unlink()
    with MemoryStore(team.root, agent="planner", clock=march) as rebuilt:
        assert seen(rebuilt) == written


def test_the_same_fact_written_again_after_it_was_superseded_is_current_again(team: MemoryStore) -> None:
    berlin = team.remember("The user lives in Berlin.", category="profile")
    paris = team.remember("The user lives in Paris.", category="profile", supersedes=berlin.id)
    back = team.remember("The user lives in Berlin.", category="profile")
    assert back.action == "created" and back.id not in (berlin.id, paris.id)


def test_recall_all_marks_what_was_superseded(team: MemoryStore) -> None:
    old = team.remember(TOMAS, category="profile")
    new = team.remember(ANA, category="profile", supersedes=old.id)
    shown = run(team.root, "recall", "manager", "--all")
    assert shown.exit_code == 0, shown.output
    line = next(line for line in shown.output.splitlines() if short_id(old.id) in line)
    assert line.endswith(f"[superseded by {short_id(new.id)} on 2026-03-01]")
    assert short_id(old.id) not in run(team.root, "recall", "manager").output


def test_show_prints_the_chain_oldest_to_newest(team: MemoryStore, march: Clock) -> None:
    at(march, "2026-03-02")
    tomas = team.remember(TOMAS, category="profile")
    at(march, "2026-06-10")
    ana = team.remember(ANA, category="profile", supersedes=tomas.id)
    at(march, "2026-08-01")
    with MemoryStore(team.root, agent="reviewer", clock=march) as other:
        li = other.remember("The user's manager is Li Wei since August.", category="profile", supersedes=ana.id)
    shown = run(team.root, "show", ana.id)
    assert shown.exit_code == 0, shown.output
    chain = shown.output.split("Chain, oldest to newest:\n")[1].splitlines()
    assert chain == [
        f"  {short_id(tomas.id)} {TOMAS} (profile), 2026-03-02 by planner → replaced by {short_id(ana.id)} on "
        "2026-06-10 by planner",
        f"* {short_id(ana.id)} {ANA} (profile), 2026-06-10 by planner → replaced by {short_id(li.id)} on 2026-08-01 "
        "by reviewer",
        f"  {short_id(li.id)} The user's manager is Li Wei since August. (profile), 2026-08-01 by reviewer",
    ]
    assert "\nuntil:     2026-08-01T09:00:00Z\n" in shown.output


# --- as of -------------------------------------------------------------------------------------------------


def test_valid_time_and_record_time_differ_for_a_correction_made_later(team: MemoryStore, march: Clock) -> None:
    """Valid time follows what the files say now; record time what the commits said then."""
    at(march, "2026-03-02")
    tomas = team.remember(TOMAS, category="profile")
    at(march, "2026-06-10")
    ana = team.remember(ANA, category="profile", supersedes=tomas.id)
    # later someone finds Tomas had left already in April: the file is corrected by hand
    path = team.get(tomas.id).path
    path.write_text(path.read_text().replace("valid_until: '2026-06-10T09:00:00Z'",
                                             "valid_until: '2026-04-15T00:00:00Z'"))
    git(team.root, "commit", "-qam", "Tomas left in April")
    # Valid time: Tomas no longer held, Ana not yet written.
    assert abstracts(team.recall(QUESTION, as_of="2026-05-01")) == []
    assert abstracts(team.recall(QUESTION, as_of="2026-05-01", record_time=True)) == [TOMAS]  # believed then
    assert abstracts(team.recall(QUESTION, as_of="2026-04-01")) == [TOMAS]
    assert team.get(ana.id).supersedes == tomas.id


def test_as_of_reads_count_no_recall(team: MemoryStore, march: Clock) -> None:
    at(march, "2026-03-02")
    tomas = team.remember(TOMAS, category="profile")
    at(march, "2026-04-02")
    team.recall(QUESTION, as_of="2026-03-10")
    team.recall(QUESTION, as_of="2026-03-10", record_time=True)
    assert team.get(tomas.id).active_count == 0


@pytest.mark.parametrize(("when", "message"), [
    ("2026-02-01", "as_of: '2026-02-01' is before this memory repository existed (its first commit is from "
                   "2026-03-01 09:00 UTC); give a later time"),
    ("2026-12-24", "as_of: '2026-12-24' is in the future (now is 2026-07-01 09:00 UTC); give a time that has passed"),
    ("last week", "as_of: 'last week' is not a date or a time; use 2026-03-01, 2026-03-01T09:30Z, '2 weeks ago', "
                  "'yesterday', 'today' or 'now'"),
])
def test_a_moment_outside_the_history_is_one_clear_line(team: MemoryStore, march: Clock, when: str,
                                                        message: str) -> None:
    at(march, "2026-07-01")
    team.remember(TOMAS, category="profile")
    for call in (lambda: team.recall(QUESTION, as_of=when), lambda: team.load_core(as_of=when),
                 lambda: team.recall(QUESTION, as_of=when, record_time=True)):
        with pytest.raises(InvalidInput) as refused:
            call()
        assert str(refused.value) == message


def test_the_cli_reads_memory_as_of_a_date(team: MemoryStore, march: Clock) -> None:
    at(march, "2026-03-02")
    tomas = team.remember(TOMAS, category="profile")
    at(march, "2026-06-10")
    ana = team.remember(ANA, category="profile", supersedes=tomas.id)
    then = run(team.root, "recall", "manager", "--as-of", "2026-03-01", "--json")  # before Tomas was written
    assert then.exit_code == 0 and json.loads(then.output) == []
    april = run(team.root, "recall", "manager", "--as-of", "2026-04-01", "--record-time", "--json")
    assert [hit["id"] for hit in json.loads(april.output)] == [tomas.id]
    shown = run(team.root, "show", tomas.id, "--as-of", "2026-04-01")
    assert shown.exit_code == 0, shown.output
    assert "until:" not in shown.output and "Chain" not in shown.output  # not replaced yet then
    early = run(team.root, "show", ana.id, "--as-of", "2026-04-01")
    assert early.exit_code == 1 and early.output == (f"Error: memory {ana.id} was not written yet at "
                                                     "2026-04-01T23:59:59Z: it was created 2026-06-10T09:00:00Z\n")
    future = run(team.root, "recall", "manager", "--as-of", "2999-01-01")
    assert future.exit_code == 1 and "is in the future" in future.output and len(future.output.splitlines()) == 1
    core = run(team.root, "core", "--as-of", "2026-04-01", agent="planner")
    assert TOMAS in core.output and ANA not in core.output


def test_a_supersession_on_one_branch_survives_a_merge_with_recalls_on_the_other(team: MemoryStore) -> None:
    from memsite.features.merge import merge_memory

    old = team.remember(TOMAS, category="profile")
    base = old.path.read_text()
    recalled = format_memory(old.replace(active_count=3))
    team.remember(ANA, category="profile", supersedes=old.id)
    superseded = old.path.read_text()
    for ours, theirs in ((recalled, superseded), (superseded, recalled)):
        merged, clash = merge_memory(base, ours, theirs)
        memory = parse_memory(merged, "x.md")
        assert not clash and memory.superseded_by is not None and memory.valid_until is not None
        assert memory.active_count == 3
