"""Memory changes as a reviewer sees them: `memsite diff` and the invariants of `memsite check --base`."""

from __future__ import annotations

import json

from click.testing import CliRunner

from memsite import MemoryStore
from memsite.cli import main
from memsite.foundation.record import short_id
from tests.conftest import Clock, checkout, git


def run(store: MemoryStore, *args: str):
    return CliRunner().invoke(main, ["-C", str(store.root), *args])


def limit_cases(store: MemoryStore) -> None:
    settings = store.root / "mkdocs.yml"
    settings.write_text(settings.read_text().replace("        # capacity: {lines: {high: 500, low: 400}}",
                                                     "        capacity: {entries: {high: 3, low: 2}}"))
    git(store.root, "commit", "-qam", "Cap cases")


def test_diff_reports_every_kind_of_change_highlights_first(store: MemoryStore, clock: Clock) -> None:
    limit_cases(store)
    store = MemoryStore(store.root, agent="planner", clock=clock)  # reads the new capacity
    kept = store.remember("The user prefers tabs in Python files", category="preferences", tags=("python",))
    stale = store.remember("The office is in Berlin", category="profile")
    close = store.remember("Staging is the vega cluster in eu-central-1", category="entities")
    old_cases = [store.remember(f"Case {n}: the {w} service crashed and was restarted", category="cases")
                 for n, w in enumerate(("billing", "ledger", "search"))]
    git(store.root, "tag", "base")
    clock.advance(days=1)
    created = store.remember("Releases happen on Thursdays after the standup", category="events", tags=("release",))
    store.update(kept.id, content="The user prefers tabs in Python and Go files", tags=("python", "go"))
    store.remember("Staging is the vega cluster in eu-central-1 zone a", category="entities")  # merged into close
    store.forget(stale.id, reason="moved to Lisbon")
    store.remember("Case 4: the api service crashed and was restarted", category="cases")  # trims the oldest
    store.world.merge({"ci.status": "green"})
    with store.task(type="debug", keywords=["flaky"]) as task:
        task.problem("Flaky tests")
        task.solution("Pinned the browser")

    text = run(store, "diff", "base")
    assert text.exit_code == 0, text.output
    out = text.output
    assert out.index("## Highlights") < out.index("## Created")
    assert "**events**: Releases happen on Thursdays after the standup _(planner)_" in out
    assert "## Merged (1)" in out and short_id(close.id) in out
    assert "## Updated (1)" in out and "tags: \\[python\\] → \\[python, go\\]" in out
    assert "-The user prefers tabs in Python files" in out and "+The user prefers tabs in Python and Go files" in out
    assert "## Forgotten (1)" in out and "moved to Lisbon" in out
    assert "## Trimmed" in out and short_id(old_cases[0].id) in out and "capacity" in out
    assert "| `ci.status` | added | green |" in out
    assert "## Sessions added" in out and "debug_flaky" in out

    data = json.loads(run(store, "diff", "base", "HEAD", "--json").output)
    actions = {c["id"]: c["action"] for c in data["changes"]}
    assert actions[created.id] == "created" and actions[kept.id] == "updated" and actions[close.id] == "merged"
    assert actions[stale.id] == "forgotten" and actions[old_cases[0].id] == "trimmed"
    assert ["ci.status", "added", "green"] in data["world"]


def test_diff_reads_a_squash_merged_branch_as_its_commits(store: MemoryStore) -> None:
    git(store.root, "tag", "base")
    checkout(store, "-qb", "agent/coder")
    with MemoryStore(store.root, agent="coder") as coder:
        first = coder.remember("The ledger runs Postgres 15", category="entities")
        coder.forget(first.id, reason="wrong version")
        second = coder.remember("The ledger runs Postgres 16", category="entities")
    checkout(store, "-q", "main")
    git(store.root, "merge", "--squash", "-q", "agent/coder")
    git(store.root, "commit", "-q", "--no-edit")
    data = json.loads(run(store, "diff", "base", "--json").output)
    assert [(c["id"], c["action"]) for c in data["changes"]] == [(second.id, "created")]
    assert data["commits"] == 1


def test_diff_of_a_long_range_counts_thousands_of_changes(store: MemoryStore) -> None:
    git(store.root, "tag", "base")
    for batch in range(4):
        with store.transaction(f"Batch {batch}") as tx:
            for n in range(300):
                tx.remember(f"Fact {batch}-{n}: host h{batch}x{n} serves region r{n % 7}", category="entities",
                            dedupe=False)
    data = json.loads(run(store, "diff", "base", "--json").output)
    assert sum(c["action"] == "created" for c in data["changes"]) == 1200
    assert "… and 1000 more" in run(store, "diff", "base").output


def test_check_base_catches_each_invariant_violation(store: MemoryStore) -> None:
    keep = store.remember("The build server is orion", category="entities")
    gone = store.remember("Deploys happen on Tuesdays", category="events")
    reused = store.remember("A memory forgotten before the base", category="general")
    store.forget(reused.id, reason="obsolete")
    with store.task(type="debug", keywords=["crash"]) as task:
        task.problem("It crashed")
        task.solution("Restarted it")
    git(store.root, "tag", "base")
    assert run(store, "check", "--base", "base").exit_code == 0

    root = store.root
    session = next((root / "content" / "sessions").glob("*.md"))
    session.write_text(session.read_text() + "\nEdited later.\n")  # the event log is append-only
    gone.path.unlink()  # deleted without a forget or trim record
    resurrected = keep.path.parent / "resurrected.md"  # an id forgotten before the base, given out again
    resurrected.write_text(keep.path.read_text().replace(keep.id, reused.id).replace("orion", "vega"))
    (root / "content" / "memories" / "entities" / "key.md").write_text(
        keep.path.read_text().replace(keep.id, "01SECRETMEMORY00000000000A")
        .replace("The build server is orion", "aws key AKIAIOSFODNN7EXAMPLE"))
    (root / "content" / "memories" / "gossip").mkdir()
    (root / "content" / "memories" / "gossip" / "x.md").write_text(keep.path.read_text())
    broken = root / "content" / "memories" / "entities" / "broken.md"
    broken.write_text(keep.path.read_text().replace(keep.id, "01BROKENMEMORY00000000000A")
                      .replace("active_count: 0", "active_count: many"))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "A careless hand edit")

    result = run(store, "check", "--base", "base")
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    expect = [
        (session.name, "session record changed since base"),
        (gone.path.name, f"memory {gone.id} deleted since base without a forget or trim record"),
        ("resurrected.md", f"{reused.id} was used by an earlier memory"),
        ("key.md", "looks like"),
        ("gossip/x.md", "not a configured category"),
        ("broken.md", "active_count"),
    ]
    for name, message in expect:
        assert any(name in line and message in line for line in lines), (name, message, "\n".join(lines))


def test_report_counts_each_day_from_the_commits_and_is_reproducible(store: MemoryStore, clock: Clock) -> None:
    limit_cases(store)
    store = MemoryStore(store.root, agent="planner", clock=clock)
    with store.transaction("Import cases") as tx:  # a skip is recorded in the commit it was part of
        for n, word in enumerate(("billing", "ledger", "search")):
            tx.remember(f"Case {n}: the {word} service crashed and was restarted", category="cases")
        tx.remember("Case 0: the billing service crashed and was restarted", category="cases")  # skipped
    git(store.root, "tag", "day-one")
    clock.advance(days=1)
    coder = MemoryStore(store.root, agent="coder", clock=clock)
    coder.remember("Case 3: the api service crashed and was restarted", category="cases")  # trims
    coder.remember("Case 3: the api service crashed and was restarted again", category="cases")  # merged
    with coder.task(type="debug", keywords=["crash"]) as task:
        task.problem("Crashes")
        task.solution("Restarted")

    first = json.loads(run(store, "report", "--date", "2026-11-01", "--json").output)[0]
    assert first["counts"] == {"created": 3, "skipped": 1}
    assert first["agents"]["planner"]["created"] == 3
    second = json.loads(run(store, "report", "--json").output)[0]
    assert second["day"] == "2026-11-02"
    assert second["counts"]["created"] == 1 and second["counts"]["merged"] == 1
    assert second["counts"]["trimmed"] == 2 and second["sessions"] == ["2026-11-02_debug_crash"]
    text = run(store, "report", "--since", "2026-11-01").output
    assert text.index("# Report 2026-11-01") < text.index("# Report 2026-11-02")
    assert "Case 3: the api service crashed and was restarted" in text and "| coder | 1 | 1 | 0 | 2 | 1 |" in text
    at_tag = json.loads(run(store, "report", "--since", "2026-11-01", "--rev", "day-one", "--json").output)
    assert [r["day"] for r in at_tag] == ["2026-11-01"]
    coder.close()


def test_a_supersession_is_one_change_with_both_texts_and_a_rewrite_is_shown_side_by_side(store: MemoryStore,
                                                                                         clock: Clock) -> None:
    tomas = store.remember("The user's manager is Tomas Novak, head of payments.", category="profile")
    deploy = store.remember("Deploys go through make release.", category="patterns")
    git(store.root, "tag", "base")
    clock.advance(days=1)
    ana = store.remember("The user's manager is now Ana Silva; Tomas Novak moved to the risk team.",
                         category="profile", supersedes=tomas.id)
    store.update(deploy.id, content="Deploys are blocked on Fridays by the change freeze.")
    berlin = store.remember("The user lives in Berlin.", category="profile")
    paris = store.remember("The user lives in Paris.", category="profile")  # flagged: no language model here

    out = run(store, "diff", "base", "--format", "markdown").output
    assert "**1 superseded, 2 created, 1 updated**" in out
    assert out.index("## To review: possible contradictions") < out.index("## Facts that changed (1)")
    assert (f"- `{short_id(paris.id)}` **profile**: The user lives in Paris. _(planner)_ may replace "
            f"`{short_id(berlin.id)}`") in out
    assert (f"- superseded `{short_id(tomas.id)}` by `{short_id(ana.id)}` **profile**: The user's manager is Tomas "
            "Novak, head of "
            "payments. → The user's manager is now Ana Silva; Tomas Novak moved to the risk team. _(planner)_") in out
    assert ("  | was | now |\n  |---|---|\n  | The user's manager is Tomas Novak, head of payments. | "
            "The user's manager is now Ana Silva; Tomas Novak moved to the risk team. |") in out
    assert short_id(ana.id) not in out.split("## Created")[1]  # the successor is part of the change, not beside it
    assert ("  | before | after |\n  |---|---|\n  | Deploys go through make release. | Deploys are blocked on "
            "Fridays by the change freeze. |") in out
    assert "```diff" not in out

    terminal = run(store, "diff", "base", "--format", "text").output
    assert "  was: The user's manager is Tomas Novak, head of payments." in terminal
    assert "  now: The user's manager is now Ana Silva; Tomas Novak moved to the risk team." in terminal
    data = json.loads(run(store, "diff", "base", "HEAD", "--json").output)
    change = next(c for c in data["changes"] if c["id"] == tomas.id)
    assert change["action"] == "superseded" and change["superseded_by"] == ana.id
    assert change["texts"][1].startswith("The user's manager is now Ana Silva")
    assert ana.id not in {c["id"] for c in data["changes"]}
