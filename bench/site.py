"""Benchmark: building the memory site, beside mkdocs-material building plain pages, in one run.

    python bench/site.py            # 1,000 and 10,000 memories
    python bench/site.py --large    # and 100,000
    python bench/site.py --quick    # 1,000 only, one run each
    python bench/site.py --screenshots shots/   # only: the demo's home and a memory page at 1280 and 375 px

For each size, a memory repository is seeded through the API (memories spread
over a year, some recalled) and `memsite build` runs in a fresh process; its
wall time and peak memory (max RSS) are measured, with the size of the search
index. Beside it, at 1,000 memories, mkdocs-material builds the same memories
as plain pages listed in the nav: what you get by pointing MkDocs at the
files. Medians of --runs builds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from corpus import Corpus

from memsite import MemoryStore

MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def seed(path: Path, corpus: Corpus, count: int) -> None:
    """``count`` memories created over a year, a few recalled, committed in batches."""
    end = datetime(2026, 11, 22, tzinfo=timezone.utc)
    clock = _Clock(end - timedelta(days=365))
    step = timedelta(days=365) / count
    log(f"seeding {count:,} memories ...")
    with MemoryStore.init(path, agent="bench", clock=clock) as store:
        for start in range(0, count, 5000):
            with store.transaction(f"Seed memories {start}-{min(count, start + 5000)}") as tx:
                for _ in range(start, min(count, start + 5000)):
                    tx.remember(corpus.text(), category=corpus.category(), tags=("bench",), dedupe=False)
                    clock.now += step
            log(f"  {min(count, start + 5000):,}")
        for _ in range(50):
            store.recall(corpus.query(), limit=5)
        store.flush_activity()


def measure(command: list[str], cwd: Path) -> tuple[float, float]:
    """(seconds, peak MB) of ``command`` run in its own process."""
    out = subprocess.run([sys.executable, "-c", MEASURE, *command], cwd=cwd, capture_output=True, text=True)
    seconds, kb, code = out.stdout.split()
    if code != "0":
        raise SystemExit(f"{' '.join(command)} failed in {cwd} (exit {code}): {out.stderr[-2000:]}")
    return float(seconds), int(kb) / 1024


def plain_project(repo: Path, out: Path) -> Path:
    """The same memories as plain mkdocs-material pages, all listed in the nav."""
    docs = out / "docs"
    docs.mkdir(parents=True)
    nav = []
    for n, path in enumerate(sorted((repo / "content" / "memories").rglob("*.md"))):
        text = path.read_text().split("---\n", 2)[2]
        (docs / f"m{n:06d}.md").write_text(f"# Memory {n}\n\n{text}")
        nav.append({f"Memory {n}": f"m{n:06d}.md"})
    (docs / "index.md").write_text("# Memories\n")
    config = {"site_name": "plain", "theme": {"name": "material", "font": False}, "plugins": ["search"],
              "nav": [{"Home": "index.md"}, *nav]}
    (out / "mkdocs.yml").write_text(json.dumps(config))  # JSON is YAML
    return out


def run(count: int, workdir: Path, runs: int, baseline: bool) -> list[dict[str, object]]:
    repo = workdir / f"repo-{count}"
    seed(repo, Corpus(), count)
    rows = []
    times, peaks = [], []
    for n in range(runs):
        site = workdir / f"site-{count}"
        shutil.rmtree(site, ignore_errors=True)
        log(f"memsite build, {count:,} memories, run {n + 1}/{runs} ...")
        seconds, peak = measure([sys.executable, "-m", "memsite", "-C", str(repo), "build", "--site-dir", str(site)],
                                repo)
        times.append(seconds)
        peaks.append(peak)
    index = (workdir / f"site-{count}" / "search" / "search_index.json").stat().st_size / 1e6
    pages = sum(1 for _ in (workdir / f"site-{count}").rglob("index.html"))
    rows.append({"what": "memsite build", "memories": count, "seconds": statistics.median(times),
                 "peak_mb": max(peaks), "index_mb": index, "pages": pages})
    if baseline:
        plain = plain_project(repo, workdir / f"plain-{count}")
        times, peaks = [], []
        for n in range(runs):
            shutil.rmtree(plain / "site", ignore_errors=True)
            log(f"plain mkdocs-material build, {count:,} pages in the nav, run {n + 1}/{runs} ...")
            seconds, peak = measure(["mkdocs", "build", "-q"], plain)
            times.append(seconds)
            peaks.append(peak)
        rows.append({"what": "mkdocs-material, plain pages in nav", "memories": count,
                     "seconds": statistics.median(times), "peak_mb": max(peaks),
                     "index_mb": (plain / "site" / "search" / "search_index.json").stat().st_size / 1e6,
                     "pages": count + 1})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--large", action="store_true", help="also 100,000 memories")
    parser.add_argument("--quick", action="store_true", help="1,000 memories, one run each")
    parser.add_argument("--runs", type=int, default=3, help="builds per measurement (median)")
    parser.add_argument("--dir", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--screenshots", type=Path, metavar="DIR",
                        help="build the demo and write screenshots of its pages into DIR instead")
    args = parser.parse_args()
    if args.screenshots:
        screenshots(args.screenshots, args.dir or Path(tempfile.mkdtemp(prefix="memsite-shots-")))
        return
    runs = 1 if args.quick else args.runs
    sizes = [1_000] if args.quick else [1_000, 10_000] + ([100_000] if args.large else [])
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="memsite-site-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for count in sizes:
        rows += run(count, workdir, runs if count <= 10_000 else 1, baseline=count == 1_000)
    print(f"\nSite build, median of {runs} run(s) (2 cores):\n")
    print(f"| {'build':<38} | {'memories':>9} | {'pages':>6} | {'seconds':>8} | {'peak MB':>8} | {'index MB':>8} |")
    print(f"|{'-' * 40}|{'-' * 11}:|{'-' * 7}:|{'-' * 9}:|{'-' * 9}:|{'-' * 9}:|")
    for r in rows:
        print(f"| {r['what']:<38} | {r['memories']:>9,} | {r['pages']:>6,} | {r['seconds']:>8.2f} | "
              f"{r['peak_mb']:>8.0f} | {r['index_mb']:>8.2f} |")
    memsite_1k = next(r for r in rows if r["memories"] == 1_000 and r["what"] == "memsite build")
    plain_1k = next((r for r in rows if r["what"].startswith("mkdocs-material")), None)
    if plain_1k:
        print(f"\nAt 1,000 memories memsite builds {plain_1k['seconds'] / memsite_1k['seconds']:.1f}x faster "
              "than the plain mkdocs-material site (target >= 5x).")
    for r in rows:
        if r["what"] == "memsite build" and r["memories"] >= 10_000:
            per = r["seconds"] / r["memories"] * 1000
            print(f"{r['memories']:,} memories: {r['seconds']:.1f} s ({per:.2f} ms a memory), "
                  f"peak {r['peak_mb']:.0f} MB, search index {r['index_mb']:.2f} MB")


def screenshots(out: Path, workdir: Path) -> None:
    """The demo's home page and one memory page at desktop and phone widths, as PNG files in ``out``.

    For a reviewer of the site to look at instead of read; uses the browser the
    tests use (Playwright driving Debian's chromium).
    """
    import functools
    import shutil as which
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from playwright.sync_api import sync_playwright

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    demo = workdir / "demo"
    if not (demo / "site").is_dir():
        subprocess.run([sys.executable, "-m", "memsite", "demo", str(demo)], check=True, stdout=subprocess.DEVNULL)
    with MemoryStore(demo, agent="reader") as store:
        memory = max(store.list(), key=lambda m: m.active_count)
    pages = {"home": "", "memory": f"memories/{memory.category}/{memory.created:%Y-%m}/#{memory.id}",
             "rankings": "rankings/"}
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(demo / "site")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=which.which("chromium"), args=["--no-sandbox"])
            for width in (1280, 375):
                page = browser.new_page(viewport={"width": width, "height": 900})
                for name, address in pages.items():
                    page.goto(f"http://127.0.0.1:{server.server_address[1]}/{address}")
                    page.wait_for_load_state("networkidle")
                    path = out / f"{name}-{width}.png"
                    page.screenshot(path=str(path), full_page=name != "memory")
                    print(path)
            browser.close()
    finally:
        server.shutdown()
        server.server_close()


class _Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


if __name__ == "__main__":
    main()
