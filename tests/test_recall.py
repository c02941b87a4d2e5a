"""Recall: ranking, the search index, activity counts, dedup and the agent tools."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsite import MemoryStore, decay_score
from memsite.api import storage_of
from memsite.cli import main
from memsite.features import retrieval
from memsite.foundation.errors import InvalidInput
from memsite.foundation.record import new_id
from memsite.foundation.text import STOPWORDS, search_terms
from memsite.storage import sketch_filter
from memsite.storage.sqlite import transaction
from memsite.storage.transaction import AHEAD_BATCH

from .conftest import START, Clock, assert_clean, checkout, git, head

ROOT = Path(__file__).resolve().parent.parent
fixture_ok = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# --- the formula ------------------------------------------------------------------


@pytest.mark.parametrize(("days", "factor"), [(0, 1.0), (30, 0.5), (60, 0.25)])
def test_the_decay_cases_of_the_original_spec(days: int, factor: float) -> None:
    for count in (0, 10):
        boost = 1 + 0.1 * math.log(1 + count)
        score = decay_score(0.8, START, count, START + timedelta(days=days))
        assert score == pytest.approx(0.8 * factor * boost)


def test_a_memory_recalled_ten_times_outranks_one_recalled_once() -> None:
    now = START + timedelta(days=12)
    assert decay_score(1.0, START, 10, now) > decay_score(1.0, START, 1, now)


def test_pinned_memories_do_not_decay() -> None:
    assert decay_score(1.0, START, 0, START + timedelta(days=365), pinned=True) == 1.0


def test_the_parameters_come_from_configuration(store: MemoryStore, clock: Clock) -> None:
    store.remember("old fact about kubernetes")
    clock.advance(days=10)
    path = store.root / "mkdocs.yml"
    path.write_text(path.read_text().replace("half_life_days: 30", "half_life_days: 10"))
    git(store.root, "commit", "-qam", "faster decay")
    with MemoryStore(store.root, agent="planner", clock=clock) as tuned:
        (hit,) = tuned.rank()
        assert hit.decay == pytest.approx(0.5)


# --- ranking on a small repository ---------------------------------------------------


def test_relevance_decides_what_is_recalled_and_time_orders_what_is_close(store: MemoryStore, clock: Clock) -> None:
    clock.now = START - timedelta(days=180)
    old = store.remember("Deploy to staging with make deploy-staging", category="patterns")
    clock.now = START
    new = store.remember("Staging deploys need the VPN; deploy from the bastion host", category="patterns")
    store.remember("Unrelated note about lunch", category="general")
    hits = store.recall("deploy staging")
    # The six-month-old memory matches the words best: it stays first, though decay alone would give it 1/64.
    assert [h.memory.id for h in hits] == [old.id, new.id]
    assert hits[0].relevance == pytest.approx(1.0) and 0.5 < hits[1].relevance < 1
    assert hits[0].decay == pytest.approx(2 ** -6) and hits[1].decay == pytest.approx(1.0)
    for h in hits:  # time is a bounded prior: it takes at most PRIOR off the relevance
        assert h.prior == pytest.approx(1 - retrieval.PRIOR + retrieval.PRIOR * min(1.0, h.decay * h.boost))
        assert h.score == pytest.approx(h.relevance * h.prior)
        assert h.relevance * (1 - retrieval.PRIOR) <= h.score <= h.relevance
    # The seed's ranking, for agents that want the newest first: relevance x decay x boost.
    fresh = store.recall("deploy staging", ranking="freshness")
    assert [h.memory.id for h in fresh] == [new.id, old.id]
    for h in fresh:
        assert h.prior is None and h.score == pytest.approx(h.relevance * h.decay * h.boost)


def test_time_orders_memories_of_about_the_same_relevance(store: MemoryStore, clock: Clock) -> None:
    clock.now = START - timedelta(days=90)
    old = store.remember("The release checklist lives in the wiki", category="patterns", dedupe=False)
    clock.now = START
    new = store.remember("The release checklist lives in the tracker", category="patterns", dedupe=False)
    assert [h.memory.id for h in store.recall("release checklist")] == [new.id, old.id]


def test_the_first_limit_hits_are_the_first_of_all_hits(store: MemoryStore, clock: Clock) -> None:
    # Recall ranks only the candidates that can still reach the first `limit` (the prior takes at most PRIOR
    # off a relevance): asking for fewer hits never changes which come first, whatever their ages and recalls.
    rng = random.Random(7)
    words = ["deploy", "staging", "ledger", "refund", "invoice", "queue", "retry", "timeout", "vpn", "bastion"]
    with store.transaction("Memories of a year") as tx:
        for i in range(40):
            clock.now = START - timedelta(days=rng.randrange(365))
            text = " ".join(rng.sample(words, rng.randrange(1, 5))) + f" note {i}"
            tx.remember(text, category="general", dedupe=False, pinned=i % 9 == 0)
    clock.now = START
    for _ in range(3):  # recall counts raise some memories' boost
        store.recall("ledger refund")
    for question in ("deploy staging", "ledger refund invoice", "queue retry timeout", "vpn bastion deploy"):
        everything = [h.memory.id for h in store.explain(question, limit=1000) if h.why.kept]
        assert len(everything) > 8, question
        for limit in (1, 2, 3, 5, 8):
            first = [h.memory.id for h in store.explain(question, limit=limit) if h.why.kept]
            assert first == everything[:limit], (question, limit)


def test_recall_by_the_dates_memories_were_written(store: MemoryStore, clock: Clock) -> None:
    clock.now = START - timedelta(days=200)
    spring = store.remember("The payments team adopted trunk-based development", category="events")
    clock.now = START - timedelta(days=10)
    recent = store.remember("The payments team moved stand-ups to 10:00", category="events")
    clock.now = START
    ids = lambda hits: [h.memory.id for h in hits]  # noqa: E731
    assert sorted(ids(store.recall("payments team"))) == sorted([spring.id, recent.id])
    assert ids(store.recall("payments team", since="2 weeks ago")) == [recent.id]
    assert ids(store.recall("payments team", until="1 month ago")) == [spring.id]
    day = (START - timedelta(days=200)).date().isoformat()
    assert ids(store.recall("payments team", since=day, until=day)) == [spring.id]  # a date alone: its whole day
    assert ids(store.recall("payments team", since=START - timedelta(days=300), until="yesterday")) == \
        ids(store.recall("payments team"))
    hit = store.recall("trunk-based development")[0]
    assert hit.memory.created == START - timedelta(days=200)  # every hit carries its dates


@pytest.mark.parametrize(("since", "until", "message"), [
    ("banana", None, "since: 'banana' is not a date or a time; use 2026-03-01"),
    ("2026-03-01", "2026-02-01", "since (2026-03-01T00:00:00Z) is after until (2026-02-01T23:59:59Z)"),
    ("2027-01-01", None, "since: 2027-01-01T00:00:00Z is in the future"),
    (None, 12, "until: expected a date or a time, got int"),
])
def test_bad_dates_are_one_clear_line(store: MemoryStore, since: object, until: object, message: str) -> None:
    store.remember("The payments team adopted trunk-based development", category="events")
    with pytest.raises(InvalidInput) as caught:
        store.recall("payments", since=since, until=until)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert store.recall("payments", until="2099-01-01")  # a future 'until' takes in everything


def test_the_sql_ranking_agrees_with_decay_score(store: MemoryStore, clock: Clock) -> None:
    made = []
    for i, (days, pinned) in enumerate([(0, False), (7, False), (45, True), (90, False)]):
        clock.now = START + timedelta(days=days)
        made.append((store.remember(f"memory number {i} about caching", pinned=pinned), days, pinned))
    for _ in range(3):
        store.recall("number 0 caching")
    clock.now = START + timedelta(days=100)
    for hit in store.rank():
        expected = decay_score(1.0, hit.memory.created, hit.memory.active_count, clock.now, pinned=hit.memory.pinned)
        assert hit.score == pytest.approx(expected)


def test_filters_and_min_score(store: MemoryStore, clock: Clock) -> None:
    a = store.remember("Redis cache keys expire after an hour", category="entities", tags=["redis", "cache"])
    b = store.remember("Redis runs on port 6380 in staging", category="entities", tags=["redis"])
    with MemoryStore(store.root, agent="ops", clock=clock) as ops:
        c = ops.remember("Redis memory limit is 2 GB", category="events", tags=["redis"])
    ids = lambda hits: sorted(h.memory.id for h in hits)  # noqa: E731
    assert ids(store.recall("redis", limit=10)) == sorted([a.id, b.id, c.id])
    assert ids(store.recall("redis", category="entity")) == sorted([a.id, b.id])
    assert ids(store.recall("redis", tags=["redis", "cache"])) == [a.id]
    assert ids(store.recall("redis", agent="ops")) == [c.id]
    assert ids(store.recall("redis", tags=["redis"])) == sorted([a.id, b.id, c.id])  # a tag all of them have
    assert len(store.recall("redis", limit=2)) == 2
    store.update(a.id, tags=["redis"])
    store.update(b.id, tags=["redis", "cache"])
    assert ids(store.recall("redis", tags=["cache", "redis"])) == [b.id]
    store.rebuild_index()
    assert ids(store.recall("redis", tags=["cache"])) == [b.id] and store.recall("redis", tags=["ops"]) == []
    store.forget(b.id)
    assert store.recall("redis", tags=["cache"]) == []
    clock.advance(days=60)
    assert store.recall("redis", min_score=0.5, ranking="freshness") == []  # a quarter of its score is left
    assert store.recall("redis", min_score=0.95) == [] and store.recall("redis", min_score=0.5)


@fixture_ok
@given(st.text(max_size=60))
def test_any_text_is_a_valid_query(store: MemoryStore, query: str) -> None:
    if not store.list():
        store.remember('Quotes " and * and ( NEAR ) OR AND: all are just words')
    memory = store.list()[0]
    hits = store.recall(query)  # never a syntax error
    assert [h.memory.id for h in hits] in ([], [memory.id])
    terms = set(search_terms(query))
    if terms & {"quotes", "near", "words"}:  # a word it holds, whatever surrounds it
        assert hits and hits[0].score > 0
    elif not terms:  # no word, or stopwords only ("and", "or", "are", "just"): nothing is relevant
        assert hits == []


# FTS5 syntax and punctuation around a word (operators made of letters stand apart from it, as people write them)
OPERATORS = ['"', "*", "(", ")", ":", "^", "-", "+", "{", "}", "'", ",", ".", " NEAR(", " OR ", " AND ", " NOT ",
             " NEAR/2 ", "\\", "?", "!", "@", "#"]


@fixture_ok
@given(word=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789éüñ", min_size=3, max_size=12)
       .filter(lambda w: w not in STOPWORDS and w != "near"),
       before=st.lists(st.sampled_from(OPERATORS), max_size=4), after=st.lists(st.sampled_from(OPERATORS), max_size=4),
       upper=st.booleans())
def test_a_stored_word_wrapped_in_punctuation_and_query_operators_is_recalled(
        store: MemoryStore, word: str, before: list[str], after: list[str], upper: bool) -> None:
    memory = store.remember(f"The ticket mentions {word} twice: {word}.", category="events", dedupe=False)
    query = "".join(before) + (word.upper() if upper else word) + "".join(after)
    assert memory.id in [h.memory.id for h in store.recall(query, limit=100)], query


def test_stopwords_do_not_drown_the_words_that_matter(store: MemoryStore) -> None:
    target = store.remember("Postgres runs version 15 in staging")
    for i in range(5):
        store.remember(f"What is the plan for the week {i}? It is to do the work.")
    assert store.recall("what is the postgres version?")[0].memory.id == target.id


# --- the index stays current -------------------------------------------------------------


def test_the_index_sees_a_write_by_another_process_and_a_pull(store: MemoryStore, tmp_path: Path) -> None:
    assert store.recall("zeppelin") == []
    script = ("from memsite import MemoryStore\n"
              f"MemoryStore({str(store.root)!r}, agent='other').remember('The zeppelin hangar is in hall 7')")
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert [h.memory.agent for h in store.recall("zeppelin")] == ["other"]
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(store.root), str(clone))
    with MemoryStore(clone, agent="far") as far:
        far.remember("Airships need helium, not hydrogen")
        git(clone, "push", "-q", "origin", "HEAD:refs/heads/incoming")
    git(store.root, "merge", "-q", "--ff-only", "incoming")
    assert [h.memory.agent for h in store.recall("helium")] == ["far"]


def test_a_deleted_index_is_rebuilt(store: MemoryStore) -> None:
    made = store.remember("Flaky test: test_upload times out on CI")
    store.close()
    for name in ("catalog.sqlite3", "catalog.sqlite3-wal", "catalog.sqlite3-shm"):
        (store.root / ".memsite" / name).unlink(missing_ok=True)
    with MemoryStore(store.root, agent="planner") as reopened:
        assert [h.memory.id for h in reopened.recall("flaky upload")] == [made.id]
    result = CliRunner().invoke(main, ["-C", str(store.root), "index", "rebuild"])
    assert result.exit_code == 0 and result.output.startswith("Indexed 1 memories in ")


# --- activity -------------------------------------------------------------------------


def test_a_recall_raises_counts_without_a_commit_then_one_flush_commits_them(store: MemoryStore, clock: Clock) -> None:
    a = store.remember("The build uses Bazel")
    b = store.remember("Bazel remote cache is on GCS")
    before = head(store.root)
    clock.advance(hours=1)
    for _ in range(3):
        hits = store.recall("bazel")
    assert {h.memory.active_count for h in hits} == {3}
    assert head(store.root) == before
    assert store.get(a.id).active_count == 3 and store.get(a.id).last_recalled == clock.now
    commit = store.flush_activity()
    assert commit == head(store.root) and git(store.root, "rev-list", "--count", f"{before}..HEAD").strip() == "1"
    body = git(store.root, "log", "-1", "--format=%B")
    assert body.startswith("Record recall activity: 2 memories, 6 recalls")
    assert body.count("Action: recalled") == 2 and "Recalls: +3" in body and "Activity-Batch: " in body
    assert "active_count: 3" in a.path.read_text()  # type: ignore[union-attr]
    assert store.get(b.id).active_count == 3
    assert store.flush_activity() is None
    assert_clean(store.root)


def test_recalls_are_committed_as_the_agent_that_made_them_whoever_flushes(store: MemoryStore, clock: Clock) -> None:
    """Regression: a task closing in one agent's process committed every agent's waiting recalls as its own."""
    memory = store.remember("The build uses Bazel")
    with MemoryStore(store.root, agent="coder", clock=clock) as coder:
        coder.recall("bazel")
        coder.recall("bazel")
    store.recall("bazel")
    before = head(store.root)
    with store.task(type="debug", keywords=["bazel"]) as task:
        task.plan(["look"])
        task.check("look")
        task.problem("Which build tool?")
        task.solution("Looked at the build.")
    log = git(store.root, "log", "--format=%an %s", f"{before}..HEAD").splitlines()
    recorded = [line for line in log if "Record recall activity" in line]
    assert sorted(line.split()[0] for line in recorded) == ["coder", "planner"]
    counts = {line.split()[0]: git(store.root, "log", "-1", "--format=%B", f"--author={line.split()[0]}",
                                   "--grep=Record recall activity") for line in recorded}
    assert "Recalls: +2" in counts["coder"] and "Recalls: +1" in counts["planner"]
    assert store.get(memory.id).active_count == 3
    assert_clean(store.root)


def test_enough_recalls_flush_on_their_own(store: MemoryStore) -> None:
    path = store.root / "mkdocs.yml"
    path.write_text(path.read_text().replace("activity: {flush_every: 500}", "activity: {flush_every: 4}"))
    git(store.root, "commit", "-qam", "flush often")
    with MemoryStore(store.root, agent="planner") as eager:
        eager.remember("Gradle daemon needs 4 GB")
        before = head(store.root)
        for _ in range(3):
            eager.recall("gradle")
        assert head(store.root) == before
        eager.recall("gradle")
        assert head(store.root) != before and "active_count: 4" in eager.list()[0].path.read_text()  # type: ignore[union-attr]


def test_closing_a_task_commits_the_recalls_made_during_it(store: MemoryStore) -> None:
    store.remember("Use ruff for linting")
    with store.task("fix", ["lint"]) as task:
        store.recall("ruff")
        task.problem("lint errors")
        task.solution("ran ruff")
    assert git(store.root, "log", "-1", "--format=%s").startswith("Record recall activity")
    assert git(store.root, "log", "-2", "--format=%s").split("\n")[1].startswith("Task fix")


def test_recalls_journaled_by_a_killed_process_are_not_lost(store: MemoryStore) -> None:
    made = store.remember("Terraform state lives in S3")
    script = f"""
import os, signal
from memsite import MemoryStore
store = MemoryStore({str(store.root)!r}, agent="agent")
for _ in range(5):
    store.recall("terraform state")
os.kill(os.getpid(), signal.SIGKILL)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == -signal.SIGKILL
    assert store.get(made.id).active_count == 5
    store.flush_activity()
    assert "active_count: 5" in made.path.read_text()  # type: ignore[union-attr]


def test_a_flush_killed_after_its_commit_never_counts_twice(store: MemoryStore) -> None:
    made = store.remember("Helm charts are in deploy/charts")
    store.recall("helm charts")
    script = f"""
import os, signal
from memsite import MemoryStore
from memsite.storage import activity
def die(self, batch, committed):
    os.kill(os.getpid(), signal.SIGKILL)
activity.ActivityJournal.end_batch = die
MemoryStore({str(store.root)!r}, agent="flusher").flush_activity()
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == -signal.SIGKILL
    assert "active_count: 1" in made.path.read_text()  # type: ignore[union-attr]  # the commit landed
    assert store.flush_activity() is None  # the batch is recognised as committed
    assert store.get(made.id).active_count == 1


def test_recall_counts_from_two_branches_add_up_when_merged(store: MemoryStore, clock: Clock) -> None:
    made = store.remember("Kafka topic retention is 7 days", tags=["kafka"])
    store.recall("kafka retention")
    store.flush_activity()  # base: 1
    checkout(store, "-q", "-b", "feature")
    for _ in range(2):
        store.recall("kafka retention")
    store.update(made.id, tags=["kafka", "retention"])
    store.flush_activity()  # feature: 3
    checkout(store, "-q", "main")
    clock.advance(hours=1)
    for _ in range(3):
        store.recall("kafka retention")
    store.update(made.id, tags=["kafka", "ops"], content="Kafka topic retention is 7 days\n\nSet in topics.yaml.")
    store.flush_activity()  # main: 4
    result = subprocess.run(["git", "merge", "-q", "--no-edit", "feature"], cwd=store.root, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    merged = store.get(made.id)
    assert merged.active_count == 1 + 2 + 3
    assert set(merged.tags) == {"kafka", "retention", "ops"}
    assert merged.content.endswith("Set in topics.yaml.")
    assert_clean(store.root)


# --- dedup ---------------------------------------------------------------------------


def test_exact_duplicates_are_skipped_and_near_ones_merged(store: MemoryStore) -> None:
    first = store.remember("The staging cluster runs Kubernetes 1.29 on three nodes", category="entities",
                           tags=["k8s"], source="session-1")
    before = head(store.root)
    again = store.remember("the staging cluster runs kubernetes 1.29 on three nodes!", category="entities")
    assert (again.action, again.id, head(store.root)) == ("skipped", first.id, before)
    near = store.remember("The staging cluster runs Kubernetes 1.29 on three nodes in eu-west-1",
                          category="entities", tags=["staging"], source="session-2")
    assert near.action == "merged" and near.id == first.id
    assert near.content.endswith("in eu-west-1") and near.tags == ("k8s", "staging")
    assert near.source == "session-2" and near.extra["sources"] == ["session-1", "session-2"]
    assert "Action: merged" in git(store.root, "log", "-1", "--format=%B")
    other_category = store.remember("The staging cluster runs Kubernetes 1.29 on three nodes", category="events")
    assert other_category.action == "created"
    opposite = store.remember("The staging cluster runs three nodes on Kubernetes 1.29", category="entities")
    assert opposite.action == "created"
    assert store.remember("The staging cluster runs Kubernetes 1.29 on three nodes", category="entities",
                          dedupe=False).action == "created"


def test_duplicates_within_one_transaction_are_caught_too(store: MemoryStore) -> None:
    with store.transaction("import") as tx:
        a = tx.remember("Backups run nightly at 02:00 UTC")
        b = tx.remember("Backups run nightly at 02:00 UTC.")
    assert (a.action, b.action, b.id) == ("created", "skipped", a.id)
    assert tx.stats == {"created": 1, "merged": 0, "skipped": 1}
    assert "Skipped: 1" in git(store.root, "log", "-1", "--format=%B")


def _catalogued(store: MemoryStore) -> dict[str, tuple]:
    return {m.id: (m, m.path, m.commit, m.extra) for m in store.list()}


def test_a_large_transaction_dedups_and_indexes_as_a_small_one(store: MemoryStore) -> None:
    """Past AHEAD_BATCH memories, a transaction's files are written while it stages the rest: dedup
    against the store and within the transaction, search and the catalog are as for a small one."""
    kept = store.remember("The payments service retries failed webhooks five times", category="cases")
    newest = store.remember("Rotate the staging database password every quarter", category="cases")
    texts = [f"Service {i} owns queue q{i} and its alerts go to team t{i % 13}" for i in range(2 * AHEAD_BATCH + 30)]
    with store.transaction("import") as tx:
        # Merged into first: the catalog's last row is replaced, and the rows after it are this commit's.
        grown = tx.remember("Rotate the staging database password every quarter, on Mondays", category="cases")
        made = [tx.remember(text, category="entities") for text in texts]
        again = tx.remember(texts[3] + ".", category="entities")  # its twin's file went ahead long ago
        dup = tx.remember("the payments service retries failed webhooks five times!", category="cases")
        merged = tx.remember(texts[10] + " since March", category="entities", tags=["queues"])
        tx.update(made[20].id, tags=["changed"])
        tx.forget(made[30].id, reason="wrong team")
        late = tx.remember("Queue q7 is drained every night", category="entities")
    assert {m.action for m in made} == {"created"}
    assert (again.action, again.id) == ("skipped", made[3].id)
    assert (dup.action, dup.id) == ("skipped", kept.id)
    assert (merged.action, merged.id, grown.action, grown.id) == ("merged", made[10].id, "merged", newest.id)
    assert tx.stats == {"created": len(texts) + 1, "merged": 2, "skipped": 2}
    catalogued = _catalogued(store)
    assert len(catalogued) == len(texts) + 2  # the one forgotten gone, the late one there
    assert catalogued[newest.id][2] == tx.commit and catalogued[kept.id][2] == kept.commit
    assert made[30].id not in catalogued and late.id in catalogued
    assert catalogued[made[10].id][0].content == texts[10] + " since March"
    assert catalogued[made[20].id][0].tags == ("changed",)
    assert {catalogued[m.id][2] for m in made if m.id in catalogued} == {tx.commit}
    found = {hit.memory.id for hit in store.recall("queue q7", limit=1000)}
    assert {made[7].id, late.id} <= found
    catalogued = _catalogued(store)  # (with the recalls just made)
    store.rebuild_index()  # from the files alone
    assert _catalogued(store) == catalogued
    assert {hit.memory.id for hit in store.recall("queue q7", limit=1000)} == found
    assert_clean(store.root)


def _sketch_questions(store: MemoryStore) -> list[str]:
    """Dedup's queries of the catalog's sketches, as the store's read connection runs them from now on."""
    asked: list[str] = []
    storage_of(store).catalog.db.set_trace_callback(
        lambda sql: asked.append(sql) if "FROM sketches WHERE k" in sql else None)
    return asked


def test_a_large_transaction_finds_duplicates_of_memories_however_they_reached_the_catalog(
    store: MemoryStore,
) -> None:
    """Past SEEN_AFTER questions, a transaction asks the catalog only about texts whose sketch values its
    filter has seen (most new texts are not): memories written alone, by a transaction, by a person with
    plain git, and read again by a rebuild are all still found."""
    alone = store.remember("The nightly backup job writes to bucket ops-backups in eu-west-1", category="cases")
    with store.transaction("earlier") as tx:
        batch = [tx.remember(f"Host h{i} runs service s{i} behind balancer b{i % 5} in rack r{i}",
                             category="entities") for i in range(60)]
    assert alone.path is not None
    by_hand = alone.path.with_name("written-by-hand.md")
    by_hand.write_text(alone.path.read_text().replace(alone.id, new_id()).replace(
        alone.content, "Deploys to production need two approvals from the on-call team"))
    git(store.root, "add", str(by_hand))
    git(store.root, "commit", "-qm", "A memory written by hand")
    rng = random.Random(7)
    for month, other in (("March", "events"), ("April", "patterns")):  # as written, then after a rebuild
        texts = [" ".join(f"word{rng.randrange(10**6)}" for _ in range(8)) for _ in range(200)]
        asked = _sketch_questions(store)
        with store.transaction("import") as tx:
            made = [tx.remember(text, category="events") for text in texts]
            exact = tx.remember(alone.content.upper() + "!", category="cases")
            near = tx.remember(batch[7].content + f" since {month}", category="entities")
            hand = tx.remember("deploys to production need two approvals from the on-call team.", category="cases")
            elsewhere = tx.remember(alone.content, category=other)
        assert {m.action for m in made} == {"created"}
        assert (exact.action, exact.id) == ("skipped", alone.id)
        assert (near.action, near.id) == ("merged", batch[7].id)
        assert (hand.action, hand.id) == ("skipped", store.get(hand.id).id)
        assert store.get(hand.id).path == by_hand
        assert elsewhere.action == "created"
        assert len(asked) < len(texts) / 2  # (without the filter: one question a memory)
        store.rebuild_index()
    assert_clean(store.root)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**63 - 1), max_size=150), min_size=1, max_size=12),
       st.sampled_from([20, 4096]))
def test_the_sketch_filter_keeps_every_value_written_in_any_write(writes: list[list[int]], longest: int) -> None:
    """A value whose bit is clear must be in no row: a write sets its own bits (or lists its few values) and
    keeps those before it, also when the list is folded into the bits."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript(sketch_filter.SCHEMA)
    for keys in writes:
        with transaction(db):
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(sketch_filter, "RECENT_MAX", longest)
                sketch_filter.add(db, sketch_filter.prepare(keys))
        assert db.execute("SELECT count(*) FROM sketch_recent").fetchone()[0] < max(longest, sketch_filter.FOLD_AT)
    seen = sketch_filter.load(db)
    written = [key for keys in writes for key in keys]
    assert sketch_filter.known(seen, written) == len(written)


@pytest.mark.parametrize("interruption", [RuntimeError, KeyboardInterrupt])
def test_a_large_transaction_that_stops_leaves_the_catalog_as_it_was(
    store: MemoryStore, interruption: type[BaseException]
) -> None:
    """A large transaction that stops leaves no row, and the next write goes on."""
    kept = store.remember("Deploys need two approvals", category="patterns")
    before = _catalogued(store)
    with pytest.raises(interruption):
        with store.transaction("import") as tx:
            for i in range(AHEAD_BATCH + 10):
                tx.remember(f"Imported fact number {i} about host h{i}", category="events")
            raise interruption()
    assert _catalogued(store) == before and head(store.root) == kept.commit
    assert store.recall("imported fact host") == []
    again = store.remember("Imported fact number 3 about host h3", category="events")
    assert again.action == "created" and set(_catalogued(store)) == {kept.id, again.id}
    assert_clean(store.root)


@pytest.mark.slow
def test_a_long_session_of_writes_keeps_the_catalogs_log_small(store: MemoryStore) -> None:
    """SQLite copies the catalog's write-ahead log back into it after the write that filled it has returned
    (on the catalog's thread): the log stays a few megabytes however long the store stays open."""
    for i in range(300):
        store.remember(f"Host h{i} in rack r{i % 9} was rebooted after kernel update k{i}", category="events")
    wal = store.root / ".memsite" / "catalog.sqlite3-wal"
    assert wal.stat().st_size < 8 * 1024 * 1024
    assert len(store.list(category="events")) == 300


def test_the_dedup_threshold_comes_from_configuration(store: MemoryStore) -> None:
    store.remember("Use black with line length 100 for this repository")
    path = store.root / "mkdocs.yml"
    path.write_text(path.read_text().replace("dedupe: {enabled: true, threshold: 0.8}",
                                             "dedupe: {enabled: true, threshold: 0.3}"))
    git(store.root, "commit", "-qam", "looser dedup")
    with MemoryStore(store.root, agent="planner") as loose:
        assert loose.remember("Use black with line length 120 for the other repository").action == "merged"


# --- the agent tools -------------------------------------------------------------------


def test_tool_definitions_are_json_schema(store: MemoryStore) -> None:
    tools = {tool["name"]: tool for tool in store.tools()}
    assert set(tools) == {"record_to_memory", "retrieve_from_memory"}
    record = tools["record_to_memory"]["parameters"]
    assert record["required"] == ["thinking", "content"] and record["properties"]["content"]["type"] == "array"
    json.dumps(store.tools())  # plain data


def test_tools_record_and_retrieve(store: MemoryStore) -> None:
    out = store.call_tool("record_to_memory", {"thinking": "the user told me", "content": [
        "The user's name is Ada", "Ada prefers short answers"]})
    assert out.startswith("Recorded 2 item(s): 2 new, 0 merged into existing memories, 0 already known.")
    assert git(store.root, "log", "-1", "--format=%s").strip() == "Record to memory: the user told me"
    found = store.call_tool("retrieve_from_memory", json.dumps({"keywords": ["short", "answers"]}))
    assert found.startswith("Memories matching short, answers:") and "Ada prefers short answers" in found
    assert store.call_tool("retrieve_from_memory", {"keywords": ["nothing-like-this"]}) == \
        "No memory matches nothing-like-this."


def test_record_to_memory_can_supersede_a_memory(store: MemoryStore) -> None:
    old = store.remember("The user lives in Berlin.", category="general")
    out = store.call_tool("record_to_memory", {"thinking": "the user moved", "content": ["The user lives in Paris."],
                                               "supersedes": old.id})
    assert out.endswith(f". It supersedes {old.id}, no longer recalled.")
    found = store.call_tool("retrieve_from_memory", {"keywords": ["lives"]})
    assert "Paris" in found and "Berlin" not in found


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("record_to_memory", {"thinking": "t", "content": ["a", "b"], "supersedes": "01M80RXENRH45Q"},
         "'supersedes' goes with one item in 'content'"),
        ("record_to_memory", {"thinking": "t", "content": ["a"], "supersedes": "NOSUCHMEMORY01"},
         "supersedes: no memory with id 'NOSUCHMEMORY01'"),
        ("record_to_memory", {"content": ["x"]}, "'thinking' must be a string"),
        ("record_to_memory", {"thinking": "t", "content": "not a list"}, "'content' must be a non-empty list"),
        ("record_to_memory", {"thinking": "t", "content": []}, "'content' must be a non-empty list"),
        ("record_to_memory", {"thinking": "t", "content": ["key AKIAQWERTYUIOPASDF23"]}, "rule aws-access-key-id"),
        ("retrieve_from_memory", {"keywords": [1, 2]}, "'keywords' must be a non-empty list"),
        ("retrieve_from_memory", {"keywords": ["a"], "extra": 1}, "unknown argument(s) extra"),
        ("retrieve_from_memory", "{not json", "arguments must be a JSON object"),
        ("retrieve_from_memory", "[1]", "arguments must be a JSON object"),
        ("forget_everything", {}, "unknown tool 'forget_everything'"),
    ],
)
def test_bad_tool_calls_return_an_error_text(store: MemoryStore, name: str, arguments: object, message: str) -> None:
    before = head(store.root)
    result = store.call_tool(name, arguments)  # type: ignore[arg-type]
    assert result.startswith("Error: ") and message in result
    assert head(store.root) == before


def test_record_and_retrieve_for_developers(store: MemoryStore) -> None:
    stats = store.record([
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Our release train leaves every Tuesday."},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted: releases on Tuesdays."}]},
        {"role": "user", "content": "  "},
    ])
    assert stats == {"created": 2, "merged": 0, "skipped": 0}
    assert store.record([{"role": "user", "content": "Our release train leaves every Tuesday."}])["skipped"] == 1
    prompt = store.retrieve([{"role": "user", "content": "when do releases happen?"}])
    assert prompt.startswith("Relevant memories (best first):\n- [general] ")
    assert "Tuesday" in prompt
    assert store.retrieve("completely unrelated zebra") == ""
    with pytest.raises(Exception, match="message 1"):
        store.record([{"content": "no role"}])


def test_the_recall_and_rank_commands(store: MemoryStore) -> None:
    store.remember("Grafana dashboards live in ops/grafana", category="entities")
    run = lambda *a: CliRunner().invoke(main, ["-C", str(store.root), *a])  # noqa: E731
    out = run("recall", "grafana dashboards")
    assert out.exit_code == 0 and "entities" in out.output and "Grafana dashboards" in out.output
    data = json.loads(run("recall", "grafana", "--json").output)
    assert data[0]["active_count"] == 2 and set(data[0]) >= {"relevance", "decay", "boost", "score"}
    assert "Grafana" in run("rank").output
    assert run("flush").output.startswith("Committed recall counts")
    assert run("flush").output == "No recalls waiting.\n"
    nothing = run("recall", "nothing here")
    assert nothing.exit_code == 0 and nothing.stdout == "" and "No memories match." in nothing.output


def test_a_question_of_a_megabyte_is_answered_by_its_first_words(store: MemoryStore) -> None:
    wanted = store.remember("Webhook retries duplicated refunds; dedupe on the event id", category="cases")
    store.remember("The user prefers tabs over spaces", category="preferences")
    question = "duplicated refunds " + "x" * (1 << 20)
    assert [h.memory.id for h in store.recall(question)] == [wanted.id]
    assert [h.memory.id for h in store.explain(question)] == [wanted.id]


@pytest.mark.parametrize(("args", "message"), [
    (["--since", "banana"], "Error: since: 'banana' is not a date or a time; use 2026-03-01"),
    (["--since", "2026-06-01", "--until", "2026-03-01"], "Error: since (2026-06-01T00:00:00Z) is after until"),
    (["--since", "2099-01-01"], "Error: since: 2099-01-01T00:00:00Z is in the future"),
])
def test_bad_dates_on_the_command_line_are_one_line_and_no_traceback(store: MemoryStore, args: list[str],
                                                                    message: str) -> None:
    store.remember("The payments team adopted trunk-based development", category="events")
    result = CliRunner().invoke(main, ["-C", str(store.root), "recall", "payments", *args])
    assert result.exit_code == 1 and result.output.startswith(message) and len(result.output.splitlines()) == 1


def test_the_command_line_shows_each_hits_day_and_takes_spans(store: MemoryStore, clock: Clock) -> None:
    clock.now = START - timedelta(days=200)
    store.remember("The payments team adopted trunk-based development", category="events")
    clock.now = START
    store.remember("The payments team moved stand-ups to 10:00", category="events")
    root = str(store.root)
    result = CliRunner().invoke(main, ["-C", root, "recall", "payments team", "--until", "2026-05-01"])
    assert result.exit_code == 0, result.output
    (line,) = result.output.splitlines()
    assert f"{(START - timedelta(days=200)):%Y-%m-%d}  The payments team adopted" in line
    hits = json.loads(CliRunner().invoke(main, ["-C", root, "recall", "payments team", "--json",
                                                "--ranking", "freshness"]).output)
    assert [h["abstract"][-5:] for h in hits] == ["10:00", "pment"] and hits[0]["created"].startswith("2026-11-01")


def test_a_word_with_a_sharp_s_is_found_as_it_is_written(store: MemoryStore) -> None:
    """Case folding turns "Straße" into "strasse", which the full-text index (lower case) never holds."""
    office = store.remember("The Berlin office is at Hauptstraße 5, second floor.", category="entities")
    store.remember("The Paris office is near the Gare du Nord.", category="entities")
    assert [h.memory.id for h in store.recall("Hauptstraße", limit=1)] == [office.id]
    assert [h.memory.id for h in store.recall("Which office is on the HAUPTSTRAßE?", limit=1)] == [office.id]


# --- what orders memories that name the same thing (hybrid, the shipped model) -----------------

SERVICES = ["ledger", "refunds-worker", "fraud-scorer", "card-vault"]
PEOPLE = ["Ana Silva", "Jonas Berg", "Priya Raman", "Kenji Tanaka", "Lucia Moretti", "Omar Haddad"]
OWNER = "Marta Kowalski leads the team that owns the ledger; Tomas Novak is the second on call."


def routine(service: str) -> list[str]:
    """Notes that name a service and answer nothing, as agents write them every day."""
    return [*(f"Answered {person}'s question about the {service} dashboard." for person in PEOPLE),
            f"Bumped dependencies of {service}; the build passed on the second try.",
            f"Cleaned up old branches in the {service} repository.",
            f"Today we load-tested {service} at five times peak; notes are in the incident folder.",
            f"The nightly {service} job finished in 48 minutes, as usual."]


def minilm_store(store: MemoryStore, clock: Clock, texts: list[str]) -> MemoryStore:
    pytest.importorskip("onnxruntime")
    with store.transaction("Memories") as tx:
        for text in texts:
            tx.remember(text, category="general", dedupe=False)
    store.close()
    return MemoryStore(store.root, agent="planner", clock=clock, embedder="minilm")


def test_the_memory_that_answers_is_found_among_many_that_name_the_same_service(
        store: MemoryStore, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    # Forty routine notes name the ledger or another service; by raw cosine, "who should I page when the
    # ledger breaks?" is closest to them all, and the one memory saying who owns it was not in the first five.
    hybrid = minilm_store(store, clock, [text for service in SERVICES for text in routine(service)] + [OWNER])
    question = "Who should I page when the ledger breaks?"
    with hybrid:
        hits = hybrid.recall(question, limit=5)
        assert OWNER in [h.memory.abstract for h in hits]
        owner = next(h for h in hits if h.memory.abstract == OWNER)
        assert owner.why.contrast is not None and "contrast" in str(owner.why)  # --explain shows it
        with_numpy = hybrid.explain(question, limit=5)
        monkeypatch.setattr(retrieval, "CONTRAST", 0.0)  # closeness by the cosine alone, as before
        assert OWNER not in [h.memory.abstract for h in hybrid.explain(question, limit=5)]
        monkeypatch.undo()
        monkeypatch.setitem(sys.modules, "numpy", None)  # the same without numpy
        storage_of(hybrid).vectors._loaded = None  # type: ignore[union-attr]
        plain = hybrid.explain(question, limit=5)
        assert [h.memory.id for h in plain] == [h.memory.id for h in with_numpy]
        assert [h.why.contrast for h in plain] == pytest.approx([h.why.contrast for h in with_numpy], abs=1e-4)


def test_a_small_store_has_no_neighbourhood_to_contrast_with(store: MemoryStore, clock: Clock) -> None:
    with minilm_store(store, clock, routine("ledger")[:5] + [OWNER]) as hybrid:
        hits = hybrid.recall("who owns the ledger?")
        assert OWNER in [h.memory.abstract for h in hits]
        assert all(h.why.contrast is None and "contrast" not in str(h.why) for h in hits)
