"""Benchmark: facts that change, beside the same store without them, in one run.

    python bench/supersede.py           # 10,000 memories, 2,000 supersessions
    python bench/supersede.py --quick   # 2,000 memories, 400 supersessions, a smoke run

Two repositories get the same memories, written through the API over 200
days (a commit every two days): one where 2,000 of them supersede an earlier
one (chains of up to five memories, 500 chains), and one where they are
plain new memories. Measured:

  * recall() latency (words only) in each, p50 and p95;
  * remember(supersedes=ID) beside a plain remember(), p50 and p95;
  * `memsite build` of each, wall time in a fresh process;
  * recall(as_of=...) in valid time and in record time (the memories of the
    last commit before that moment), at dates spread over the history (100
    queries in record time), and again at one date, beside recall now;
  * the language-model path: remember() of texts that contradict a memory,
    judged by a scripted OpenAI-compatible server on 127.0.0.1 (it answers
    "supersede" naming the memory of the same subject): how many of the
    scripted supersessions were made; then with a server that fails (errors,
    garbage, silence): how many memories were lost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import report
from corpus import CATEGORIES, Corpus

from memsite import MemoryStore

START = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)
DAYS = 200


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def plan(count: int, chains: int, seed: int) -> list[tuple[str, str, int | None]]:
    """(text, category, index of the memory it supersedes or None) in the order they are written."""
    corpus = Corpus(seed=seed)
    rng = random.Random(seed)
    items: list[tuple[str, str, int | None]] = [(corpus.text(), corpus.category(), None) for _ in range(count)]
    free = list(range(count))
    rng.shuffle(free)
    for c in range(chains):
        members = sorted(free[c * 5:(c + 1) * 5])  # five memories, in the order written: each replaces the one before
        category = rng.choice(CATEGORIES)
        for before, after in zip([None, *members], members):
            text, _, _ = items[after]
            items[after] = (text, category, before)
    return items


def seed(path: Path, items: list[tuple[str, str, int | None]], supersede: bool,
         per_commit: int) -> tuple[MemoryStore, Clock]:
    MemoryStore.init(path, agent="bench", clock=Clock(START - timedelta(days=1))).close()
    clock = Clock(START)
    store = MemoryStore(path, agent="bench", embedder="none", clock=clock, llm=False)
    ids: list[str] = []
    step = timedelta(days=DAYS) / (len(items) / per_commit)
    for start in range(0, len(items), per_commit):
        with store.transaction(f"Seed memories {start}-{start + per_commit}") as tx:
            for text, category, before in items[start:start + per_commit]:
                replaced = ids[before] if supersede and before is not None else None
                ids.append(tx.remember(text, category=category, dedupe=False, supersedes=replaced).id)
        clock.now += step
        if (start // per_commit) % 20 == 0:
            log(f"  {start + per_commit:,}")
    return store, clock



def build(root: Path, home: Path) -> tuple[float, float]:
    """A full `memsite build` in a fresh process: (wall seconds, CPU seconds of it and its children).

    The CPU time is what the comparison reads: on a shared 2-core machine the wall time of a minute-long
    build moves by more than the 10 % it is asked to stay within."""
    shutil.rmtree(root / "site", ignore_errors=True)
    env = {**os.environ, "HOME": str(home), "MEMSITE_EMBEDDING": "none"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "memsite", "-C", str(root), "build"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# --- a scripted language model ----------------------------------------------------------------------


class Scripted:
    """A chat-completions server on 127.0.0.1: ``supersede`` of the memory shown that names the same subject
    as the new text (``mode="script"``), or failures in turn: HTTP 500, garbage, silence (``mode="fail"``)."""

    ID = re.compile(r"^- id (\S+) \(written [^)]*\): (.*)$", re.M)
    SUBJECT = re.compile(r"Customer (\w+)")

    def __init__(self, mode: str) -> None:
        self.mode, self.calls = mode, 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                owner.calls += 1
                answer = owner.answer(body["messages"][-1]["content"])
                if answer is None:
                    time.sleep(1.5)  # past the client's timeout
                    return
                code, text = answer
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode() \
                    if code == 200 else b"{}"
                self.send_response(code)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def answer(self, prompt: str) -> tuple[int, str] | None:
        if self.mode == "fail":
            return [(500, ""), (200, "I cannot decide."), None][self.calls % 3]
        new = prompt.split("New memory: ")[1].split("\n")[0]
        subject = self.SUBJECT.search(new).group(1)  # type: ignore[union-attr]
        target = next((mid for mid, text in self.ID.findall(prompt) if f"Customer {subject}" in text), None)
        if target is None:  # other customers only: a different fact
            return 200, json.dumps({"action": "add", "id": None, "why": "another customer"})
        return 200, json.dumps({"action": "supersede", "id": target, "why": f"{subject} moved"})

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def llm_path(root: Path, clock: Clock, pairs: int) -> dict[str, Any]:
    """Scripted supersessions made, and memories kept with a failing server."""
    results: dict[str, Any] = {}
    for mode in ("script", "fail"):
        server = Scripted(mode)
        os.environ.update(MEMSITE_LLM_BASE_URL=server.url, MEMSITE_LLM_MODEL="scripted", MEMSITE_LLM_TIMEOUT="1")
        try:
            with MemoryStore(root, agent="judged", embedder="none", clock=clock) as store:
                before = len(store.list(category="profile"))
                olds = [store.remember(f"Customer {mode}{n:04d}x lives in Berlin and pays by card.", category="profile",
                                       dedupe=False) for n in range(pairs)]
                clock.now += timedelta(days=1)
                times, made = [], []
                for n in range(pairs):
                    start = time.perf_counter()
                    made.append(store.remember(f"Customer {mode}{n:04d}x lives in Paris and pays by card now.",
                                               category="profile"))
                    times.append((time.perf_counter() - start) * 1000)
                after = len(store.list(category="profile"))
        finally:
            server.stop()
        applied = sum(m.supersedes == old.id for old, m in zip(olds, made))
        results[mode] = {"asked": server.calls, "applied": applied, "written": after - before - pairs,  # the new ones
                         "p50": statistics.median(times), "p95": percentile(times, 95)}
    for name in ("MEMSITE_LLM_BASE_URL", "MEMSITE_LLM_MODEL", "MEMSITE_LLM_TIMEOUT"):
        os.environ.pop(name, None)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 memories, 400 supersessions")
    parser.add_argument("--dir", type=Path, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    count, chains = (2_000, 100) if args.quick else (10_000, 500)
    queries = 100 if args.quick else 300
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="memsite-supersede-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    items = plan(count, chains, seed=count)
    log(f"seeding {count:,} memories with {chains * 4:,} supersessions ...")
    changed, clock = seed(workdir / "changed", items, True, per_commit=count // 100)
    log(f"seeding the same {count:,} memories without them ...")
    plain, _ = seed(workdir / "plain", items, False, per_commit=count // 100)
    os.sync()

    corpus = Corpus(seed=7)
    asked = [corpus.query() for _ in range(queries)]
    rows = []
    log("recall, each query in one store then the other (the machine's load falls on both alike) ...")
    for store in (changed, plain):
        store.recall(asked[0])  # the catalog is warm in both
    pairs = [report.timed([lambda q=q: changed.recall(q), lambda q=q: plain.recall(q)]) for q in asked]
    for name, times in (("recall(), with supersessions", [a for a, _ in pairs]),
                        ("recall(), same store without them", [b for _, b in pairs])):
        rows.append((name, statistics.median(times), percentile(times, 95)))

    log("as of ...")
    rng = random.Random(3)
    dates = [(START + timedelta(days=rng.uniform(1, DAYS - 1))).strftime("%Y-%m-%dT%H:%M:%SZ") for _ in asked]
    one = (START + timedelta(days=DAYS / 2)).strftime("%Y-%m-%d")
    changed.recall(asked[0], as_of=one, record_time=True)  # the past catalog, made once from the catalog
    for name, calls in (
            ("recall(as_of=), valid time, dates spread", [lambda q=q, d=d: changed.recall(q, as_of=d)
                                                          for q, d in zip(asked, dates)]),
            ("recall(as_of=), record time, dates spread", [lambda q=q, d=d: changed.recall(q, as_of=d, record_time=True)
                                                           for q, d in list(zip(asked, dates))[:100]]),
            ("recall(as_of=), record time, one date", [lambda q=q: changed.recall(q, as_of=one, record_time=True)
                                                       for q in asked])):
        times = report.timed(calls)
        rows.append((name, statistics.median(times), percentile(times, 95)))

    log("remember ...")
    # (id, category) of memories still holding, as an agent has them from a recall's hits
    current = [(h.memory.id, h.memory.category) for h in changed.rank(limit=count)
               if h.memory.supersedes is None][:queries]
    texts = [corpus.text() for _ in current]
    times = report.timed([lambda t=t, mid=mid, category=category: changed.remember(t, category=category, supersedes=mid)
                          for t, (mid, category) in zip(texts, current)])
    rows.append(("remember(supersedes=ID)", statistics.median(times), percentile(times, 95)))
    times = report.timed([lambda t=t: plain.remember(t + " again", category="general") for t in texts])
    rows.append(("remember(), plain (same store without supersessions)", statistics.median(times),
                 percentile(times, 95)))
    others = [h.memory.id for h in plain.rank(limit=count)][:queries]
    times = report.timed([lambda t=t, mid=mid: plain.update(mid, content=t + " changed")
                          for t, mid in zip(texts, others)])
    rows.append(("update(id, content=), for comparison: it also changes a file already there",
                 statistics.median(times), percentile(times, 95)))
    changed.close()
    plain.close()

    runs = 1 if args.quick else 3
    log(f"site builds ({runs} of each, taken in turn: the disk is shared) ...")
    times_of: dict[str, list[tuple[float, float]]] = {"changed": [], "plain": []}
    for _ in range(runs):
        for name in times_of:
            times_of[name].append(build(workdir / name, home))
    wall = {name: statistics.median(w for w, _ in values) for name, values in times_of.items()}
    cpu = {name: statistics.median(c for _, c in values) for name, values in times_of.items()}

    log("the language-model path ...")
    pairs = 20 if args.quick else 100
    judged = llm_path(workdir / "changed", clock, pairs)

    print(f"Facts that change at {count:,} memories, {chains * 4:,} of them superseding another (chains of "
          f"5, {chains:,} chains), beside the same memories without supersessions; {len(asked)} queries, words "
          f"only; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}.\n")
    print("| measure | p50 ms | p95 ms |")
    print("|---|--:|--:|")
    for name, p50, p95 in rows:
        print(f"| {name} | {p50:.1f} | {p95:.1f} |")
    with_, without = rows[0][1], rows[1][1]
    print(f"\nRecall p50 with supersessions is {100 * (with_ / without - 1):+.0f} % of the store without them "
          "(target within 10 %).\n")
    print(f"| site build (median of {runs}) | wall s | CPU s |")
    print("|---|--:|--:|")
    print(f"| with supersessions | {wall['changed']:.1f} | {cpu['changed']:.1f} |")
    print(f"| same store without them | {wall['plain']:.1f} | {cpu['plain']:.1f} |")
    print(f"\nSite build with supersessions: CPU {100 * (cpu['changed'] / cpu['plain'] - 1):+.0f} %, wall "
          f"{100 * (wall['changed'] / wall['plain'] - 1):+.0f} % (target within 10 %).\n")
    script, fail = judged["script"], judged["fail"]
    print("| language-model path | remembers | model asked | supersessions made | memories written | "
          "remember p50 ms | p95 ms |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    print(f"| scripted server (supersede) | {pairs} | {script['asked']} | {script['applied']} | {script['written']} "
          f"| {script['p50']:.1f} | {script['p95']:.1f} |")
    print(f"| failing server (500, garbage, silence) | {pairs} | {fail['asked']} | {fail['applied']} | "
          f"{fail['written']} | {fail['p50']:.1f} | {fail['p95']:.1f} |")
    print(f"\nScripted supersessions applied: {script['applied']} of {pairs} (target all); memories lost with the "
          f"failing server: {pairs - fail['written']} (target 0).")
    report.publish("supersede", skip=args.quick)


if __name__ == "__main__":
    main()
