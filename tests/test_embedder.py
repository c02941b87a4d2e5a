"""Hybrid recall with a pluggable embedder: meaning found without shared words, vectors cached, errors contained."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memsite import ConfigError, InvalidInput, MemoryStore
from memsite.api import storage_of
from memsite.features.relevance import BACKGROUND

from .conftest import Clock, git

# A toy model with three meanings; real embedders are called the same way.
CONCEPTS = {
    "car": 0, "automobile": 0, "vehicle": 0, "drives": 0, "sedan": 0,
    "dog": 1, "puppy": 1, "canine": 1, "walks": 1,
    "database": 2, "postgres": 2, "sql": 2, "query": 2,
}


class ConceptEmbedder:
    model = "toy-concepts-v1"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, text: str) -> list[float]:
        self.calls.append(text)
        vector = [0.05, 0.05, 0.05]  # every text means a little of everything
        for word in text.lower().replace(".", " ").split():
            if word in CONCEPTS:
                vector[CONCEPTS[word]] += 1.0
        return vector


@pytest.fixture
def embedder() -> ConceptEmbedder:
    return ConceptEmbedder()


@pytest.fixture
def hybrid(store: MemoryStore, clock: Clock, embedder: ConceptEmbedder) -> MemoryStore:
    store.remember("The user drives an automobile to the office", category="profile")
    store.remember("The team dog is called Biscuit", category="entities")
    store.remember("Reports read from postgres replicas", category="cases")
    store.close()
    return MemoryStore(store.root, agent="planner", clock=clock, embedder=embedder)


def test_recall_finds_a_memory_by_meaning_when_no_word_is_shared(store: MemoryStore, hybrid: MemoryStore) -> None:
    with MemoryStore(store.root, agent="planner") as words_only:
        assert words_only.recall("car") == []
    hits = hybrid.recall("car")
    assert hits[0].memory.abstract == "The user drives an automobile to the office"
    # relevance fuses the places by meaning and by words: first by meaning and holding no word of the query,
    # it has the meaning's share (the weight) of what first in both would have
    assert hits[0].why.meaning == pytest.approx(1.0, abs=0.01) and hits[0].why.words == 0
    assert hits[0].why.meaning_place == 1 and hits[0].why.words_place is None
    assert hits[0].relevance == pytest.approx(hybrid.config.embedding_weight)
    assert hybrid.recall("canine")[0].memory.abstract == "The team dog is called Biscuit"
    # A word match still counts: it lifts the memory that has the word above those that only mean it.
    assert hybrid.recall("postgres sql")[0].memory.abstract == "Reports read from postgres replicas"


def test_each_text_is_embedded_once_even_across_processes_and_rebuilds(
        hybrid: MemoryStore, embedder: ConceptEmbedder, clock: Clock) -> None:
    hybrid.recall("car")
    # three memories, the questions that measure the relevance floor (once), and the query
    assert embedder.calls == [*embedder.calls[:3], *BACKGROUND, "car"]
    hybrid.recall("dog")
    assert embedder.calls[-1:] == ["dog"] and len(embedder.calls) == 3 + len(BACKGROUND) + 2
    edited = hybrid.recall("car")[0].memory
    hybrid.update(edited.id, content="The user drives a sedan to the office")
    embedder.calls.clear()
    hybrid.recall("vehicle")
    assert len(embedder.calls) == 2 and "sedan" in embedder.calls[0] and embedder.calls[1] == "vehicle"
    hybrid.rebuild_index()
    hybrid.close()
    again = ConceptEmbedder()
    with MemoryStore(hybrid.root, agent="planner", clock=clock, embedder=again) as reopened:
        assert reopened.recall("sedan")[0].memory.id == edited.id
    assert again.calls == ["sedan"]


def test_filters_and_decay_apply_to_meaning_as_to_words(hybrid: MemoryStore, clock: Clock) -> None:
    clock.advance(days=30)
    newer = hybrid.remember("Our second car is an electric vehicle", category="events")
    hits = hybrid.recall("sedan")  # the same closeness in meaning, no word shared: the newer wins
    assert hits[0].memory.id == newer.id
    assert hits[1].memory.abstract == "The user drives an automobile to the office"
    assert hits[1].relevance == pytest.approx(hits[0].relevance) and hits[1].decay == pytest.approx(0.5)
    only_profile = hybrid.recall("sedan", category="profile")
    assert [h.memory.category for h in only_profile] == ["profile"]
    assert [h.memory.id for h in hybrid.recall("sedan", min_score=hits[0].score - 1e-9)] == [newer.id]


def test_the_weight_comes_from_configuration(store: MemoryStore, hybrid: MemoryStore, clock: Clock) -> None:
    settings = store.root / "mkdocs.yml"
    settings.write_text(settings.read_text().replace("    decay:\n", "    embedding:\n      weight: 0\n    decay:\n",
                                                     1))
    git(store.root, "commit", "-qam", "words only")
    with MemoryStore(store.root, agent="planner", clock=clock, embedder=ConceptEmbedder()) as words_only:
        assert words_only.recall("car") == []
        assert len(words_only.recall("postgres")) == 1
    settings.write_text(settings.read_text().replace("weight: 0\n", "weight: 2\n"))
    with pytest.raises(ConfigError, match="embedding.weight"):
        MemoryStore(store.root, agent="planner")


def test_the_same_ranking_without_numpy(hybrid: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    with_numpy = [(h.memory.id, round(h.relevance, 6)) for h in hybrid.recall("dog walks", limit=3)]
    monkeypatch.setitem(sys.modules, "numpy", None)  # import numpy now fails
    storage_of(hybrid).vectors._loaded = None  # type: ignore[union-attr]
    assert [(h.memory.id, round(h.relevance, 6)) for h in hybrid.recall("dog walks", limit=3)] == with_numpy


def test_a_failing_embedder_is_a_clear_error_and_a_tool_result(store: MemoryStore, clock: Clock) -> None:
    store.remember("something to find")

    def broken(text: str) -> list[float]:
        raise RuntimeError("model server unreachable")

    with MemoryStore(store.root, agent="planner", clock=clock, embedder=broken) as failing:
        with pytest.raises(InvalidInput,
                           match=r"embedder .*broken failed on memory \w+: RuntimeError: model server unreachable"):
            failing.recall("anything")
        result = failing.call_tool("retrieve_from_memory", {"keywords": ["anything"]})
        assert result.startswith("Error: embedder") and "model server unreachable" in result
    with MemoryStore(store.root, agent="planner", clock=clock, embedder=lambda text: [0.0, 0.0]) as zeros:
        with pytest.raises(InvalidInput, match="no usable vector"):
            zeros.recall("anything")
    with pytest.raises(InvalidInput, match="expected a callable"):
        MemoryStore(store.root, agent="planner", embedder="all-MiniLM-L6-v2")  # type: ignore[arg-type]


def test_a_question_the_embedder_fails_on_is_one_clear_error_and_asked_once(store: MemoryStore, clock: Clock) -> None:
    store.remember("The user drives an automobile to the office", category="profile")

    class Unreachable(ConceptEmbedder):  # the model server goes away after the memories were embedded
        def __call__(self, text: str) -> list[float]:
            if text == "where do I park?":
                self.calls.append(text)
                raise RuntimeError("model server unreachable")
            return super().__call__(text)

    embedder = Unreachable()
    with MemoryStore(store.root, agent="planner", clock=clock, embedder=embedder) as hybrid:
        assert hybrid.recall("car")[0].memory.abstract == "The user drives an automobile to the office"
        with pytest.raises(InvalidInput, match=r"failed on the query: RuntimeError: model server unreachable$"):
            hybrid.recall("where do I park?")
        assert embedder.calls.count("where do I park?") == 1  # (not asked again, to fail twice as slowly)
        assert hybrid.recall("sedan")[0].memory.abstract == "The user drives an automobile to the office"


def test_another_model_under_the_same_name_is_caught(hybrid: MemoryStore, clock: Clock, tmp_path: Path) -> None:
    hybrid.recall("car")
    hybrid.close()

    def wider(text: str) -> list[float]:
        return [1.0, 0.5, 0.25, 0.125]

    wider.model = ConceptEmbedder.model  # type: ignore[attr-defined]
    with MemoryStore(hybrid.root, agent="planner", clock=clock, embedder=wider) as confused:
        with pytest.raises(InvalidInput, match="4 dimensions, the memories 3"):
            confused.recall("car")


# --- models named by their library: model2vec:, sentence-transformers:, fastembed: -----------------


def installed_library(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """``name`` importable as far as memsite's check goes (the model is never loaded in these tests)."""
    import importlib.machinery
    import types

    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    monkeypatch.setitem(sys.modules, name, module)


def test_a_library_not_installed_is_named_with_its_install_command(store: MemoryStore,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "model2vec", None)
    with pytest.raises(ConfigError, match=r"^embedder: model2vec:minishlab/potion-base-8M needs model2vec, which "
                                          r"is not installed; pip install model2vec$"):
        MemoryStore(store.root, agent="planner", embedder="model2vec:minishlab/potion-base-8M")
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    monkeypatch.setenv("MEMSITE_EMBEDDING", "Sentence-Transformers:/models/MiniLM")
    with pytest.raises(ConfigError, match=r"^MEMSITE_EMBEDDING: sentence-transformers:/models/MiniLM needs "
                                          r"sentence-transformers, which is not installed"):
        MemoryStore(store.root, agent="planner")  # the library's name in any case, the folder's as written


def test_a_model_neither_a_folder_nor_cached_is_not_downloaded_unless_allowed(
        store: MemoryStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hub = pytest.importorskip("huggingface_hub")
    installed_library(monkeypatch, "model2vec")
    with pytest.raises(ConfigError, match=r"^embedder: model2vec:/nowhere/potion: no such folder$"):
        MemoryStore(store.root, agent="planner", embedder="model2vec:/nowhere/potion")
    asked = []

    def snapshot_download(name: str, local_files_only: bool) -> str:  # the hub, as seen offline
        asked.append((name, local_files_only))
        if local_files_only:
            raise hub.errors.LocalEntryNotFoundError("no cached snapshot")
        raise ConnectionError("no route to the hub")

    monkeypatch.setattr(hub, "snapshot_download", snapshot_download)
    with pytest.raises(ConfigError, match=r"^embedder: model2vec:minishlab/potion-base-8M is not in the local model "
                                          r"cache \(.*\); memsite downloads a model only when allowed: set "
                                          r"MEMSITE_EMBEDDING_DOWNLOAD=1 \(or embedding.download: true\) once, "
                                          r"or name the model's folder$"):
        MemoryStore(store.root, agent="planner", embedder="model2vec:minishlab/potion-base-8M")
    monkeypatch.setenv("MEMSITE_EMBEDDING_DOWNLOAD", "1")
    with pytest.raises(ConfigError, match=r"could not be downloaded \(ConnectionError: no route to the hub\)"):
        MemoryStore(store.root, agent="planner", embedder="model2vec:minishlab/potion-base-8M")
    assert asked == [("minishlab/potion-base-8M", True), ("minishlab/potion-base-8M", False)]
    monkeypatch.delenv("MEMSITE_EMBEDDING_DOWNLOAD")
    settings = store.root / "mkdocs.yml"
    settings.write_text(settings.read_text().replace("    decay:\n",
                                                     "    embedding:\n      download: true\n    decay:\n", 1))
    git(store.root, "commit", "-qam", "models may be downloaded")
    with pytest.raises(ConfigError, match="could not be downloaded"):
        MemoryStore(store.root, agent="planner", embedder="model2vec:minishlab/potion-base-8M")
    # A folder is read as it is: the vectors are kept under its full path
    folder = tmp_path / "potion"
    folder.mkdir()
    with MemoryStore(store.root, agent="planner", embedder=f"model2vec:{folder}") as named:
        assert named.embedder.model == f"model2vec:{folder}"
    with pytest.raises(InvalidInput, match=r"or one of auto, minilm, wordllama, none, or model2vec:<model>, "
                                           r"sentence-transformers:<model>, fastembed:<model>, got 'onnx:x'"):
        MemoryStore(store.root, agent="planner", embedder="onnx:x")
