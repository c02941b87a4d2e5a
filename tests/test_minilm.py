"""Recall by meaning with minilm, the sentence model memsite ships: the default once its runtime is installed."""

from __future__ import annotations

import hashlib
import socket
import sqlite3
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import ConfigError, MemoryStore
from memsite.cli import main
from memsite.features import embedders
from memsite.features.embedders import MiniLMEmbedder
from memsite.features.relevance import BACKGROUND

from .conftest import Clock, git

pytestmark = pytest.mark.slow  # the sentence model

pytest.importorskip("onnxruntime")

MEMORIES = {
    "profile": ["The user's manager is Tomas Wierzbicki, head of platform engineering.",
                "The user speaks Portuguese and English; prefers English for all written docs.",
                "The user works a four-day week and is off on Fridays."],
    "cases": ["Webhook retries duplicated refunds: idempotency keys on every refund request fixed it",
              "Postgres connection pool exhausted under load; raised max_connections and added pgbouncer"],
    "preferences": ["The user prefers tabs over spaces in Python files"],
}
# Questions put in other words than their answer, as an agent asks them
PARAPHRASES = {"who is the user's boss?": "The user's manager is Tomas",
               "which tongue should written material be in?": "The user speaks Portuguese",
               "is the user around at the end of the week?": "The user works a four-day week",
               "how do we stop customers getting their money back twice?": "Webhook retries duplicated refunds"}
OFF_TOPIC = ["banana smoothie recipe", "how tall is mount everest", "who won the football world cup in 2018",
             "how do I knit a scarf", "best beaches in the Algarve"]


@pytest.fixture
def memories(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> Path:
    with store.transaction("Memories") as tx:
        for category, texts in MEMORIES.items():
            for text in texts:
                tx.remember(text, category=category)
    monkeypatch.delenv("MEMSITE_EMBEDDING")  # the product's default, not the test suite's words only
    return store.root


def test_the_default_finds_paraphrases_and_nothing_for_questions_about_something_else(
        memories: Path, clock: Clock) -> None:
    with MemoryStore(memories, agent="planner", clock=clock) as store:
        assert store.embedder is not None and store.embedder.model == MiniLMEmbedder.model
        for question, answer in PARAPHRASES.items():
            hits = store.recall(question)
            assert hits and hits[0].memory.content.startswith(answer), (question, [h.memory.content for h in hits])
        for question in OFF_TOPIC:
            assert store.recall(question) == [], question
    # Each memory was embedded once, kept under the model's name, as were the background questions.
    db = sqlite3.connect(memories / ".memsite" / "vectors.sqlite3")
    models = db.execute("SELECT model, count(*), max(length(v)) FROM vectors GROUP BY model").fetchall()
    db.close()
    assert models == [(MiniLMEmbedder.model, 6 + len(set(BACKGROUND)), 4 * 384)]


def test_the_shipped_model_is_the_one_its_vectors_are_named_after() -> None:
    # vectors are cached under MiniLMEmbedder.model: a rebuilt model file must come with a new name
    data = (MiniLMEmbedder.folder / "model.onnx").read_bytes()
    assert hashlib.sha256(data).hexdigest() == MiniLMEmbedder.sha256
    assert (MiniLMEmbedder.folder / "tokenizer.json").is_file() and (MiniLMEmbedder.folder / "LICENSE").is_file()


def test_it_loads_and_embeds_without_the_network(memories: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("minilm tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(embedders, "_models", {})  # load afresh
    with MemoryStore(memories, agent="planner", clock=clock, embedder="minilm") as store:
        assert store.recall("who is the user's boss?")[0].memory.content.startswith("The user's manager")


def test_a_batch_gives_each_text_the_vector_it_gets_alone() -> None:
    # each text gets its own vector whatever it is embedded with (the int8 model scales a run by its largest value)
    minilm = MiniLMEmbedder()
    texts = ["short", "a much longer text about refunds, webhooks and idempotency keys " * 3, "", "tabs or spaces?"]
    together = minilm.embed_many(texts)
    for text, vector in zip(texts, together):
        assert float(vector @ minilm.embed_many([text])[0]) > 0.9999
    long = "word " * 1000  # past the model's 256 tokens: cut, not an error
    assert minilm.embed_many([long]).shape == (1, 384)


def test_without_its_runtime_asking_for_minilm_is_a_clear_error(
        memories: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    settings = memories / "mkdocs.yml"
    settings.write_text(settings.read_text().replace("    decay:\n",
                                                     "    embedding:\n      model: minilm\n    decay:\n", 1))
    git(memories, "commit", "-qam", "embedding model minilm")
    with pytest.raises(ConfigError, match=r"^embedding.model: minilm: onnxruntime or tokenizers is not installed; "
                                          r"pip install 'memsite\[embed\]', or set the model to none$"):
        MemoryStore(memories, agent="planner")


def test_memories_can_be_embedded_ahead_of_the_first_recall(memories: Path, clock: Clock) -> None:
    result = CliRunner().invoke(main, ["-C", str(memories), "index", "embed"])
    assert result.exit_code == 0, result.output
    assert f"6 memories have vectors of {MiniLMEmbedder.model}" in result.output
    db = sqlite3.connect(memories / ".memsite" / "vectors.sqlite3")
    assert db.execute("SELECT count(*) FROM vectors").fetchone()[0] == 6 + len(set(BACKGROUND))
    assert db.execute("SELECT count(*) FROM floors").fetchone()[0] == 1  # the floor measured too
    db.close()
    with MemoryStore(memories, agent="planner", clock=clock) as store:
        store.remember("The staging cluster is called vega", category="entities")
        assert store.embed() == 7  # the new memory too
    with MemoryStore(memories, agent="planner", clock=clock, embedder="none") as words_only:
        assert words_only.embed() == 0
