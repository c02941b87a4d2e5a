"""Benchmark: a `remember` through the MCP server, beside the Python API and the CLI, at 10,000 memories.

    python bench/mcp_server.py            # 10,000 memories, 300 calls
    python bench/mcp_server.py --quick    # 2,000 memories, 100 calls

The MCP figure is the whole round trip an agent waits for: the SDK's client
(`ClientSession` over `stdio_client`) sends the call, the `memsite mcp`
subprocess writes the memory and commits it, and the reply with the commit id
comes back. (Not named bench/mcp.py: that would shadow the mcp package.)
Beside it, in the same repository: `store.remember()` in process
(no protocol) and `memsite remember` as a new process per call (what an agent
without MCP would run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import report
from corpus import Corpus
from recall import percentile, seed

from memsite import MemoryStore

ROOT = Path(__file__).resolve().parent.parent


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def mcp_round_trips(repo: Path, texts: list[str]) -> list[float]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "memsite", "mcp", "--repo", str(repo),
                                                                 "--agent", "bench-mcp"],
                                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    times = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for i, text in enumerate(texts):
            start = time.perf_counter()
            result = await session.call_tool("remember", {"content": text, "category": "events"})
            elapsed = (time.perf_counter() - start) * 1000
            failed = getattr(result, "is_error", getattr(result, "isError", None))  # mcp 2.x / 1.x
            assert not failed and json.loads(result.content[0].text)["commit"]  # type: ignore[union-attr]
            if i >= 10:  # the first calls warm the server's caches
                times.append(elapsed)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 memories, 100 calls")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / ".tmp",
                        help="where to create the repository (default: bench/.tmp)")
    args = parser.parse_args()
    size, calls, cli_calls = (2_000, 100, 10) if args.quick else (10_000, 300, 30)
    args.dir.mkdir(parents=True, exist_ok=True)
    corpus = Corpus(seed=size)
    with tempfile.TemporaryDirectory(prefix="memsite-mcp-", dir=args.dir) as tmp:
        repo = Path(tmp) / "memory"
        seed(repo, corpus, size).close()
        log(f"MCP: {calls} remember calls ...")
        over_mcp = asyncio.run(mcp_round_trips(repo, [corpus.text() for _ in range(calls + 10)]))
        log(f"Python API: {calls} remember calls ...")
        in_process = []
        with MemoryStore(repo, agent="bench-api") as store:
            for _ in range(calls):
                text = corpus.text()
                start = time.perf_counter()
                store.remember(text, category="events")
                in_process.append((time.perf_counter() - start) * 1000)
        log(f"CLI: {cli_calls} memsite remember processes ...")
        by_cli = []
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for _ in range(cli_calls):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "memsite", "-C", str(repo), "--agent", "bench-cli", "remember",
                            corpus.text(), "-c", "events"], check=True, capture_output=True, env=env)
            by_cli.append((time.perf_counter() - start) * 1000)

    target = 15.0
    p50 = statistics.median(over_mcp)
    from importlib import metadata

    print(f"\nmemsite MCP benchmark ({sys.platform}, Python {sys.version.split()[0]}, mcp {metadata.version('mcp')}): "
          f"remember at {size:,} memories, each a git commit\n")
    print("| how | p50 | p95 | target | met |")
    print("|---|---|---|---|---|")
    print(f"| MCP tool call round trip (SDK stdio client -> memsite mcp -> commit -> reply) | {p50:.1f} ms | "
          f"{percentile(over_mcp, 95):.1f} ms | <= {target:g} ms | {'yes' if p50 <= target else 'NO'} |")
    print(f"| Python API, in process | {statistics.median(in_process):.1f} ms | {percentile(in_process, 95):.1f} ms "
          "| | |")
    print(f"| CLI, a new process per call | {statistics.median(by_cli):.0f} ms | {percentile(by_cli, 95):.0f} ms | | |")
    if args.quick:
        print("\n(--quick: a small repository; the target applies to the full run)")
    report.publish("mcp-server", skip=args.quick)


if __name__ == "__main__":
    main()
