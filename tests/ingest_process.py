"""An ingest in its own process, killed at a chosen point (for the resume tests).

    python -m tests.ingest_process REPO CALLS_FILE KILL_AT

The extractor is scripted: it appends a line to CALLS_FILE each time it is
asked, then answers with CANDIDATES. KILL_AT is where the process sends itself
SIGKILL: ``extracting`` (while the LLM is answering), ``extracted`` (the
candidates are checkpointed), ``committed`` (a batch is committed, its
checkpoint not yet saved), ``batch`` (the first batch fully recorded), or
``none``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from memsite import Extractor, MemoryStore
from memsite.features.ingest import Checkpoints

CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Our staging cluster is called vega and deploys run on Tuesdays."},
    {"role": "assistant", "content": "Noted: staging is vega, deploys on Tuesdays."},
]
CANDIDATES = [
    {"content": "The staging cluster is called vega.", "category": "entities", "tags": ["staging"]},
    {"content": "Deploys to production happen on Tuesdays after the standup.", "category": "events"},
    {"content": "The user prefers short answers with code first.", "category": "preferences"},
    {"content": "Flaky login tests were fixed by pinning the browser version.", "category": "cases"},
    {"content": "To release: tag the commit, wait for CI, then publish the wheel.", "category": "patterns"},
]
KEY = "run-42"


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def scripted_llm(calls: Path, kill_at: str):
    def llm(prompt: str) -> str:
        with calls.open("a") as f:
            f.write("called\n")
        if kill_at == "extracting":
            die()
        return "Here are the memories:\n```json\n" + json.dumps(CANDIDATES) + "\n```"
    return llm


def main() -> None:
    repo, calls, kill_at = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    original = Checkpoints.save

    def save(self: Checkpoints, data: dict) -> None:
        if kill_at == "committed" and data["stage"] == "storing" and data["processed"] > 0:
            die()  # the batch is committed; its checkpoint is not
        original(self, data)
        if kill_at == "extracted" and data["stage"] == "storing" and data["processed"] == 0:
            die()
        if kill_at == "batch" and data["stage"] == "storing" and data["processed"] > 0:
            die()

    Checkpoints.save = save  # type: ignore[method-assign]
    with MemoryStore(repo, agent="ingester") as store:
        stats = store.ingest(CONVERSATION, Extractor(scripted_llm(calls, kill_at)), session_key=KEY, batch_size=2)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
