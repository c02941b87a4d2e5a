"""Recall by meaning with wordllama, when named: offline; the default when minilm's runtime is missing."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import ConfigError, InvalidInput, MemoryStore
from memsite.cli import main
from memsite.features import embedders
from memsite.features.relevance import BACKGROUND

from .conftest import Clock, git

pytestmark = pytest.mark.slow  # the static embedding model

pytest.importorskip("wordllama")

REFUNDS = "Webhook retries duplicated refunds: idempotency keys on every refund request fixed it"
POOL = "Postgres connection pool exhausted under load; raised max_connections and added pgbouncer"
TABS = "The user prefers tabs over spaces in Python files"
PARAPHRASE = "how do we stop customers getting their money back twice?"  # no word in common with REFUNDS


@pytest.fixture
def memories(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> Path:
    for text, category in ((REFUNDS, "cases"), (POOL, "cases"), (TABS, "preferences")):
        store.remember(text, category=category)
    monkeypatch.setenv("MEMSITE_EMBEDDING", "wordllama")
    return store.root


def set_model(root: Path, model: str) -> None:
    settings = root / "mkdocs.yml"
    settings.write_text(settings.read_text().replace("    decay:\n",
                                                     f"    embedding:\n      model: {model}\n    decay:\n", 1))
    git(root, "commit", "-qam", f"embedding model {model}")


def test_wordllama_finds_a_paraphrase(memories: Path, clock: Clock) -> None:
    with MemoryStore(memories, agent="planner", clock=clock) as store:
        assert store.embedder is not None and store.embedder.model.startswith("wordllama-")
        assert store.recall(PARAPHRASE)[0].memory.content == REFUNDS
        assert store.recall("database ran out of connections")[0].memory.content == POOL
    with MemoryStore(memories, agent="planner", clock=clock, embedder="none") as words_only:
        assert words_only.embedder is None
        assert words_only.recall(PARAPHRASE) == []
    # Each memory was embedded once, kept under the model's name, as were the background questions
    # (the off-topic baseline).
    db = sqlite3.connect(memories / ".memsite" / "vectors.sqlite3")
    models = db.execute("SELECT model, count(*) FROM vectors GROUP BY model").fetchall()
    db.close()
    assert len(models) == 1 and models[0][0].startswith("wordllama-") and models[0][0].endswith("l2_supercat-128")
    assert models[0][1] == 3 + len(set(BACKGROUND))


def test_it_loads_without_the_network(memories: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    import requests

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("wordllama tried to download something")

    monkeypatch.setattr(requests, "get", no_network)
    monkeypatch.setattr(embedders, "_models", {})  # load afresh, with downloads impossible
    with MemoryStore(memories, agent="planner", clock=clock, embedder="wordllama") as store:
        assert store.recall(PARAPHRASE)[0].memory.content == REFUNDS
    assert not (Path.home() / ".cache" / "wordllama").exists()


def test_the_configuration_and_the_environment_choose_the_model(
        memories: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSITE_EMBEDDING")
    set_model(memories, "none")
    with MemoryStore(memories, agent="planner", clock=clock) as store:
        assert store.embedder is None and store.recall(PARAPHRASE) == []
    monkeypatch.setenv("MEMSITE_EMBEDDING", "wordllama")
    with MemoryStore(memories, agent="planner", clock=clock) as store:
        assert store.recall(PARAPHRASE)[0].memory.content == REFUNDS
    monkeypatch.setenv("MEMSITE_EMBEDDING", "all-MiniLM-L6-v2")
    with pytest.raises(ConfigError, match=r"MEMSITE_EMBEDDING: expected one of auto, minilm, wordllama, none, "
                       r"or model2vec:<model>, "
                       r"sentence-transformers:<model>, fastembed:<model>, got 'all-minilm-l6-v2'"):
        MemoryStore(memories, agent="planner")
    with pytest.raises(InvalidInput, match=r"embedder: expected a callable \(text -> vector\) or one of auto"):
        MemoryStore(memories, agent="planner", embedder="all-MiniLM-L6-v2")


def test_the_cli_recalls_by_meaning_too(memories: Path) -> None:
    result = CliRunner().invoke(main, ["-C", str(memories), "recall", PARAPHRASE, "-n", "1"])
    assert result.exit_code == 0, result.output
    assert "Webhook retries duplicated refunds" in result.output


def test_auto_means_wordllama_without_onnxruntime_and_words_only_without_either(
        memories: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSITE_EMBEDDING")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # minilm's runtime missing
    with MemoryStore(memories, agent="planner", clock=clock) as store:
        assert store.embedder is not None and store.embedder.model.startswith("wordllama-")
        assert store.recall(PARAPHRASE)[0].memory.content == REFUNDS
    monkeypatch.setitem(sys.modules, "wordllama", None)  # as on a base install
    with MemoryStore(memories, agent="planner", clock=clock) as store:
        assert store.embedder is None
        assert store.recall(PARAPHRASE) == []
        assert store.recall("refunds")[0].memory.content == REFUNDS
    set_model(memories, "wordllama")
    with pytest.raises(ConfigError, match=r"^embedding.model: wordllama: wordllama is not installed; "
                                          r"pip install wordllama, "
                                          r"or set the model to none$"):
        MemoryStore(memories, agent="planner")
