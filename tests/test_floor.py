"""Hybrid recall says "nothing relevant": the relevance floor, with the real default model, minilm (issue 34)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import ConfigError, MemoryStore
from memsite.api import storage_of
from memsite.cli import main
from memsite.features.relevance import NEAR, WORDS_FLOOR

from .conftest import Clock

pytest.importorskip("onnxruntime")

MEMORIES = {
    "cases": ["Webhook retries duplicated refunds: idempotency keys on every refund request fixed it",
              "Postgres connection pool exhausted under load; raised max_connections and added pgbouncer",
              "Kafka consumer rebalance storms stopped after raising max.poll.interval.ms"],
    "preferences": ["The user prefers tabs over spaces in Python files",
                    "Commit messages in imperative mood, subject under 72 characters"],
    "entities": ["Staging is the vega cluster in eu-west-1; production is the orion cluster",
                 "Secrets are stored in HashiCorp Vault under secret/payments"],
    "events": ["Release 1.4 shipped without a rollback.",
               "The payments team moved from Jenkins to Buildkite in August"],
    "patterns": ["Rotate a service certificate:\n\n"
                 "1. Issue it from Vault PKI\n2. Update the secret\n3. Roll the deployment"],
}
OFF_TOPIC = ["banana smoothie recipe", "how tall is mount everest", "who won the football world cup in 2018",
             "how do I knit a scarf", "best beaches in the Algarve"]


@pytest.fixture
def hybrid(store: MemoryStore, clock: Clock) -> MemoryStore:
    with store.transaction("Memories") as tx:
        for category, texts in MEMORIES.items():
            for text in texts:
                tx.remember(text, category=category)
    store.close()
    return MemoryStore(store.root, agent="planner", clock=clock, embedder="minilm")


def counts(store: MemoryStore) -> dict[str, int]:
    return {m.abstract: m.active_count for m in store.list()}


def test_off_topic_questions_recall_nothing_and_count_nothing(hybrid: MemoryStore) -> None:
    before = counts(hybrid)
    for question in OFF_TOPIC:
        assert hybrid.recall(question) == [], question
        assert hybrid.retrieve(question) == ""
        assert hybrid.call_tool("retrieve_from_memory", {"keywords": [question]}).startswith("No memory matches")
    assert storage_of(hybrid).activity.waiting() == 0
    hybrid.flush_activity()
    assert counts(hybrid) == before
    # ...while a question about something in memory still finds it by meaning, and counts it
    hits = hybrid.recall("how do we stop customers getting their money back twice?")
    # (second at times: a memory holding the question's one word "stop" is first by words and close by meaning)
    assert any(h.memory.abstract.startswith("Webhook retries duplicated refunds") for h in hits[:2])
    assert hits[0].why.kept and hits[0].why.standing >= hits[0].why.floor


def test_keyword_queries_find_what_they_name(hybrid: MemoryStore) -> None:
    for query, wanted in (("pgbouncer", "Postgres connection pool"), ("Jenkins Buildkite", "The payments team moved"),
                          ("max.poll.interval.ms", "Kafka consumer rebalance"), ("vault pki", "Rotate a service")):
        assert hybrid.recall(query)[0].memory.abstract.startswith(wanted), query


def test_the_readme_tabs_query_returns_the_tabs_memory_not_the_release_note(hybrid: MemoryStore) -> None:
    # The issue: the README's example printed "Release 1.4 shipped without a rollback." as the match for "tabs".
    answer = hybrid.call_tool("retrieve_from_memory", {"keywords": ["tabs"]})
    assert "The user prefers tabs over spaces in Python files" in answer
    assert "Release 1.4" not in answer and len(hybrid.recall("tabs")) == 1


def test_recalls_by_noise_make_no_skill_draft(hybrid: MemoryStore) -> None:
    for _ in range(6):
        for question in OFF_TOPIC:
            hybrid.recall(question)
    assert hybrid.skill_candidates(threshold=5) == []
    for _ in range(5):
        assert hybrid.recall("how do I renew the TLS cert of a service?")[0].memory.category == "patterns"
    assert [c.source_abstract for c in hybrid.skill_candidates(threshold=5)] == ["Rotate a service certificate:"]


def test_hybrid_finds_what_words_alone_and_meaning_alone_find(hybrid: MemoryStore) -> None:
    questions = {  # question -> the memory that answers it (start of its text)
        "pgbouncer": "Postgres connection pool", "imperative mood": "Commit messages",
        "eu-west-1 vega": "Staging is the vega", "Buildkite": "The payments team moved",
        "how do we stop customers getting their money back twice?": "Webhook retries",
        "the database ran out of connections when traffic was high": "Postgres connection pool",
        "indentation style for code": "The user prefers tabs",
        "where are passwords and API credentials kept?": "Secrets are stored",
    }

    def found(store: MemoryStore) -> int:
        return sum(any(h.memory.abstract.startswith(a) for h in store.recall(q, limit=3)) for q, a in questions.items())

    hybrid_found = found(hybrid)
    with MemoryStore(hybrid.root, agent="planner", embedder="none") as words_only:
        words_found = found(words_only)
    hybrid.config = hybrid.config.__class__(**{**vars(hybrid.config), "embedding_weight": 1.0})
    meaning_found = found(hybrid)
    assert hybrid_found >= max(words_found, meaning_found) and hybrid_found > words_found, \
        (words_found, meaning_found, hybrid_found)


def test_explain_shows_the_signals_and_the_floor_and_counts_nothing(
        hybrid: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(hybrid.root)
    hybrid.close()
    # Words only (the tests' default):
    result = CliRunner().invoke(main, ["-C", root, "recall", "python tabs", "--explain"])
    assert (result.output.splitlines()[1].strip()
            == "words 1.00 (python, tabs), bm25 #1: words only, any shared word is kept")
    assert result.output.splitlines()[2].strip().startswith("written 2026-11-01, 0 recalls: x prior ")
    monkeypatch.setenv("MEMSITE_EMBEDDING", "minilm")
    result = CliRunner().invoke(main, ["-C", root, "recall", "tabs", "--explain"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "The user prefers tabs over spaces" in lines[0]
    assert lines[1].strip().startswith("meaning ") and ">= floor" in lines[1] and "words 1.00 (tabs)" in lines[1]
    assert "sd above off-topic questions" in lines[1]
    assert "meaning #1, words #1 -> relevance 1.00" in lines[1] and "x prior" in lines[2]
    assert lines[3] == "Below the floor (not recalled):" and "< floor" in lines[5]
    result = CliRunner().invoke(main, ["-C", root, "recall", "banana smoothie recipe", "--explain"])
    assert result.exit_code == 0
    assert result.output.splitlines()[0] == "Below the floor (not recalled):"
    assert "< floor" in result.output and "No memories match." in result.output
    result = CliRunner().invoke(main, ["-C", root, "recall", "how do we stop customers getting their money back twice?",
                                       "--explain", "-n", "1", "--json"])
    why = __import__("json").loads(result.output)[0]["why"]
    assert why["kept"] and why["standing"] >= why["floor"] and why["text"].startswith("meaning ")
    with MemoryStore(Path(root), agent="planner") as store:
        assert storage_of(store).activity.waiting() == 0  # --explain recalled nothing


def test_once_a_question_is_about_memory_its_close_matches_just_below_the_floor_are_recalled_too(
        hybrid: MemoryStore) -> None:
    off_topic = hybrid.explain("banana smoothie recipe", limit=20)
    line = off_topic[0].why.floor
    assert line > 0 and not any(h.why.kept for h in off_topic)  # the floor itself still says "nothing relevant"
    about = hybrid.explain("how should I format commit messages?", limit=20)
    assert about[0].why.kept and about[0].why.standing >= line
    assert all(h.why.floor == pytest.approx(NEAR * line) for h in about)
    for h in about:  # kept: at least NEAR of the floor (or most of the question's words), whatever its place
        assert h.why.kept == (h.why.standing >= NEAR * line or h.why.words >= WORDS_FLOOR), str(h.why)
    assert any(h.why.kept and h.why.standing < line for h in about)


def test_the_floor_comes_from_configuration(hybrid: MemoryStore, clock: Clock) -> None:
    settings = hybrid.root / "mkdocs.yml"
    settings.write_text(settings.read_text().replace("    decay:\n", "    embedding:\n      floor: 0\n    decay:\n", 1))
    with MemoryStore(hybrid.root, agent="planner", clock=clock, embedder="minilm") as no_floor:
        hits = no_floor.recall("banana smoothie recipe")  # the closest memories, relevant or not, as before
        assert hits and "(no floor)" in str(hits[0].why)
    settings.write_text(settings.read_text().replace("floor: 0\n", "floor: 2\n"))
    with pytest.raises(ConfigError, match=r"'plugins.memsite.embedding.floor': expected a number in \[0, 1\], got 2"):
        MemoryStore(hybrid.root, agent="planner")


def test_a_memory_that_answers_background_questions_still_recalls_by_meaning(store: MemoryStore, clock: Clock) -> None:
    # A team whose memory holds recipes: some background questions are not off-topic for it, and its
    # memories answer them by words. They count as recalling something when the floor is measured,
    # and the floor stays one that meaning can reach.
    with store.transaction("Memories") as tx:
        for category, texts in MEMORIES.items():
            for text in texts:
                tx.remember(text, category=category)
        for text in ("Recipe for chocolate chip cookies: cream butter and sugar, fold in the chips, bake 10 minutes",
                     "How to make pizza dough: flour, water, yeast and salt, kneaded and left overnight",
                     "How to make a perfect omelette: three eggs whisked, low heat, folded once",
                     "How to season a wok: thin layers of oil heated until they smoke",
                     "How to make an origami frog from a square sheet of paper"):
            tx.remember(text, category="patterns")
    store.close()
    with MemoryStore(store.root, agent="planner", clock=clock, embedder="minilm") as hybrid:
        assert hybrid.recall("recipe for chocolate chip cookies")[0].memory.abstract.startswith("Recipe for chocolate")
        hits = hybrid.recall("how do we stop customers getting their money back twice?")
        (answer,) = [h for h in hits[:2] if h.memory.abstract.startswith("Webhook retries duplicated refunds")]
        assert answer.why.words == 0 and answer.why.standing >= answer.why.floor
        assert hybrid.recall("how tall is mount everest") == []
