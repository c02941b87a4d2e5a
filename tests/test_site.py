"""The memory website: the demo's every contract URL, safety, errors, pagination, projection."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from memsite import MemoryStore
from memsite.foundation.fileformat import format_memory
from memsite.foundation.record import short_id
from memsite.site.lists import PER_PAGE
from tests.conftest import git
from tests.sites import HOSTILE, ROOT, env, hostile_repository, memsite

pytestmark = pytest.mark.slow  # real MkDocs builds


def page(site: Path, url: str) -> str:
    path = site / url.strip("/") / "index.html"
    assert path.is_file(), f"no page at /{url.strip('/')}/"
    return path.read_text()


def memories(repo: Path) -> list:
    with MemoryStore(repo, agent="reader") as store:
        return store.list()


def test_every_contract_url_of_the_demo_exists_with_its_content(demo: Path) -> None:
    site = demo / "site"
    every = memories(demo)
    categories = {m.category for m in every}
    assert categories == {"profile", "preferences", "entities", "events", "cases", "patterns", "general"}

    home = page(site, "/")
    for section in ("This week", "What was learned", "World state", "Forgotten or trimmed", "Who did what",
                    "Open tasks", "Memories by category", "Memories over time", "Top-ranked memories",
                    "Recent sessions"):
        assert f">{section}<" in home, section
    assert "<svg" in home

    for m in every:  # each memory at /m/<id>/, linked from its category's list and its month's
        article = page(site, f"/m/{m.id}/")
        assert f'<h1 id="{m.id}"' in article and html.escape(m.abstract) in article
        for part in ("Score", "decay", "boost", "Source", "Tags", "Created", "Agent", "History ("):
            assert part in article, part
        assert all(t in article for t in m.tags)
        listing = page(site, f"/memories/{m.category}/")
        assert f'id="{m.id}"' in listing and f'href="../../m/{m.id}/"' in listing
        month = page(site, f"/memories/{m.category}/{m.created:%Y-%m}/")
        assert f'href="../../../m/{m.id}/"' in month
    assert {p.name for p in (site / "m").iterdir() if p.is_dir()} == {m.id for m in every}  # no other page there
    shared = {p.name for p in (site / "m").iterdir() if p.is_file()}  # the icons and scripts every page names
    assert shared and all(re.fullmatch(r"(icons-[0-9a-f]{12}\.svg|script-[0-9a-f]{12}\.js)", n) for n in shared)

    rankings = page(site, "/rankings/")
    assert "half-life of 30 days" in rankings and "ln(1 + recalls)" in rankings and "Fading" in rankings

    weeks = re.findall(r'href="(\d{4}-W\d{2})/"', page(site, "/weeks/"))
    assert len(weeks) >= 5 and "What was learned" in page(site, f"/weeks/{weeks[0]}/")
    days = re.findall(r'href="(\d{4}-\d{2}-\d{2})/"', page(site, "/days/"))
    assert len(days) >= 10
    assert any("created" in page(site, f"/days/{d}/") and "Who did what" in page(site, f"/days/{d}/") for d in days)
    for old in ("summaries", "reports"):  # one set of day pages; the addresses they had lead there
        moved = page(site, f"/{old}/{days[0]}/")
        assert f'url=../../days/{days[0]}/"' in moved and "memsite-entry" not in moved

    skills = page(site, "/skills/")
    assert "releasing-a-service-to-production" in skills and "confidence" in skills
    assert "Tag the commit with the version" in skills

    assert "ci.status" in page(site, "/world/")
    sessions = page(site, "/sessions/")
    names = [p.stem for p in (demo / "content" / "sessions").glob("*.md")]
    assert len(names) >= 10
    for name in names:
        assert f'href="{name}/"' in sessions
        assert "Problem" in page(site, f"/sessions/{name}/")

    agents = page(site, "/agents/")
    for agent in ("planner", "coder", "reviewer"):
        assert f'href="{agent}/"' in agents
        assert "Recent memories" in page(site, f"/agents/{agent}/")


def test_the_home_page_names_what_was_forgotten_not_its_id(tmp_path: Path) -> None:
    """Regression: 'Latest changes' showed raw 26-character ids ('01M8… (no longer in memory)')."""
    repo = tmp_path / "memory"
    with MemoryStore.init(repo, agent="planner") as store:
        gone = store.remember("The user works in Berlin, UTC+1", category="profile")
        store.forget(gone.id, reason="moved to the Lisbon office")
        with store.task(type="debug", keywords=["vpn"]) as task:
            task.problem("staging unreachable")
            task.solution("connect the VPN first")
            task.learn("staging needs the vega VPN")
    memsite("-C", str(repo), "build", home=tmp_path)
    home = page(repo / "site", "/")
    assert gone.id not in re.sub(r'title="[^"]*"', "", home)
    assert '<span class="memsite-gone">The user works in Berlin, UTC+1</span>' in home
    this_week = home[home.index(">This week<"):home.index(">At a glance<")]
    assert "moved to the Lisbon office" in this_week  # what was forgotten, and why
    learned = next(m for m in memories(repo) if m.content == "staging needs the vega VPN")
    assert f'href="m/{learned.id}/"' in this_week  # the task learning, a memory of its own


def test_the_site_counts_recalls_not_committed_yet(tmp_path: Path) -> None:
    """Regression: the site said 'recalled 0x' while `memsite show` said 'recalled: 3' until a flush."""
    repo = tmp_path / "memory"
    with MemoryStore.init(repo, agent="planner") as store:
        m = store.remember("Deploys go out on Tuesdays", category="events")
        for _ in range(3):
            store.recall("when do deploys go out")
    assert "recalled:  3" in memsite("-C", str(repo), "show", m.id, home=tmp_path).stdout
    memsite("-C", str(repo), "build", home=tmp_path)
    assert "3 times" in page(repo / "site", f"/m/{m.id}/")
    assert git(repo, "status", "--porcelain") == ""  # read, not flushed: the build commits nothing


def test_the_demo_has_a_real_history_with_trims_merges_and_sessions(demo: Path) -> None:
    log = git(demo, "log", "--format=%an|%s")
    authors = {line.split("|")[0] for line in log.splitlines()}
    assert {"planner", "coder", "reviewer"} <= authors
    assert "Action: trimmed" in git(demo, "log", "--format=%B")
    assert "Merge into entities" in log and "Forget profile" in log
    assert git(demo, "status", "--porcelain") == ""  # the build wrote nothing into the repository


def test_source_files_are_not_published_raw(demo: Path) -> None:
    site = demo / "site"
    assert not (site / "notes").exists() and not (site / "world_state").exists()
    memories = demo / "content" / "memories"
    sources = list(memories.glob("*/*/*/*.md"))
    assert sources and not list(memories.glob("*/*.md")) and not list(memories.glob("*/*/*.md"))  # numbered only
    for source in sources:  # no raw page per memory file
        assert not (site / "memories" / source.relative_to(memories).with_suffix("")).exists()
    assert (site / "assets" / "memsite.css").is_file()


def test_mkdocs_build_strict_passes_on_the_demo(demo: Path, tmp_path: Path) -> None:
    result = subprocess.run(["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "out")], cwd=demo,
                            capture_output=True, text=True, env=env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "rankings" / "index.html").is_file()


def test_the_site_asks_no_other_host(demo: Path) -> None:
    for path in (demo / "site").rglob("*.html"):
        html = path.read_text()
        external = re.findall(r'<(?:script|link|img|iframe)\b[^>]*(?:src|href)="(?:https?:)?//[^"]*"', html)
        assert external == [], f"{path}: {external}"
        assert "fonts.googleapis.com" not in html


def test_hostile_memories_are_inert_in_the_html(tmp_path: Path) -> None:
    repo = tmp_path / "hostile"
    ids = hostile_repository(repo, tmp_path)
    site = repo / "site"
    for path in site.rglob("*.html"):
        html = path.read_text()
        assert "window.__pwned" not in re.sub(r"&[a-z#0-9]+;", "", _live_markup(html)), path
        assert "javascript:" not in html.lower().replace("javascript:'", ""), path
    listing = page(site, "/memories/general/")
    assert "&lt;script&gt;window.__pwned=&#x27;abstract&#x27;&lt;/script&gt;Deploy notes" in listing
    assert all(f'id="{i}"' in listing for i in ids)
    assert len(HOSTILE) + 1 == len(ids)


def _live_markup(html: str) -> str:
    """The tags and attributes of ``html`` (text between tags dropped): where live markup would be."""
    return " ".join(re.findall(r"<[^>]*>", html))


def test_a_malformed_memory_is_named_and_fails_a_strict_build(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    with MemoryStore.init(repo, agent="planner") as store:
        m = store.remember("Deploys on Tuesdays", category="events")
    text = m.path.read_text().replace("active_count: 0", "active_count: lots")
    m.path.write_text(text)
    rel = m.path.relative_to(repo).as_posix()
    lenient = memsite("-C", str(repo), "build", home=tmp_path)
    assert rel in lenient.stderr and "active_count" in lenient.stderr  # one warning naming it
    result = memsite("-C", str(repo), "build", "--strict", home=tmp_path, check=False)
    assert result.returncode == 1
    assert rel in result.stderr and "active_count" in result.stderr
    assert "Traceback" not in result.stderr


def test_large_categories_are_paginated_and_every_memory_keeps_its_anchor(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    count = PER_PAGE * 2 + 7
    with MemoryStore.init(repo, agent="planner") as store, store.transaction("Many") as tx:
        ids = [tx.remember(f"Fact number {n}: the service {n} listens on port {8000 + n}", category="entities",
                           dedupe=False).id for n in range(count)]
    memsite("-C", str(repo), "build", home=tmp_path)
    site = repo / "site"
    pages = [page(site, "/memories/entities/"), page(site, "/memories/entities/page-2/"),
             page(site, "/memories/entities/page-3/")]
    assert not (site / "memories" / "entities" / "page-4").exists()
    listed = [re.findall(r'<h3 id="([0-9A-Z]+)"', p) for p in pages]
    assert [len(x) for x in listed] == [PER_PAGE, PER_PAGE, 7]
    assert sorted(id for page in listed for id in page) == sorted(ids)
    assert 'href="../page-3/"' in pages[1]
    # The later pages are put into one page the generator rendered: titled, with the site's nav, no token left.
    assert "<title>entities (page 2 of 3) - " in pages[1] and 'class="md-nav' in pages[1]
    assert not [p for p in site.rglob("*") if "ZZMEMSITE" in p.name or (p.suffix in (".html", ".xml")
                                                                      and "ZZMEMSITE" in p.read_text())]


def test_project_writes_summaries_and_categories_for_indexers(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "qmd"
    memsite("-C", str(demo), "project", "--out", str(out), "--by-category", home=tmp_path)
    categories = sorted(p.stem for p in (out / "by-category").glob("*.md"))
    assert categories == sorted(["profile", "preferences", "entities", "events", "cases", "patterns", "general"])
    cases = (out / "by-category" / "cases.md").read_text()
    assert "**Abstract**:" in cases and "**Overview**:" in cases
    summaries = sorted((out / "summaries").glob("*.md"))
    assert summaries and "- New the day before: " in summaries[-1].read_text()

    bare = tmp_path / "bare"
    memsite("-C", str(demo), "project", "--out", str(bare), "--no-l1", home=tmp_path)
    assert not (bare / "by-category").exists()
    assert sorted(p.name for p in (bare / "summaries").glob("*.md")) == [p.name for p in summaries]


def test_a_past_days_summary_counts_what_existed_that_day(tmp_path: Path) -> None:
    """Regression: a forgotten memory vanished from the totals of the days it existed on."""
    from tests.conftest import Clock

    clock = Clock()
    with MemoryStore.init(tmp_path / "memory", agent="planner", clock=clock) as store:
        gone = store.remember("The deploy target is the vega cluster", category="entities")
        store.remember("Releases ship on Tuesdays", category="events")
        first = clock.now.date()
        clock.advance(days=2)
        store.forget(gone.id, reason="moved to the prod cluster")
        last = clock.now.date()
        root = store.root
    out = tmp_path / "out"
    memsite("-C", str(root), "project", "--out", str(out), home=tmp_path)
    then = (out / "summaries" / f"{first}.md").read_text()
    assert "- Memories: 2" in then and "- entities: 1" in then and "- events: 1" in then
    now = (out / "summaries" / f"{last}.md").read_text()
    assert "- Memories: 1" in now and "- entities: 0" in now and "- events: 1" in now


def test_the_product_repository_root_is_an_example_memory_site(tmp_path: Path) -> None:
    result = subprocess.run(["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                            capture_output=True, text=True, env=env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "rankings" / "index.html").is_file()
    assert "memsite-entry" in (tmp_path / "site" / "memories" / "patterns" / "index.html").read_text()


def test_a_copy_outside_git_still_builds_without_history(demo: Path, tmp_path: Path) -> None:
    copy = tmp_path / "export"
    copy.mkdir()
    for name in ("mkdocs.yml", "content"):
        (shutil.copytree if (demo / name).is_dir() else shutil.copy)(demo / name, copy / name)
    result = subprocess.run(["mkdocs", "build", "--strict"], cwd=copy, capture_output=True, text=True,
                            env={**env(tmp_path), "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "No history" in (copy / "site" / "days" / "index.html").read_text()


def test_show_url_and_the_review_report_link_to_the_memorys_page(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    with MemoryStore.init(repo, agent="planner") as store:
        base = git(repo, "rev-parse", "HEAD").strip()
        m = store.remember("Deploys go out on Tuesdays", category="events")
    refused = memsite("-C", str(repo), "show", m.id, "--url", home=tmp_path, check=False)
    assert refused.returncode == 1 and "has no site_url" in refused.stderr
    settings = repo / "mkdocs.yml"
    settings.write_text(settings.read_text() + "site_url: https://team.example/memory/\n")
    url = f"https://team.example/memory/m/{m.id}/"
    assert memsite("-C", str(repo), "show", m.id, "--url", home=tmp_path).stdout.strip() == url
    report = memsite("-C", str(repo), "diff", base, "--format", "markdown", home=tmp_path).stdout
    assert f"[`{short_id(m.id)}`]({url})" in report
    memsite("-C", str(repo), "build", home=tmp_path)
    assert (repo / "site" / "m" / m.id / "index.html").is_file()  # the address the link names


def test_a_huge_or_hostile_memory_gets_an_escaped_page_under_one_megabyte(tmp_path: Path) -> None:
    """Bad input: a hand-made memory with markup, a 1 MB line or a million-character word."""
    repo = tmp_path / "memory"
    with MemoryStore.init(repo, agent="mallory") as store:
        made = {name: store.remember(f"placeholder {name}", category="general", abstract=f"Hand-made {name}")
                for name in ("line", "word", "markup")}
    texts = {"line": "deploy " * 150_000, "word": "x" * 1_000_000,
             "markup": "<script>window.__pwned=1</script><img src=x onerror=alert(1)> " * 20_000}
    for name, memory in made.items():
        memory.path.write_text(format_memory(memory.replace(content=texts[name], abstract=texts[name][:5000])))
    git(repo, "commit", "-qam", "Huge memories by hand")
    memsite("-C", str(repo), "build", home=tmp_path)
    for name, memory in made.items():
        html = (repo / "site" / "m" / memory.id / "index.html").read_text()
        assert len(html.encode()) < 1_000_000, name
        assert "The text is cut here" in html, name
        assert "<script>window" not in html and "<img src=x" not in html
    assert max(p.stat().st_size for p in (repo / "site").rglob("*.html")) < 1_000_000  # lists too
    assert (repo / "site" / "pagefind" / "pagefind-entry.json").is_file()  # search indexed them all the same


def test_a_superseded_memory_keeps_its_page_links_forward_and_leaves_the_rankings(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    with MemoryStore.init(repo, agent="planner") as store:
        tomas = store.remember("The user's manager is Tomas Novak, head of payments.", category="profile")
        ana = store.remember("The user's manager is now Ana Silva; Tomas Novak moved to the risk team.",
                             category="profile", supersedes=tomas.id)
    with MemoryStore(repo, agent="reviewer") as store:
        li = store.remember("The user's manager is Li Wei since the August reorganisation.", category="profile",
                            supersedes=ana.id)
        berlin = store.remember("The user lives in Berlin.", category="profile")
        paris = store.remember("The user lives in Paris.", category="profile")  # flagged for review
    memsite("-C", str(repo), "build", home=tmp_path)
    site = repo / "site"
    old = page(site, f"/m/{tomas.id}/")
    notice = old[old.index('class="memsite-superseded"'):old.index("<h1")]
    assert f'replaced by <a href="../{ana.id}/">' in notice and f'The newest is <a href="../{li.id}/">' in notice
    chain = old[old.index("How this fact changed"):]
    assert chain.index("<strong>The user&#x27;s manager is Tomas") < chain.index(ana.id) < chain.index(li.id)
    assert "→ replaced on" in chain and "by reviewer" in chain
    assert 'data-pagefind-meta="category:profile · superseded"' in old  # search results say so
    assert "memsite-superseded" not in page(site, f"/m/{li.id}/").split("<h1")[0]
    for url in ("/rankings/", "/memories/profile/"):
        ranked = page(site, url)
        assert li.id in ranked and tomas.id not in ranked and ana.id not in ranked
    home = page(site, "/")
    assert "<strong>3</strong> memories" in home  # Li Wei, Berlin, Paris: what holds now
    week = home[home.index(">This week<"):home.index(">At a glance<")]
    changed = week[week.index("Facts that changed"):week.index("To review")]
    assert f'href="m/{tomas.id}/"' in changed and f'href="m/{ana.id}/"' in changed and f'href="m/{li.id}/"' in changed
    review = week[week.index("To review"):]
    assert f"memsite supersede {berlin.id} {paris.id}" in review and f"memsite dismiss {paris.id} {berlin.id}" in review
