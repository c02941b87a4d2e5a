"""Vectors travel with the repository: a fresh clone reads the published ones instead of embedding every memory."""

from __future__ import annotations

import array
import hashlib
import math
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.cli import main
from memsite.features.embedders import MiniLMEmbedder
from memsite.features.sync import PUBLISH_AT_LEAST
from memsite.storage.vectors import Vectors, decode, encode, published_folder

from .conftest import Clock, git

TEXTS = ["The ledger keeps its data in Postgres 15", "Marta leads the team that owns payments-api",
         "Deploy the refunds worker with Argo CD on Tuesdays", "Webhook retries duplicated refunds last spring",
         "The user prefers tabs over spaces in Python files"]


class Counting:
    """A deterministic stand-in embedder (hashed words) that records the texts it embeds."""

    def __init__(self, model: str = "counting/1") -> None:
        self.model = model
        self.texts: list[str] = []

    def __call__(self, text: str) -> list[float]:
        self.texts.append(text)
        vector = [0.0] * 32
        for word in text.lower().split():
            digest = hashlib.sha1(word.strip("?.,").encode()).digest()
            vector[digest[0] % 32] += 1.0 if digest[1] % 2 else -1.0
        return vector if any(vector) else [1.0] + [0.0] * 31

    def memories_embedded(self) -> list[str]:
        return [t for t in self.texts if any(t.startswith(m) for m in TEXTS)]


@pytest.fixture
def published(store: MemoryStore, clock: Clock) -> Path:
    for text in TEXTS:
        store.remember(text, dedupe=False)
    store.close()
    with MemoryStore(store.root, agent="planner", clock=clock, embedder=Counting()) as hybrid:
        assert hybrid.publish_vectors()[0] == len(TEXTS)
        assert hybrid.publish_vectors() == (0, None)  # published once
    return store.root


def test_a_fresh_clone_reads_the_published_vectors_and_recalls_as_the_original_does(
        published: Path, tmp_path: Path, clock: Clock) -> None:
    git(tmp_path, "clone", "-q", str(published), "clone")
    with MemoryStore(published, agent="planner", clock=clock, embedder=Counting()) as original:
        expected = [(h.memory.id, round(h.score, 2)) for h in original.recall("who owns payments-api?")]
    embedder = Counting()
    with MemoryStore(tmp_path / "clone", agent="reader", clock=clock, embedder=embedder) as clone:
        found = [(h.memory.id, round(h.score, 2)) for h in clone.recall("who owns payments-api?")]
    assert found == expected and found
    assert embedder.memories_embedded() == []  # not one memory embedded again
    # The published file names its model and holds each memory once, a quarter of float32's size.
    (vec,) = (tmp_path / "clone" / published_folder("counting/1")).iterdir()
    assert vec.name.startswith("planner-") and len(decode(vec.read_bytes(), "counting/1")) == len(TEXTS)
    assert not list((tmp_path / "clone" / "site").glob("**/*.vec"))  # outside the site


def test_vectors_of_another_model_or_a_damaged_file_are_passed_over_and_embedded_again(
        published: Path, tmp_path: Path, clock: Clock) -> None:
    git(tmp_path, "clone", "-q", str(published), "clone")
    other = Counting("another/2")
    with MemoryStore(tmp_path / "clone", agent="reader", clock=clock, embedder=other) as clone:
        assert clone.recall("who owns payments-api?")[0].memory.abstract.startswith("Marta")
    assert sorted(other.memories_embedded()) == sorted(TEXTS)  # another model's vectors are never used
    (vec,) = (tmp_path / "clone" / published_folder("counting/1")).iterdir()
    data = vec.read_bytes()
    vec.write_bytes(data[: len(data) - 10])  # the last record cut short
    git(tmp_path / "clone", "commit", "-qam", "A truncated vectors file")
    embedder = Counting()
    with MemoryStore(tmp_path / "clone", agent="reader", clock=clock, embedder=embedder) as clone:
        assert clone.recall("who owns payments-api?")[0].memory.abstract.startswith("Marta")
    assert len(embedder.memories_embedded()) == 1  # only the memory whose record was cut


def test_two_clones_publishing_merge_without_conflict(published: Path, tmp_path: Path, clock: Clock) -> None:
    for name in ("a", "b"):
        git(tmp_path, "clone", "-q", str(published), name)
        with MemoryStore(tmp_path / name, agent=name, clock=clock, embedder=Counting()) as clone:
            clone.remember(f"Clone {name} learned that the fx-rates feed updates hourly", dedupe=False)
            assert clone.publish_vectors()[0] == 1
    git(tmp_path / "a", "pull", "-q", "--no-rebase", "--no-edit", str(tmp_path / "b"), "main")
    files = sorted(p.name for p in (tmp_path / "a" / published_folder("counting/1")).iterdir())
    assert [f.split("-")[0] for f in files] == ["a", "b", "planner"]  # one file per publishing clone


def test_the_format_keeps_cosines_and_refuses_what_is_not_its_own() -> None:
    vector = [math.sin(i) for i in range(1, 385)]
    norm = math.sqrt(sum(v * v for v in vector))
    key = b"k" * 20
    data = encode("m/1", 384, [(key, array.array("f", [v / norm for v in vector]).tobytes())])
    back = array.array("f", decode(data, "m/1")[key])
    assert sum(a * b / norm for a, b in zip(back, vector)) > 0.9999
    assert decode(data, "m/2") == {} and decode(b"not vectors", "m/1") == {} and decode(data[:-1], "m/1") == {}


def test_index_embed_publish_from_the_command_line(published: Path, monkeypatch: pytest.MonkeyPatch,
                                                   clock: Clock) -> None:
    monkeypatch.setenv("MEMSITE_EMBEDDING", "minilm")
    with MemoryStore(published, agent="planner") as store:
        store.remember("The reconciliation job runs at 02:00 UTC", dedupe=False)
    result = CliRunner().invoke(main, ["-C", str(published), "index", "embed", "--publish"])
    assert result.exit_code == 0, result.output
    assert "Published 6 vectors (commit " in result.output
    result = CliRunner().invoke(main, ["-C", str(published), "index", "embed", "--publish"])
    assert "Every memory's vector is published already." in result.output


def test_a_file_naming_the_model_with_vectors_of_another_size_is_passed_over(
        published: Path, tmp_path: Path, clock: Clock) -> None:
    git(tmp_path, "clone", "-q", str(published), "clone")
    folder = tmp_path / "clone" / published_folder("counting/1")
    keys = [hashlib.sha1(text.encode()).digest() for text in TEXTS]  # (the texts embedded are the memories')
    (folder / "zz-forged.vec").write_bytes(encode("counting/1", 8, [(k, array.array("f", [1.0] * 8).tobytes())
                                                                     for k in keys]))
    (vec,) = [p for p in folder.iterdir() if p.name.startswith("planner-")]
    vec.unlink()
    git(tmp_path / "clone", "add", "-A")
    git(tmp_path / "clone", "commit", "-qm", "Vectors of another size under the model's name")
    embedder = Counting()
    with MemoryStore(tmp_path / "clone", agent="reader", clock=clock, embedder=embedder) as clone:
        assert clone.recall("who owns payments-api?")[0].memory.abstract.startswith("Marta")
    assert sorted(embedder.memories_embedded()) == sorted(TEXTS)  # embedded again, not read at 8 dimensions


def _memories_embedded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the memory texts any store embeds from now on (reference texts and queries left out)."""
    embedded: list[str] = []
    real = Vectors._embed_batch

    def recording(self: Vectors, todo: list[tuple[bytes, str, str]]) -> list[tuple[bytes, bytes]]:
        embedded.extend(text for _, what, text in todo if what.startswith("memory"))
        return real(self, todo)

    monkeypatch.setattr(Vectors, "_embed_batch", recording)
    return embedded


@pytest.fixture
def shared(store: MemoryStore, tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(store.root, "remote", "add", "origin", str(bare))
    store.sync()
    store.close()
    return bare


def test_syncs_publish_what_clones_embedded_and_a_fresh_memsite_clone_embeds_nothing(
        store: MemoryStore, shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSITE_EMBEDDING", raising=False)
    runner = CliRunner()
    texts = [f"Service {i} is owned by team {i % 7} and deploys from the {i}th pipeline"
             for i in range(PUBLISH_AT_LEAST + 8)]
    with MemoryStore(store.root, agent="planner") as agent:  # the configured model: auto, memsite's own minilm
        folder = store.root / published_folder(MiniLMEmbedder.model)
        for text in texts[:8]:
            agent.remember(text, category="entities", dedupe=False)
        assert agent.recall("who owns service 3?")  # (every memory embedded, as an agent's first recall does)
        agent.sync()
        assert not folder.exists()  # too few waiting: a fresh clone embeds eight in a blink
        for text in texts[8:]:
            agent.remember(text, category="entities", dedupe=False)
    result = runner.invoke(main, ["-C", str(store.root), "--agent", "planner", "recall", "who owns service 30?"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["-C", str(store.root), "--agent", "planner", "sync"])  # (a process of its own)
    assert result.exit_code == 0, result.output
    (vec,) = folder.iterdir()  # published by the sync, and on the remote
    on_remote = subprocess.run(["git", "show", f"main:{vec.relative_to(store.root)}"], cwd=shared,
                               capture_output=True, check=True).stdout
    assert len(decode(on_remote, MiniLMEmbedder.model)) == len(texts)

    embedded = _memories_embedded(monkeypatch)
    with MemoryStore.clone(str(shared), tmp_path / "laptop", agent="newcomer") as joined:
        assert joined.recall("who owns service 30?")[0].memory.abstract == texts[30]
    assert embedded == []  # not one memory embedded again, and nobody ran a command for it


def test_a_sync_never_publishes_vectors_of_a_model_the_repository_does_not_configure(
        store: MemoryStore, shared: Path, clock: Clock) -> None:
    with MemoryStore(store.root, agent="planner", clock=clock, embedder=Counting()) as agent:
        for i in range(PUBLISH_AT_LEAST + 1):
            agent.remember(f"Fact {i}: the nightly job {i} writes to bucket b{i}", dedupe=False)
        assert agent.recall("which bucket does job 4 write to?")
        agent.sync()
    assert git(shared, "ls-tree", "-r", "--name-only", "main").count("vectors/") == 0


def test_a_clone_leaves_another_agents_new_memories_to_their_writer_and_publishes_them_once_they_are_old(
        store: MemoryStore, shared: Path, tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSITE_EMBEDDING", raising=False)
    with MemoryStore(store.root, agent="planner", clock=clock) as writer:  # it never recalls: embeds nothing
        for i in range(PUBLISH_AT_LEAST + 2):
            writer.remember(f"Queue {i} drains into the warehouse at {i}:00 UTC", category="entities", dedupe=False)
        writer.sync()
    git(tmp_path, "clone", "-q", str(shared), "reader")
    with MemoryStore(tmp_path / "reader", agent="reader", clock=clock) as reader:
        assert reader.recall("when does queue 7 drain?")  # every memory embedded here
        reader.sync()
        assert "vectors/" not in git(shared, "ls-tree", "-r", "--name-only", "main")  # the writer's to publish
        clock.advance(hours=2)
        reader.sync()  # an hour on, nobody has: this clone publishes them
    listed = git(shared, "ls-tree", "-r", "--name-only", "main", "--", "vectors").split()
    assert [Path(f).name.split("-")[0] for f in listed] == ["reader"]
    on_remote = subprocess.run(["git", "show", f"main:{listed[0]}"], cwd=shared, capture_output=True,
                               check=True).stdout
    assert len(decode(on_remote, MiniLMEmbedder.model)) == PUBLISH_AT_LEAST + 2
