"""Benchmark: Claude's memory tool on memsite at 10,000 files, beside the SDK's tool on a plain folder; ADK's search.

    python bench/memory_tool.py            # 10,000 files, 300 of each command
    python bench/memory_tool.py --quick    # 2,000 files, 100 of each

A command's round trip is what the SDK's tool runner waits for: ``tool.call``
with the command Claude sent, in process. memsite's tool
(``MemsiteMemoryTool``: each create and str_replace a git commit) beside the
SDK's ``BetaLocalFilesystemMemoryTool`` on a plain folder holding the same
files, in the same run. A ``view`` of ``/memories`` is timed too, with the
length of what Claude reads. Where ``google-adk`` is installed (it cannot
share an environment with AgentScope 2.x: run this with one that has it),
``search_memory`` of ``MemsiteMemoryService`` over as many memories, beside
ADK's ``InMemoryMemoryService`` holding the same texts as session events.
Recall is by words (``embedder="none"``), as on a base install.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import report
from anthropic.tools import BetaLocalFilesystemMemoryTool
from corpus import Corpus
from recall import percentile

from memsite import MemoryStore
from memsite.integrations.anthropic import MemsiteMemoryTool

FOLDERS = 50


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)



def files(corpus: Corpus, count: int) -> dict[str, str]:
    """Claude-like files: ``/memories/<folder>/note-<n>.md``, a heading and a few lines each."""
    made = {}
    for n in range(count):
        text = corpus.text()
        made[f"/memories/project-{n % FOLDERS:02}/note-{n:05}.md"] = f"# Note {n}\n\n{text}\n- marker-{n}\n"
    return made


def seed_memsite(repo: Path, made: dict[str, str]) -> MemoryStore:
    MemoryStore.init(repo, agent="claude").close()
    store = MemoryStore(repo, agent="claude", embedder="none")
    tool = MemsiteMemoryTool(store)
    paths = list(made)
    for start in range(0, len(paths), 5000):
        with store.transaction(f"Seed files {start}-{min(len(paths), start + 5000)}") as tx:
            for path in paths[start:start + 5000]:
                tool.files._add(tx, path.removeprefix("/memories/"), made[path])  # as create writes them
        log(f"  {min(len(paths), start + 5000):,}")
    return store


def round_trips(tool: Any, made: dict[str, str], calls: int, rng: random.Random) -> dict[str, list[float]]:
    paths = list(made)
    tool.call({"command": "view", "path": "/memories"})  # warm caches, as a conversation's first view does
    views = [lambda p=p: tool.call({"command": "view", "path": p}) for p in rng.choices(paths, k=calls)]
    creates = [lambda n=n: tool.call({"command": "create", "path": f"/memories/project-{n % FOLDERS:02}/new-{n}.md",
                                      "file_text": f"# New {n}\n\nA fact worth keeping, number {n}.\n"})
               for n in range(calls)]
    edited = rng.sample(paths, calls)
    replaces = [lambda p=p: tool.call({"command": "str_replace", "path": p,
                                        "old_str": f"- marker-{int(p[-8:-3])}\n",
                                        "new_str": f"- marker-{int(p[-8:-3])} (checked)\n"}) for p in edited]
    return {"view of a file": report.timed(views), "create": report.timed(creates),
            "str_replace": report.timed(replaces)}


def root_view(tool: Any, runs: int) -> tuple[list[float], int]:
    listing = tool.call({"command": "view", "path": "/memories"})
    views = [lambda: tool.call({"command": "view", "path": "/memories"}) for _ in range(runs)]
    return report.timed(views), len(listing)


def adk_search(repo: Path, corpus: Corpus, count: int, calls: int) -> dict[str, list[float]] | None:
    try:
        from google.adk.events import Event
        from google.adk.memory import InMemoryMemoryService
        from google.adk.sessions import Session
        from google.genai import types

        from memsite.integrations.adk import MemsiteMemoryService
    except ImportError:
        log("google-adk is not installed here: ADK's search is not measured")
        return None
    log(f"ADK: seeding {count:,} memories ...")
    MemoryStore.init(repo, agent="adk").close()
    store = MemoryStore(repo, agent="adk", embedder="none")
    service = MemsiteMemoryService(store)
    texts = [corpus.text() for _ in range(count)]
    for start in range(0, count, 5000):
        service._write("travel", "ada", "seed", [(text, "general", ()) for text in texts[start:start + 5000]])
    events = [Event(author="user", content=types.Content(role="user", parts=[types.Part(text=text)]))
              for text in texts]
    baseline = InMemoryMemoryService()
    asyncio.run(baseline.add_session_to_memory(Session(id="seed", app_name="travel", user_id="ada", events=events)))
    queries = [corpus.query() for _ in range(calls + 10)]

    async def searches(memory: Any) -> list[float]:
        times = []
        for i, query in enumerate(queries):
            start = time.perf_counter()
            await memory.search_memory(app_name="travel", user_id="ada", query=query)
            if i >= 10:
                times.append((time.perf_counter() - start) * 1000)
        return times

    measured = {"MemsiteMemoryService": asyncio.run(searches(service)),
                "InMemoryMemoryService": asyncio.run(searches(baseline))}
    store.close()
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 files, 100 of each command")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / ".tmp",
                        help="where to create the repositories (default: bench/.tmp)")
    args = parser.parse_args()
    size, calls = (2_000, 100) if args.quick else (10_000, 300)
    args.dir.mkdir(parents=True, exist_ok=True)
    corpus = Corpus(seed=size)
    made = files(corpus, size)
    with tempfile.TemporaryDirectory(prefix="memsite-memory-tool-", dir=args.dir) as tmp:
        log(f"seeding {size:,} files in a plain folder and in a memory repository ...")
        plain = BetaLocalFilesystemMemoryTool(str(Path(tmp) / "plain"))
        for path, text in made.items():
            plain.call({"command": "create", "path": path, "file_text": text})
        store = seed_memsite(Path(tmp) / "memory", made)
        memsite = MemsiteMemoryTool(store)
        log("root views ...")
        ours_view, ours_chars = root_view(memsite, 20)
        plain_view, plain_chars = root_view(plain, 20)
        log(f"{calls} of each command ...")
        ours = round_trips(memsite, made, calls, random.Random(1))
        theirs = round_trips(plain, made, calls, random.Random(1))
        log("store.update() beside ...")  # what any edit of a memory costs the store, tool or not
        edited = [m for m in store.list() if "(checked)" not in m.content][:calls]
        updates = report.timed([lambda m=m: store.update(m.id, content=m.content + " (checked)") for m in edited])
        store.close()
        searched = adk_search(Path(tmp) / "adk", Corpus(seed=size + 1), size, calls)

    print(f"\nClaude's memory tool on memsite ({sys.platform}, Python {sys.version.split()[0]}, "
          f"anthropic {metadata.version('anthropic')}): {size:,} files, {calls} calls of each command\n")
    print("| command | memsite p50 | p95 | plain folder (SDK's tool) p50 | p95 | target | met |")
    print("|---|---|---|---|---|---|---|")
    for name in ours:
        p50, p95 = statistics.median(ours[name]), percentile(ours[name], 95)
        met = "yes" if p50 <= 10 and p95 <= 30 else "NO"
        print(f"| {name}{' (a commit)' if name != 'view of a file' else ''} | {p50:.2f} ms | {p95:.2f} ms | "
              f"{statistics.median(theirs[name]):.2f} ms | {percentile(theirs[name], 95):.2f} ms | "
              f"p50 <= 10 ms, p95 <= 30 ms | {met} |")
    print(f"| (reference: `store.update()` of a memory's text, in process, the store's own cost of an edit) | "
          f"{statistics.median(updates):.2f} ms | {percentile(updates, 95):.2f} ms | | | | |")
    p50 = statistics.median(ours_view)
    print(f"| view of /memories ({ours_chars:,} characters; plain: {plain_chars:,}) | {p50:.1f} ms | "
          f"{percentile(ours_view, 95):.1f} ms | {statistics.median(plain_view):.1f} ms | "
          f"{percentile(plain_view, 95):.1f} ms | <= 100 ms, <= 16,000 characters | "
          f"{'yes' if p50 <= 100 and ours_chars <= 16_000 else 'NO'} |")
    if searched is not None:
        ours_search, theirs_search = searched["MemsiteMemoryService"], searched["InMemoryMemoryService"]
        p50 = statistics.median(ours_search)
        print(f"\nGoogle ADK search_memory (google-adk {metadata.version('google-adk')}): {size:,} memories of one "
              f"user, {calls} queries\n")
        print("| service | p50 | p95 | target | met |")
        print("|---|---|---|---|---|")
        print(f"| MemsiteMemoryService (memsite's recall) | {p50:.2f} ms | {percentile(ours_search, 95):.2f} ms | "
              f"p50 <= 15 ms | {'yes' if p50 <= 15 else 'NO'} |")
        print(f"| InMemoryMemoryService (ADK's, word overlap over every event) | "
              f"{statistics.median(theirs_search):.2f} ms | {percentile(theirs_search, 95):.2f} ms | | |")
    if args.quick:
        print("\n(--quick: a small repository; the targets apply to the full run)")
    report.publish("memory-tool", skip=args.quick)


if __name__ == "__main__":
    main()
