"""Models named by their library (``model2vec:``, ``sentence-transformers:``, ``fastembed:``), each loaded by the
real library from a tiny model the test makes, and used for recall by meaning; no network.

The model is the toy of tests/test_embedder.py (three meanings) as each library
stores a model: a tokenizer (its words whole, any other word letter by letter)
and one vector a token. A test is skipped
only when its library is not installed (.ci/run installs model2vec and fastembed;
sentence-transformers needs PyTorch, too large to install for one test).
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.cli import main

from .conftest import Clock
from .test_embedder import CONCEPTS

pytestmark = pytest.mark.slow  # models loaded by their libraries

DIMENSIONS = 3
# The toy's words whole, and single characters for any other word (so that every text has a vector)
_CHARACTERS = string.ascii_lowercase + string.digits
VOCABULARY = ["[PAD]", "[UNK]", *CONCEPTS, *_CHARACTERS, *string.punctuation, *(f"##{c}" for c in _CHARACTERS)]


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt of a library to reach Hugging Face's hub fails (the models are folders on disk)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")


def tokenizer() -> Any:
    """A WordPiece tokenizer of VOCABULARY, as Hugging Face's tokenizers saves one."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    made = Tokenizer(models.WordPiece({word: i for i, word in enumerate(VOCABULARY)}, unk_token="[UNK]"))
    made.normalizer = normalizers.Lowercase()
    made.pre_tokenizer = pre_tokenizers.Whitespace()
    return made


def vectors() -> Any:
    """One row a token of VOCABULARY: a little of every meaning, and much of its own for the toy's words."""
    import numpy

    rows = numpy.full((len(VOCABULARY), DIMENSIONS), 0.05, dtype=numpy.float32)
    for word, meaning in CONCEPTS.items():
        rows[VOCABULARY.index(word), meaning] += 1.0
    return rows


def recalls_by_meaning(root: Path, clock: Clock, name: str) -> None:
    """With model ``name``, "car" recalls the memory about an automobile though they share no word."""
    with MemoryStore.init(root, agent="planner", clock=clock) as words_only:  # (the tests' default: words only)
        words_only.remember("The user drives an automobile to the office", category="profile")
        words_only.remember("The team dog is called Biscuit", category="entities")
        words_only.remember("Reports read from postgres replicas", category="cases")
        assert words_only.recall("car") == []
    with MemoryStore(root, agent="planner", clock=clock, embedder=name) as store:
        assert store.embedder.model.startswith(name)  # type: ignore[union-attr]
        hits = store.recall("car")
        assert [h.memory.abstract for h in hits][:1] == ["The user drives an automobile to the office"]
        assert hits[0].why.words == 0 and hits[0].why.meaning_place == 1
        assert store.recall("puppy")[0].memory.abstract == "The team dog is called Biscuit"
    # the same model named in the environment, through the CLI, by another process's vectors cache
    result = CliRunner().invoke(main, ["-C", str(root), "recall", "sql"], env={"MEMSITE_EMBEDDING": name})
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].endswith("Reports read from postgres replicas"), result.output


def test_a_model2vec_folder(tmp_path: Path, clock: Clock) -> None:
    model2vec = pytest.importorskip("model2vec")
    folder = tmp_path / "potion-toy"
    model2vec.StaticModel(vectors(), tokenizer(), normalize=True).save_pretrained(folder)
    recalls_by_meaning(tmp_path / "memory", clock, f"model2vec:{folder}")


def test_a_sentence_transformers_folder(tmp_path: Path, clock: Clock) -> None:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from sentence_transformers.models import Normalize, StaticEmbedding  # (3.x to 6.x)

    folder = tmp_path / "static-toy"
    embedding = StaticEmbedding(tokenizer(), embedding_weights=vectors())
    sentence_transformers.SentenceTransformer(modules=[embedding, Normalize()], device="cpu").save(str(folder))
    recalls_by_meaning(tmp_path / "memory", clock, f"sentence-transformers:{folder}")


def test_a_fastembed_model_in_its_cache(tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """A custom model registered with fastembed, its files in fastembed's cache: memsite's MiniLM, as shipped."""
    fastembed = pytest.importorskip("fastembed")
    from fastembed.common.model_description import ModelSource, PoolingType

    from memsite.features.embedders import MiniLMEmbedder

    name = "memsite-tests/minilm-int8"
    if name not in {m["model"] for m in fastembed.TextEmbedding.list_supported_models()}:
        # memsite's ONNX file pools and normalises itself: fastembed is told to do neither
        fastembed.TextEmbedding.add_custom_model(model=name, pooling=PoolingType.DISABLED, normalization=False,
                                                 sources=ModelSource(hf=name), dim=MiniLMEmbedder.dimensions,
                                                 model_file="model.onnx")
    cache = tmp_path / "fastembed"
    snapshot = cache / f"models--{name.replace('/', '--')}" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    for file in ("model.onnx", "tokenizer.json"):
        (snapshot / file).symlink_to(MiniLMEmbedder.folder / file)
    (snapshot / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (snapshot / "special_tokens_map.json").write_text(json.dumps({"pad_token": "[PAD]"}))
    (snapshot / "tokenizer_config.json").write_text(json.dumps({"model_max_length": MiniLMEmbedder.max_tokens,
                                                                 "pad_token": "[PAD]"}))
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("0" * 40)
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(cache))
    root = tmp_path / "memory"
    MemoryStore.init(root, agent="planner", clock=clock).close()
    with MemoryStore(root, agent="planner", clock=clock, embedder=f"fastembed:{name}") as store:
        parked = store.remember("The user drives an automobile to the office", category="profile")
        store.remember("The team dog is called Biscuit", category="entities")
        hits = store.recall("Which car do they take to work?")
        assert hits[0].memory.id == parked.id
        ours = MiniLMEmbedder().embed_many(["Which car do they take to work?"])[0]
        theirs = store.embedder.embed_many(["Which car do they take to work?"])[0]  # type: ignore[union-attr]
        assert float((ours * theirs).sum()) == pytest.approx(1.0, abs=1e-3)  # fastembed ran the same model
