"""A build after a few writes keeps the memory pages that did not change; what it makes equals a clean build."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memsite import MemoryStore
from memsite.site import search
from tests.sites import ROOT, env

pytestmark = pytest.mark.slow  # real MkDocs builds

START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
SEARCH_FILES = (search.MAIN, search.DELTA)


def build(repo: Path, home: Path, *args: str, when: datetime) -> str:
    """``memsite build`` as a user runs it, at the time ``when`` (SOURCE_DATE_EPOCH); returns its stderr."""
    result = subprocess.run([sys.executable, "-m", "memsite", "-C", str(repo), "build", *args], cwd=ROOT,
                            env={**env(home), "SOURCE_DATE_EPOCH": str(int(when.timestamp()))},
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stderr


def pages(site: Path) -> dict[str, tuple[int, str]]:
    """Memory id -> (inode, digest) of its page."""
    return {p.parent.name: (p.stat().st_ino, hashlib.sha1(p.read_bytes()).hexdigest())
            for p in (site / "m").glob("*/index.html")}


def tree(site: Path) -> dict[str, str]:
    """Every file of the site but its search index (a build that kept an earlier one splits it in two)."""
    return {p.relative_to(site).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(site.rglob("*")) if p.is_file() and p.relative_to(site).parts[0] not in SEARCH_FILES}


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=7)
        return self.now


def test_a_build_after_a_few_writes_rewrites_only_their_pages_and_equals_a_clean_build(tmp_path: Path) -> None:
    repo, clock = tmp_path / "memory", Clock()
    with MemoryStore.init(repo, agent="planner", clock=clock) as store:
        ids = [store.remember(f"Fact {n}: the {word} service deploys from the {word} branch", category="cases",
                              dedupe=False).id for n, word in enumerate(["alpha", "beta", "gamma", "delta", "eps",
                                                                          "zeta", "eta", "theta"])]
    build(repo, tmp_path, when=START + timedelta(days=1))
    first = pages(repo / "site")
    assert set(first) == set(ids)

    # Nothing written, a week later: the pages hold no build-time score, so every one is kept as it was.
    build(repo, tmp_path, when=START + timedelta(days=8))
    assert pages(repo / "site") == first

    with MemoryStore(repo, agent="coder", clock=clock) as store:
        new = store.remember("The billing service deploys on Thursdays", category="events").id
        later = store.remember("The alpha service moved to the main branch", category="cases", dedupe=False).id
        store.supersede(ids[0], later)
        store.forget(ids[1], reason="wrong")
        store.recall("gamma service branch", limit=1)
        store.flush_activity()
    build(repo, tmp_path, when=START + timedelta(days=9))
    after = pages(repo / "site")
    changed = {mid for mid in after if after[mid] != first.get(mid)}
    recalled = {mid for mid in ids[2:] if after[mid] != first[mid]}
    assert changed == {new, later, ids[0]} | recalled and len(recalled) == 1  # the new ones, the chain, the recall
    assert ids[1] not in after  # forgotten: its page is gone
    for mid in set(after) - changed:  # the same file, not a copy written again
        assert after[mid][0] == first[mid][0], mid

    # Search kept the first build's index and indexed only the new and changed pages beside it.
    held = json.loads((repo / "site" / search.DELTA / search.PAGES).read_text())
    assert {url.split("/")[2] for url in held} == {new, later, ids[0]}  # (a recall changes no text)
    stale = json.loads((repo / "site" / search.DELTA / search.HOLDS).read_text())["stale"]
    assert {url.split("/")[2] for url in stale} == {ids[0], ids[1]}  # superseded since, forgotten

    # The same repository built clean: the same site, byte for byte, and a search finding the same.
    clean = tmp_path / "clean"
    # (without the sites swapped out, which a process of the last build is removing meanwhile, or kept)
    shutil.copytree(repo, clean, symlinks=True, ignore=shutil.ignore_patterns(".site.old-*", ".site.spare"))
    build(clean, tmp_path, "--clean", when=START + timedelta(days=9))
    assert tree(clean / "site") == tree(repo / "site")
    assert search.searchable(clean / "site") == search.searchable(repo / "site")
    assert all(after[mid][0] != p[0] for mid, p in pages(clean / "site").items())  # --clean wrote every page


def test_a_page_whose_history_or_settings_changed_is_written_again(tmp_path: Path) -> None:
    """What a page shows besides its memory (its history, the half-life it states) changes it too."""
    repo, clock = tmp_path / "memory", Clock()
    with MemoryStore.init(repo, agent="planner", clock=clock) as store:
        kept = store.remember("Staging uses the vega VPN", category="entities").id
        edited = store.remember("The cache is flushed nightly", category="entities").id
    build(repo, tmp_path, when=START + timedelta(days=1))
    first = pages(repo / "site")

    path = next((repo / "content" / "memories").rglob(f"*{edited[-6:].lower()}*.md"))
    path.write_text(path.read_text().replace("flushed nightly", "flushed hourly"))
    subprocess.run(["git", "commit", "-qam", "Flushed hourly now"], cwd=repo, env=env(tmp_path), check=True)
    build(repo, tmp_path, when=START + timedelta(days=2))
    second = pages(repo / "site")
    assert second[kept] == first[kept] and second[edited] != first[edited]
    assert "Flushed hourly now" in (repo / "site" / "m" / edited / "index.html").read_text()

    mkdocs = repo / "mkdocs.yml"
    mkdocs.write_text(mkdocs.read_text().replace("half_life_days: 30", "half_life_days: 45"))
    assert "half_life_days: 45" in mkdocs.read_text()
    build(repo, tmp_path, when=START + timedelta(days=3))
    third = pages(repo / "site")
    assert all(third[mid] != second[mid] for mid in third)
    assert "halving every 45 days" in (repo / "site" / "m" / kept / "index.html").read_text()


def test_a_memory_page_carries_no_chrome_it_does_not_need(tmp_path: Path) -> None:
    """The lean page: no navigation drawer, footer or inline icons; what it shares with every page resolves."""
    repo = tmp_path / "memory"
    with MemoryStore.init(repo, agent="planner") as store:
        memory = store.remember("Postgres locks the table during a migration", category="cases")
    build(repo, tmp_path, when=START + timedelta(days=1))
    page_path = repo / "site" / "m" / memory.id / "index.html"
    page = page_path.read_text()
    article = page[page.index('<nav class="memsite-crumbs"'):page.rindex("</article>")]
    shell = len(page.encode()) - len(article.encode())
    assert shell < 5_000, shell  # was 9,200 bytes of Material's chrome around every memory
    for absent in ("md-sidebar", "md-footer", "<path ", "md-tabs"):
        assert absent not in page, absent
    for present in ('class="md-search__input"', 'data-md-component="palette"', 'class="md-header'):
        assert present in page, present  # search and the light/dark switch, on every memory page
    shared = re.findall(r'(?:href|src)="(\.\./(?:icons|script)-[0-9a-f]{12}\.(?:svg|js))', page)
    assert len(set(shared)) >= 2
    for rel in shared:
        assert (page_path.parent / rel).resolve().is_file(), rel
    assert os.path.getsize(page_path) < 8_000


def test_a_big_site_made_with_a_process_beside_is_the_site_made_in_one(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Past memory_pages.PARALLEL memories, list pages and page keys are made by a forked process (generate.Beside):
    the site, list pages and memory pages alike, is the one a single process makes, and a later build keeps the
    pages either made."""
    from memsite.site import generate, memory_pages
    from memsite.site.build import build as build_in_process

    repo, clock = tmp_path / "memory", Clock()
    with MemoryStore.init(repo, agent="planner", clock=clock) as store, store.transaction("Many") as tx:
        for n in range(450):  # three pages of entities, and of its month
            tx.remember(f"Fact {n}: the service {n} listens on port {8000 + n}", category="entities", dedupe=False)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(int((START + timedelta(days=1)).timestamp())))
    alone = build_in_process(repo, tmp_path / "alone", clean=True)
    monkeypatch.setattr(memory_pages, "PARALLEL", 10)
    forked = []
    made = generate.Beside.__init__

    def beside_made(self: generate.Beside, site: object) -> None:
        made(self, site)  # type: ignore[arg-type]
        forked.append(self.process is not None)

    monkeypatch.setattr(generate.Beside, "__init__", beside_made)
    # (a build's process has one thread; this test's may keep idle ones of the tests before it)
    monkeypatch.setattr(generate.threading, "active_count", lambda: 1)
    beside = build_in_process(repo, tmp_path / "beside", clean=True)
    assert forked == [True]  # (a process of one thread: a build's)
    assert tree(beside) == tree(alone)
    assert (beside / "memories" / "entities" / "2026-11" / "page-3" / "index.html").is_file()
    first = pages(beside)
    build_in_process(repo, tmp_path / "beside")
    assert pages(beside) == first  # every memory page kept: the keys the process beside sent were the same
