"""Benchmark: building and reading the memory site, beside plain mkdocs-material, in one run.

    python bench/site.py            # 1,000 and 10,000 memories
    python bench/site.py --large    # and 100,000
    python bench/site.py --quick    # 1,000 only, one run each
    python bench/site.py --screenshots shots/   # only: screenshots of the demo's pages at 1280 and 375 px
    python bench/site.py --engines  # only: the demo and 10,000 memories built with each engine
    python bench/site.py --kills    # only: builds killed (kill -9) and interrupted (Ctrl-C) at eleven points
    python bench/site.py --dir D    # work in D: a repository seeded there before is reused, not seeded again

For each size, a memory repository is seeded through the API (every memory
written in one month, the one the build runs in, some recalled) and `memsite
build` runs in a fresh process; its wall time and peak memory (max RSS) are
measured, with the largest HTML page. Then a headless Chromium (Debian's, via
Playwright) reads the built site over HTTP: for each query, a fresh browser
context opens the home page, types the query into the header search box and
waits for the first result; the time from the last key to it and every byte
the browser fetched for search (the index pieces and fragments, and loading
the search code) are recorded; and memory pages are opened (load event).
Beside it, at 1,000 memories, mkdocs-material builds the same memories as
plain pages listed in the nav (what pointing MkDocs at the files gives), and
its own search is measured the same way. Then 1 and 100 memories are written
and the site built again, keeping the memory pages that did not change, beside
``memsite build --clean`` after as many (every page written again): build
time and how many memory pages were rewritten (no longer the same file).
Medians throughout.

``--engines`` builds the demo and 10,000 memories whole (``--clean``) with MkDocs, ProperDocs and
Zensical (``memsite build --engine``): wall time (median and p95), pages,
largest page and site size each. ``--kills`` stops a build of 1,000 memories
with SIGKILL and with SIGINT at each of eleven points (``tests/site_build_process``)
while a reader fetches pages of the served site in a loop: the site left must
be exactly the previous build or the new one, and every fetch must succeed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import report
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
    """``count`` memories created in one month (the current one, up to now), a few recalled, in batches."""
    end = datetime.now(UTC).replace(microsecond=0)
    start = end.replace(day=1, hour=0, minute=0, second=0)
    clock = _Clock(start)
    step = (end - start) / count
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
    shutil.rmtree(out, ignore_errors=True)  # (one an earlier run in the same --dir made)
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


def run(count: int, workdir: Path, runs: int, baseline: bool, kept_runs: int | None = None) -> list[dict[str, object]]:
    """The rows of one size: ``runs`` full builds; ``kept_runs`` (default ``runs``) of each build after new memories
    that keeps the unchanged pages (the first of them follows a build that had no site before it, and so no spare
    to start from: see memsite/site/output.py)."""
    repo = workdir / f"repo-{count}"
    if (repo / "mkdocs.yml").is_file():  # seeded by an earlier run in the same --dir (plus what its builds added)
        log(f"reusing {repo} (seeded before)")
    else:
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
    site = workdir / f"site-{count}"
    pages, largest, total = html_sizes(site)
    with MemoryStore(repo, agent="reader") as store:
        memories = store.list()
    picked = [memories[n * len(memories) // 5] for n in range(5)]
    queries = [corpus_word(picked[0]), corpus_word(picked[1]), picked[2].id, picked[3].id[:10].lower(),
               f"{corpus_word(picked[4])} {corpus_word(picked[4], 1)}"]
    log(f"reading the site in Chromium: {len(queries)} queries, {len(picked)} memory pages ...")
    seen = browse(site, queries, [f"m/{m.id}/" for m in picked])
    # (memories: as built; a repository reused from an earlier run in the same --dir holds what its builds added)
    rows.append({"what": "memsite build", "size": count, "memories": len(memories), "seconds": statistics.median(times),
                 "p95": _p95(times), "peak_mb": max(peaks), "pages": pages, "largest_kb": largest / 1e3,
                 "site_mb": total / 1e6, "memory_kb": dir_size(site / "m") / 1e3 / len(memories),
                 "index_mb": dir_size(site / "pagefind") / 1e6, **seen})
    rows[-1]["incremental"] = incremental(repo, site, runs, runs if kept_runs is None else kept_runs)
    if baseline:
        plain = plain_project(repo, workdir / f"plain-{count}")
        times, peaks = [], []
        for n in range(runs):
            shutil.rmtree(plain / "site", ignore_errors=True)
            log(f"plain mkdocs-material build, {count:,} pages in the nav, run {n + 1}/{runs} ...")
            seconds, peak = measure(["mkdocs", "build", "-q"], plain)
            times.append(seconds)
            peaks.append(peak)
        pages, largest, total = html_sizes(plain / "site")
        log("reading the plain site in Chromium (Material's own search) ...")
        seen = browse(plain / "site", queries, [f"m{n:06d}/" for n in (0, 200, 400, 600, 800)])
        rows.append({"what": "mkdocs-material, plain pages in nav", "size": count, "memories": len(memories),
                     "seconds": statistics.median(times), "p95": _p95(times), "peak_mb": max(peaks),
                     "memory_kb": sum(dir_size(p) for p in (plain / "site").glob("m[0-9]*")) / 1e3 / len(memories),
                     "index_mb": (plain / "site" / "search" / "search_index.json").stat().st_size / 1e6,
                     "pages": pages, "largest_kb": largest / 1e3, "site_mb": total / 1e6, **seen})
    return rows


def incremental(repo: Path, site: Path, runs: int, kept_runs: int) -> list[dict[str, object]]:
    """Builds after 1 and after 100 new memories, keeping the unchanged pages, beside ``--clean`` after as many.

    Each run writes its new memories, then builds; the site it replaces is
    the last one built. Pages rewritten: memory pages that are a file neither
    the served site nor the spare beside it (the site before it, which a build
    starts from) had before the build.
    """
    def page_files() -> set[int]:
        return {p.stat().st_ino for folder in (site, site.parent / f".{site.name}.spare")
                for p in (folder / "m").glob("*/index.html")}

    corpus, rows = Corpus(), []
    for added in (1, 100):
        for mode in ("kept", "clean"):
            times, rewritten = [], []
            total = kept_runs if mode == "kept" else runs
            for n in range(total):
                with MemoryStore(repo, agent="bench") as store, store.transaction(f"Add {added}") as tx:
                    for _ in range(added):
                        tx.remember(corpus.text(), category=corpus.category(), tags=("bench",), dedupe=False)
                before = page_files()
                log(f"memsite build{' --clean' if mode == 'clean' else ''} after {added} new, run {n + 1}/{total} ...")
                seconds, _ = measure([sys.executable, "-m", "memsite", "-C", str(repo), "build", "--site-dir",
                                      str(site), *(["--clean"] if mode == "clean" else [])], repo)
                times.append(seconds)
                after = [p.stat().st_ino for p in (site / "m").glob("*/index.html")]
                rewritten.append(sum(ino not in before for ino in after))
            rows.append({"added": added, "mode": mode, "p50": statistics.median(times), "p95": _p95(times),
                         "rewritten": statistics.median(rewritten), "pages": len(after), "runs": total})
    return rows


def corpus_word(memory: Any, n: int = 0) -> str:
    """A word of the memory's text that is not a stopword: what a person would search it by."""
    from memsite.foundation.text import STOPWORDS

    words = [w.strip(".,;:") for w in memory.content.split() if len(w) > 3 and w.lower() not in STOPWORDS]
    return words[min(n, len(words) - 1)].lower()


def html_sizes(site: Path) -> tuple[int, int, int]:
    """(HTML pages, bytes of the largest, bytes of the whole site)."""
    pages = largest = total = 0
    for folder, _, names in os.walk(site):
        for name in names:
            size = os.stat(os.path.join(folder, name)).st_size
            total += size
            if name.endswith(".html"):
                pages += 1
                largest = max(largest, size)
    return pages, largest, total


def dir_size(folder: Path) -> int:
    return sum(os.stat(os.path.join(f, n)).st_size for f, _, names in os.walk(folder) for n in names)


def browse(site: Path, queries: list[str], pages: list[str]) -> dict[str, float]:
    """Search and open pages of ``site`` in Chromium: medians of ms to first result, KB fetched, ms to open."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from playwright.sync_api import sync_playwright

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    server.handle_error = lambda *args: None  # a page closed while a file was still being sent
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    waits, fetched, opens, found, hosts = [], [], [], 0, set()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
            for words in queries:
                context = browser.new_context()  # a cold cache: everything the query needs is fetched
                page = context.new_page()
                sizes: dict[str, int] = {}
                page.on("requestfinished",
                        lambda r, sizes=sizes: sizes.__setitem__(r.url, r.sizes()["responseBodySize"]))
                page.on("request", lambda r: hosts.add(r.url.split("/")[2]))
                page.goto(url)
                page.wait_for_load_state("networkidle")  # Material's search worker set up (and Pagefind's)
                open_search(page)
                meta = page.locator(".md-search-result__meta")  # 'Initializing search' until the worker is ready
                page.wait_for_function("el => !/initializ/i.test(el.textContent)", arg=meta.element_handle(),
                                       timeout=120_000)
                box = page.locator("input.md-search__input")
                box.fill(words)
                start = time.perf_counter()
                box.press("End")  # the key Material reads the query on
                try:
                    page.locator(".md-search-result__item").first.wait_for(timeout=60_000)
                    waits.append((time.perf_counter() - start) * 1000)
                    found += 1
                except Exception:  # no result: reported as a miss, not as a time
                    log(f"  no result for {words!r} within 60 s")
                page.wait_for_load_state("networkidle")
                fetched.append(sum(n for u, n in sizes.items() if "/pagefind/" in u or "search" in u) / 1e3)
                context.close()
            context = browser.new_context()
            page = context.new_page()
            for address in pages:
                page.goto(url + address)
                opens.append(page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd"))
            context.close()
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return {"search_ms": statistics.median(waits) if waits else float("nan"), "found": found,
            "queries": len(queries), "search_kb": statistics.median(fetched), "open_ms": statistics.median(opens),
            "other_hosts": len(hosts - {f"127.0.0.1:{server.server_address[1]}"})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--large", action="store_true", help="also 100,000 memories")
    parser.add_argument("--quick", action="store_true", help="1,000 memories, one run each")
    parser.add_argument("--runs", type=int, default=3, help="builds per measurement (median)")
    parser.add_argument("--dir", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--engines", action="store_true", help="only: the demo and 10,000 memories on each engine")
    parser.add_argument("--kills", action="store_true", help="only: builds stopped at eleven points, the site served")
    parser.add_argument("--screenshots", type=Path, metavar="DIR",
                        help="build the demo and write screenshots of its pages into DIR instead")
    args = parser.parse_args()
    if args.screenshots:
        screenshots(args.screenshots, args.dir or Path(tempfile.mkdtemp(prefix="memsite-shots-")))
        return
    if args.engines or args.kills:
        workdir = args.dir or Path(tempfile.mkdtemp(prefix="memsite-site-bench-"))
        workdir.mkdir(parents=True, exist_ok=True)
        if args.engines:
            engines(workdir, 1 if args.quick else args.runs)
        if args.kills:
            kills(workdir, 200 if args.quick else 1_000)
        report.publish("site-engines" if args.engines else "site-kills",
                       skip=args.quick or (args.engines and args.kills))
        return
    runs = 1 if args.quick else args.runs
    sizes = [1_000] if args.quick else [1_000, 10_000] + ([100_000] if args.large else [])
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="memsite-site-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for count in sizes:
        # At 100,000 a full build takes minutes: one of each, but the builds that keep unchanged pages as many
        # as elsewhere (the first of them is the slow case of a site built with no spare: its p95)
        rows += run(count, workdir, runs if count <= 10_000 else 1, baseline=count == 1_000, kept_runs=runs)
    print(f"\nSite build (median of {runs} run(s), {os.cpu_count()} cores) and reading it in Chromium (medians), "
          f"load {os.getloadavg()[0]:.1f}:\n")
    print("| build | memories | build s p50 | build s p95 | peak MB | HTML pages | largest page KB | site MB "
          "| KB per memory page | search index MB | first result ms | KB fetched per query | found "
          "| memory page opens ms | other hosts |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        print(f"| {r['what']} | {r['memories']:,} | {r['seconds']:.1f} | {r['p95']:.1f} | {r['peak_mb']:.0f} | "
              f"{r['pages']:,} | {r['largest_kb']:.0f} | {r['site_mb']:.0f} | {r['memory_kb']:.1f} | "
              f"{r['index_mb']:.1f} | {r['search_ms']:.0f} | {r['search_kb']:.0f} | {r['found']}/{r['queries']} | "
              f"{r['open_ms']:.0f} | {r['other_hosts']} |")
    print("\nA build after new memories (median and p95 of the runs; baseline: --clean, every memory page written "
          "again):\n")
    print("| memories | new memories | build | runs | build s p50 | build s p95 | memory pages rewritten |")
    print("|--:|--:|---|--:|--:|--:|--:|")
    for r in rows:
        for i in r.get("incremental", []):
            print(f"| {i['pages']:,} | {i['added']} | {'unchanged pages kept' if i['mode'] == 'kept' else '--clean'} "
                  f"| {i['runs']} | {i['p50']:.1f} | {i['p95']:.1f} | {i['rewritten']:,.0f} |")
    memsite_1k = next(r for r in rows if r["size"] == 1_000 and r["what"] == "memsite build")
    plain_1k = next((r for r in rows if r["what"].startswith("mkdocs-material")), None)
    if plain_1k:
        print(f"\nAt {memsite_1k['memories']:,} memories memsite builds "
              f"{plain_1k['seconds'] / memsite_1k['seconds']:.1f}x faster than the plain mkdocs-material site "
              "(target >= 5x).")
    print("Targets at 100,000: site <= 1 GB, build <= 180 s, after 1 new memory <= 15 s and after 100 <= 30 s, "
          "first result <= 1,000 ms (<= 300 ms at 10,000), <= 1,000 KB fetched per query, no page over 1,000 KB, "
          "a memory page opens in <= 1,000 ms; no other host.")
    report.publish("site", skip=args.quick)


ENGINES = ("mkdocs", "properdocs", "zensical")


def engines(workdir: Path, runs: int) -> None:
    """The demo and 10,000 memories built whole (``--clean``) with each engine: build seconds (median, p95), pages,
    sizes."""
    demo = workdir / "demo"
    if not demo.is_dir():
        subprocess.run([sys.executable, "-m", "memsite", "demo", str(demo)], check=True, capture_output=True)
    big = workdir / "repo-10000"
    if not big.is_dir():
        seed(big, Corpus(), 10_000)
    rows = []
    for name, repo in (("demo", demo), ("10,000 memories", big)):
        for engine in ENGINES:
            times = []
            for n in range(runs):
                log(f"{name}: memsite build --clean --engine {engine}, run {n + 1}/{runs} ...")
                site = workdir / f"site-{engine}"
                seconds, _ = measure([sys.executable, "-m", "memsite", "-C", str(repo), "build", "--clean", "--engine",
                                      engine, "--site-dir", str(site)], repo)
                times.append(seconds)
            pages, largest, total = html_sizes(site)
            rows.append((name, engine, times, pages, largest, total))
    print(f"\nSite build per engine, whole (--clean; median and p95 of {runs} run(s), {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}):\n")
    print("| site | engine | build s p50 | build s p95 | HTML pages | largest page KB | site MB |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for name, engine, times, pages, largest, total in rows:
        print(f"| {name} | {engine} | {statistics.median(times):.1f} | {_p95(times):.1f} | {pages:,} | "
              f"{largest / 1e3:.0f} | {total / 1e6:.1f} |")


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def kills(workdir: Path, count: int) -> None:
    """Stop builds at each point with SIGKILL and SIGINT while the site is read; the site must stay whole."""
    import functools
    import hashlib
    import threading
    import urllib.request
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.site_build_process import KILL_POINTS

    def tree(site: Path) -> dict[str, str]:
        return {p.relative_to(site).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest()
                for p in sorted(site.rglob("*")) if p.is_file() and p.name != ".memsite-build.json"}

    repo = workdir / f"kills-{count}"
    if not repo.is_dir():
        seed(repo, Corpus(), count)
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1767225600"}
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "memsite", "-C", str(repo), "build"], check=True, capture_output=True,
                   env=env)
    old = tree(repo / "site")

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    # The server serves site/ by its path, as a web server does: each request finds whatever is there then.
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(repo / "site")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    memory = next(iter(p for p in old if p.startswith("m/")))
    addresses = ["", "rankings/", memory.removesuffix("index.html"), "pagefind/pagefind-entry.json"]
    results = []
    for point in KILL_POINTS:
        for how in ("kill", "int"):
            fetched, failed, stop = [0], [], threading.Event()

            def read(stop: threading.Event = stop, fetched: list[int] = fetched, failed: list[str] = failed) -> None:
                while not stop.is_set():
                    for address in addresses:
                        try:
                            with urllib.request.urlopen(base + address, timeout=10) as response:
                                response.read()
                            fetched[0] += 1
                        except Exception as exc:  # any failure a reader would see
                            failed.append(f"{address}: {exc}")

            # New pages for the stopped build to write: three, so that it can stop between them.
            with MemoryStore(repo, agent="bench") as store:
                written = [store.remember(f"Round {point} {how} {n}: {Corpus().text()}", category="cases",
                                          dedupe=False).id for n in range(3)]
            added = written[0]
            reader = threading.Thread(target=read)
            reader.start()
            start = time.perf_counter()
            stopped = subprocess.run([sys.executable, "-m", "tests.site_build_process", str(repo), point, how],
                                     cwd=root, env=env, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            stop.set()
            reader.join()
            now = tree(repo / "site")
            # old: exactly the previous build; new (only once swapped): every page of it, the new memory's page and
            # a search index (its files, the main index's and the delta's, are named by their content: they change
            # with any page)
            searched = ("pagefind/", "pagefind-delta/")
            pages_of = {p for p in old if not p.startswith(searched)} | {f"m/{added}/index.html",
                                                                        "pagefind/pagefind-entry.json"}
            new = point == "swapped" and pages_of <= set(now)
            state = "old" if now == old else "new" if new else "MIXED"
            if state == "MIXED":  # what a reader would find wrong: missing or changed files
                log(f"  missing: {sorted(set(pages_of if point == 'swapped' else old) - set(now))[:10]}; changed: "
                    f"{sorted(p for p in set(old) & set(now) if old[p] != now[p])[:10]}")
            results.append((point, how, stopped.returncode, state, fetched[0], len(failed), seconds))
            log(f"{point} {how}: exit {stopped.returncode}, site {state}, {fetched[0]} fetches, {len(failed)} failed")
            old = now  # (after 'swapped' the new site is the one to keep whole)
    server.shutdown()
    server.server_close()
    whole = sum(r[3] != "MIXED" for r in results)
    print(f"\nBuilds of {count:,} memories stopped at {len(KILL_POINTS)} points, SIGKILL and SIGINT (Ctrl-C), "
          f"while a reader fetched 4 pages of the served site in a loop ({os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}):\n")
    print("| point | signal | exit | site after | fetches | failed fetches | seconds |")
    print("|---|---|--:|---|--:|--:|--:|")
    for point, how, code, state, fetched_n, failed_n, seconds in results:
        print(f"| {point} | {'SIGKILL' if how == 'kill' else 'SIGINT'} | {code} | {state} | {fetched_n} | "
              f"{failed_n} | {seconds:.1f} |")
    print(f"\nThe served site was whole after {whole} of {len(results)} stopped builds "
          f"and {sum(r[5] for r in results)} of {sum(r[4] + r[5] for r in results)} fetches failed.")


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
        profile = next(m for m in store.list() if m.category == "profile")
    week = sorted(p.name for p in (demo / "site" / "weeks").iterdir() if p.is_dir())[-1]
    day = sorted(p.name for p in (demo / "site" / "days").iterdir() if p.is_dir())[-1]
    pages = {"home": "", "memory": f"m/{memory.id}/", "rankings": "rankings/", "world": "world/",
             "month": f"memories/{profile.category}/{profile.created:%Y-%m}/", "week": f"weeks/{week}/",
             "day": f"days/{day}/", "search": ""}
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
                    if name == "search":
                        open_search(page)
                        page.locator("input.md-search__input").press_sequentially("invoice", delay=30)
                        page.locator(".md-search-result__item").first.wait_for(timeout=15_000)
                    path = out / f"{name}-{width}.png"
                    page.screenshot(path=str(path), full_page=name not in ("memory", "search"))
                    print(path)
            browser.close()
    finally:
        server.shutdown()
        server.server_close()


def open_search(page: Any) -> None:
    """Open the search box as a person does: the header icon on a phone, the box itself on a desktop."""
    toggle = page.locator('label.md-header__button[for="__search"]')
    if toggle.is_visible():
        toggle.click()
    else:
        page.locator("label.md-search__icon, .md-search__input").first.click()


class _Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


if __name__ == "__main__":
    main()
