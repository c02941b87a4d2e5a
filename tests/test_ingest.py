"""Checkpointed ingest: conversations become memories exactly once, even across kills."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import Extractor, MemoryStore, MemsiteError, NotFound
from memsite.api import storage_of
from memsite.cli import main
from tests.conftest import assert_clean, git
from tests.ingest_process import CANDIDATES, CONVERSATION, KEY
from tests.test_llm import Endpoint, chat

ROOT = Path(__file__).resolve().parent.parent


class Scripted:
    """An LLM that answers with ``answer`` and counts the calls."""

    def __init__(self, answer: object) -> None:
        self.answer = answer if isinstance(answer, str) else json.dumps(answer)
        self.calls = 0

    def __call__(self, prompt: str) -> str:
        self.calls += 1
        return self.answer


def ingested(store: MemoryStore, key: str = KEY) -> list[str]:
    return sorted(m.content for m in store.list() if m.source == f"ingest/{key}")


def test_an_ingest_is_one_commit_with_its_counts_in_the_trailers(store: MemoryStore) -> None:
    before = int(git(store.root, "rev-list", "--count", "HEAD"))
    stats = store.ingest(CONVERSATION, Extractor(Scripted(CANDIDATES)), session_key=KEY)
    assert stats == {"created": 5, "merged": 0, "skipped": 0, "refused": 0}
    assert ingested(store) == sorted(c["content"] for c in CANDIDATES)
    assert int(git(store.root, "rev-list", "--count", "HEAD")) == before + 1
    message = git(store.root, "log", "-1", "--format=%B")
    assert "Ingest-Batch: run-42 0-5" in message and "Ingest-Created: 5" in message
    assert {m.category for m in store.list() if m.source == "ingest/run-42"} == {
        "entities", "events", "preferences", "cases", "patterns"}
    assert store.incomplete_ingests() == []
    assert_clean(store.root)


def test_ingesting_again_skips_what_is_known_and_merges_what_is_close(store: MemoryStore) -> None:
    store.ingest(CONVERSATION, Extractor(Scripted(CANDIDATES)), session_key="first")
    again = [*CANDIDATES[:3], {"content": CANDIDATES[3]["content"].replace("version.", "version in CI."),
                              "category": "cases"}]
    stats = store.ingest(CONVERSATION, Extractor(Scripted(again)), session_key="second")
    assert stats == {"created": 0, "merged": 1, "skipped": 3, "refused": 0}
    assert len(store.list()) == 5
    assert "Ingest-Merged: 1" in git(store.root, "log", "-1", "--format=%B")


def test_a_candidate_holding_a_secret_is_refused_and_the_rest_stored(store: MemoryStore,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    answer = [CANDIDATES[0], {"content": "The deploy key is AKIAIOSFODNN7EXAMPLE", "category": "entities"}]
    stats = store.ingest(CONVERSATION, Extractor(Scripted(answer)), session_key=KEY)
    assert stats["created"] == 1 and stats["refused"] == 1
    assert "candidate 2 refused" in caplog.text
    assert all("AKIA" not in m.content for m in store.list())


def test_an_empty_conversation_asks_nobody_and_writes_nothing(store: MemoryStore) -> None:
    llm = Scripted(CANDIDATES)
    head = git(store.root, "rev-parse", "HEAD")
    stats = store.ingest([{"role": "system", "content": "Be brief."}], Extractor(llm), session_key=KEY)
    assert stats == {"created": 0, "merged": 0, "skipped": 0, "refused": 0}
    assert llm.calls == 0 and git(store.root, "rev-parse", "HEAD") == head
    assert store.incomplete_ingests() == []


@pytest.mark.parametrize("kill_at, llm_calls", [
    ("extracting", 2),   # the LLM never answered: resume asks again
    ("extracted", 1),    # candidates checkpointed, nothing stored
    ("committed", 1),    # first batch committed, the checkpoint not told
    ("batch", 1),        # first batch committed and recorded
])
def test_an_ingest_killed_anywhere_resumes_to_each_candidate_stored_once(
        store: MemoryStore, tmp_path: Path, kill_at: str, llm_calls: int) -> None:
    calls = tmp_path / "calls.txt"
    process = subprocess.run([sys.executable, "-m", "tests.ingest_process", str(store.root), str(calls), kill_at],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert process.returncode == -9, process.stderr
    assert store.incomplete_ingests() == [KEY]

    llm = Scripted(CANDIDATES)
    with MemoryStore(store.root, agent="ingester") as reopened:
        stats = reopened.resume(KEY, Extractor(llm))
        assert stats == {"created": 5, "merged": 0, "skipped": 0, "refused": 0}
        assert ingested(reopened) == sorted(c["content"] for c in CANDIDATES)
        assert reopened.incomplete_ingests() == []
    assert calls.read_text().count("called") + llm.calls == llm_calls
    assert_clean(store.root)


def test_resume_needs_a_checkpoint_and_an_extractor_when_extraction_never_finished(
        store: MemoryStore, tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="no unfinished ingest 'nothing'"):
        store.resume("nothing")
    subprocess.run([sys.executable, "-m", "tests.ingest_process", str(store.root), str(tmp_path / "c"), "extracting"],
                   cwd=ROOT, capture_output=True, timeout=60)
    with pytest.raises(MemsiteError, match="resume it with an extractor"):
        store.resume(KEY)
    assert store.incomplete_ingests() == [KEY]


def test_calling_ingest_again_with_the_key_resumes_instead_of_asking_again(store: MemoryStore, tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "tests.ingest_process", str(store.root), str(tmp_path / "c"), "batch"],
                   cwd=ROOT, capture_output=True, timeout=60)
    llm = Scripted([{"content": "Something else entirely", "category": "general"}])
    stats = store.ingest(CONVERSATION, Extractor(llm), session_key=KEY)
    assert llm.calls == 0 and stats["created"] == 5


def test_a_bad_session_key_is_refused_before_anything_is_written(store: MemoryStore) -> None:
    with pytest.raises(MemsiteError, match="session key '../x'"):
        store.ingest(CONVERSATION, Extractor(Scripted(CANDIDATES)), session_key="../x")
    checkpoints = storage_of(store).repo.state_dir / "checkpoints"
    assert not checkpoints.exists() or not any(checkpoints.iterdir())


def test_the_cli_ingests_a_conversation_file_through_an_http_llm(store: MemoryStore, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    server = Endpoint(chat(json.dumps(CANDIDATES)))
    server.start()
    monkeypatch.setenv("MEMSITE_LLM_BASE_URL", server.base_url)
    monkeypatch.setenv("MEMSITE_LLM_MODEL", "test-model")
    conversation = tmp_path / "chat.json"
    conversation.write_text(json.dumps({"messages": CONVERSATION}))
    result = CliRunner().invoke(main, ["-C", str(store.root), "ingest", str(conversation), "--session-key", "cli-1"])
    server.stop()
    assert result.exit_code == 0, result.output
    assert "cli-1: 5 created, 0 merged, 0 skipped" in result.output
    assert len(server.requests) == 1
    assert len(ingested(store, "cli-1")) == 5


def test_the_cli_explains_a_missing_llm_and_a_bad_file(store: MemoryStore, tmp_path: Path) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(CONVERSATION))
    result = CliRunner().invoke(main, ["-C", str(store.root), "ingest", str(chat)])
    assert result.exit_code == 1 and "set MEMSITE_LLM_BASE_URL and MEMSITE_LLM_MODEL" in result.output
    chat.write_text("{not json")
    result = CliRunner().invoke(main, ["-C", str(store.root), "ingest", str(chat)])
    assert result.exit_code == 1 and "chat.json: not JSON" in result.output


def test_the_cli_lists_and_resumes_unfinished_ingests(store: MemoryStore, tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "tests.ingest_process", str(store.root), str(tmp_path / "c"), "extracted"],
                   cwd=ROOT, capture_output=True, timeout=60)
    listed = CliRunner().invoke(main, ["-C", str(store.root), "resume"])
    assert listed.exit_code == 0 and listed.output.strip() == KEY
    resumed = CliRunner().invoke(main, ["-C", str(store.root), "resume", "--all"])
    assert resumed.exit_code == 0, resumed.output
    assert f"{KEY}: 5 created" in resumed.output
    assert len(ingested(store)) == 5
