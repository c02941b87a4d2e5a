"""The site in a real headless Chromium (Debian's chromium, driven by Playwright)."""

from __future__ import annotations

import functools
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from memsite import MemoryStore
from tests.sites import hostile_repository, memsite

pytestmark = pytest.mark.slow  # a real Chromium against built sites

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if CHROMIUM is None:
        pytest.fail("Debian's chromium is needed for the browser tests: apt-get install chromium (.ci/run does)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


def serve(site: Path) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class Visit:
    """A page that records every request, dialog and script error."""

    def __init__(self, browser: Browser) -> None:
        self.context = browser.new_context()
        self.page: Page = self.context.new_page()
        self.hosts: set[str] = set()
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        # Recorded, not routed: routing would also intercept the search worker's requests.
        self.context.on("request", lambda request: self.hosts.add(urlparse(request.url).hostname or ""))
        self.page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def close(self) -> None:
        self.context.close()


def search(page: Page, url: str, words: str) -> None:
    """Type into the site search as a person does, once its index has loaded."""
    page.goto(url)
    page.wait_for_load_state("networkidle")
    toggle = page.locator('label.md-header__button[for="__search"]')  # a phone shows the icon, not the box
    if toggle.is_visible():
        toggle.click()
    else:
        page.locator("label.md-search__icon, .md-search__input").first.click()
    page.locator("input.md-search__input").press_sequentially(words, delay=30)


ENGINES = ("mkdocs", "properdocs", "zensical")


@pytest.fixture(scope="module", params=ENGINES)
def demo_site(request: pytest.FixtureRequest, demo: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The demo's site as each engine builds it (a copy of the repository each: the same files in)."""
    folder = demo
    if request.param != "mkdocs":
        folder = tmp_path_factory.mktemp(request.param) / "memory"
        shutil.copytree(demo, folder, symlinks=True)
        memsite("-C", str(folder), "build", "--engine", request.param, home=folder.parent)
    server, url = serve(folder / "site")
    yield url, folder
    server.shutdown()
    server.server_close()


def test_dashboard_memory_link_and_search(browser: Browser, demo_site: tuple[str, Path]) -> None:
    url, folder = demo_site
    visit = Visit(browser)
    page = visit.page
    page.goto(url)
    assert page.locator("h2", has_text="This week").is_visible()
    assert page.locator("h2", has_text="Memories by category").is_visible()
    assert page.locator("svg.memsite-chart").count() == 1 and page.locator(".memsite-bars").count() == 1

    top = page.locator(".memsite-rank table a").first
    abstract = top.inner_text()
    top.click()
    page.wait_for_load_state()
    assert re.fullmatch(r"/m/[0-9A-Z]{26}/", urlparse(page.url).path)
    article = page.locator("article.memsite-memory")
    assert article.locator("h1").inner_text() == abstract
    assert "decay" in article.inner_text() and "boost" in article.inner_text()

    with MemoryStore(folder, agent="reader") as store:
        wanted = next(m for m in store.list() if "trigram" in m.abstract)
    search(page, url, "trigram")
    result = page.locator(".md-search-result__item", has_text=wanted.abstract).first
    result.wait_for(timeout=15_000)
    assert "cases" in result.inner_text()  # the memory's category, as the result's tag
    result.locator("a").first.click()
    page.wait_for_load_state()
    assert urlparse(page.url).path == f"/m/{wanted.id}/"
    assert visit.hosts == {"127.0.0.1"} and visit.errors == []
    visit.close()


def test_hostile_memories_execute_nothing_and_request_no_other_host(browser: Browser, tmp_path: Path) -> None:
    repo = tmp_path / "hostile"
    ids = hostile_repository(repo, tmp_path)
    server, url = serve(repo / "site")
    visit = Visit(browser)
    page = visit.page
    try:
        with MemoryStore(repo, agent="reader") as store:
            months = {store.get(i).created.strftime("%Y-%m") for i in ids}
        urls = [url, f"{url}memories/general/", f"{url}rankings/", f"{url}skills/", f"{url}agents/mallory/"]
        urls += [f"{url}memories/general/{month}/" for month in months] + [f"{url}m/{i}/" for i in ids]
        for address in urls:
            page.goto(address)
            page.wait_for_load_state("networkidle")
            # Fire what a reader's mouse would on everything the memories put on the page.
            page.evaluate("""() => document.querySelectorAll('.md-content *').forEach(el => {
                for (const type of ['mouseover', 'mouseenter', 'focus', 'load', 'error'])
                    el.dispatchEvent(new Event(type));
                if (!el.closest('a')) el.dispatchEvent(new MouseEvent('click'));
            })""")
            assert page.evaluate("window.__pwned") is None, address
            dangerous = page.evaluate("""() => [...document.querySelectorAll('.md-content *')].filter(el =>
                ['SCRIPT', 'IFRAME', 'STYLE', 'LINK', 'IMG', 'OBJECT', 'EMBED'].includes(el.tagName) ||
                [...el.attributes].some(a => a.name.startsWith('on') ||
                    /^\\s*javascript:/i.test(a.value))).map(el => el.outerHTML.slice(0, 120))""")
            assert dangerous == [], address
        for words in ("notes", "styled", "bold"):
            search(page, url, words)
            page.locator(".md-search-result__item").first.wait_for(timeout=15_000)
            assert page.evaluate("window.__pwned") is None
            live = page.evaluate("""() => [...document.querySelectorAll('.md-search-result *')].filter(el =>
                !['A', 'ARTICLE', 'DIV', 'H1', 'P', 'MARK', 'NAV', 'SPAN', 'LI', 'OL'].includes(el.tagName) ||
                [...el.attributes].some(a => a.name.startsWith('on'))).map(el => el.outerHTML.slice(0, 80))""")
            assert live == [], words  # search never shows live markup
        search(page, url, "notes")
        page.locator(".md-search-result__item").first.wait_for(timeout=15_000)
        shown = page.locator(".md-search-result").inner_text()
        assert "<script>window.__pwned='abstract'</script>Deploy notes" in shown
        assert visit.dialogs == []
        assert visit.hosts == {"127.0.0.1"}, visit.hosts
    finally:
        visit.close()
        server.shutdown()
        server.server_close()


WIDTHS = (1280, 375)
# Elements that carry a long value and how far past the viewport they reach, outside boxes that scroll themselves.
OVERFLOW = """() => {
    const width = document.documentElement.clientWidth;
    const scrolls = el => el.closest('.md-typeset__scrollwrap, pre, .md-typeset__table');
    return [...document.querySelectorAll('.md-content *')]
        .filter(el => el.getBoundingClientRect().right > width + 1 && !scrolls(el))
        .slice(0, 5).map(el => el.tagName + '.' + el.className + ' ' + Math.round(el.getBoundingClientRect().right));
}"""


def page_types(folder: Path) -> list[str]:
    """One address of every kind of page the site has."""
    with MemoryStore(folder, agent="reader") as store:
        memory = next(m for m in store.list() if "grafana" in m.content)  # the longest unbroken value
        session = next((folder / "content" / "sessions").glob("*.md")).stem
        agent = memory.agent
    day = sorted((folder / "site" / "days").glob("20*"))[-1].name
    week = sorted((folder / "site" / "weeks").glob("20*"))[-1].name
    return ["", "memories/", f"memories/{memory.category}/", f"memories/{memory.category}/{memory.created:%Y-%m}/",
            f"m/{memory.id}/", "rankings/", "weeks/", f"weeks/{week}/", "days/", f"days/{day}/", "skills/",
            "world/", "sessions/", f"sessions/{session}/", "agents/", f"agents/{agent}/"]


@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_scrolls_sideways_and_no_other_host_is_asked(browser: Browser, demo_site: tuple[str, Path],
                                                             width: int) -> None:
    url, folder = demo_site
    visit = Visit(browser)
    page = visit.page
    page.set_viewport_size({"width": width, "height": 900})
    try:
        for address in page_types(folder):
            page.goto(url + address)
            page.wait_for_load_state("networkidle")
            assert page.evaluate("document.documentElement.scrollWidth") <= width, address
            assert page.evaluate(OVERFLOW) == [], address
        assert visit.hosts == {"127.0.0.1"} and visit.errors == []
    finally:
        visit.close()


def test_every_link_of_the_demo_resolves(demo_site: tuple[str, Path]) -> None:
    _, folder = demo_site
    site = folder / "site"
    broken, checked = [], 0
    for html in site.rglob("*.html"):
        if html.name == "404.html" and html.parent == site:
            continue  # served at any depth, so MkDocs gives it links from the root
        for href in re.findall(r'href="([^"]+)"', html.read_text(encoding="utf-8")):
            target = urlparse(href)
            if target.scheme or target.netloc or href.startswith(("#", "mailto:")):
                continue
            path = (html.parent / unquote(target.path)).resolve()
            if path.is_dir():
                path = path / "index.html"
            checked += 1
            if not path.is_file():
                broken.append(f"{html.relative_to(site)} -> {href}")
            elif target.fragment and path.suffix == ".html" and "/site/m/" in path.as_posix():
                if f'id="{target.fragment}"' not in path.read_text(encoding="utf-8"):
                    broken.append(f"{html.relative_to(site)} -> {href} (no such anchor)")
    assert checked > 500 and broken == []


@pytest.mark.parametrize("width", WIDTHS)
def test_search_finds_a_memory_by_id_by_id_prefix_and_by_a_word_of_its_body(browser: Browser,
                                                                           demo_site: tuple[str, Path],
                                                                           width: int) -> None:
    url, folder = demo_site
    with MemoryStore(folder, agent="reader") as store:
        wanted = next(m for m in store.list() if "fonts-dejavu" in m.content)
    visit = Visit(browser)
    page = visit.page
    page.set_viewport_size({"width": width, "height": 900})
    try:
        for words in (wanted.id, wanted.id[:12].lower(), "dejavu"):
            search(page, url, words)
            results = page.locator(".md-search-result__list > .md-search-result__item")
            # the memory first, not a list page (once the last key's answer is in: each key asks again)
            expect(results.first).to_contain_text(wanted.abstract, timeout=15_000)
            if words == "dejavu":  # a word of the body: the snippet shows it, marked
                assert "dejavu" in results.first.locator("mark").first.inner_text().lower()
            page.keyboard.press("Enter")  # Material's keyboard: Enter opens the best result
            page.wait_for_url(f"**/m/{wanted.id}/**", timeout=15_000)
            assert urlparse(page.url).path == f"/m/{wanted.id}/", words
            assert page.locator(f"article.memsite-memory h1[id='{wanted.id}']").is_visible()
        page.keyboard.press("/")  # Material's shortcut focuses the search box, on a memory page too
        page.keyboard.type("dejavu", delay=30)
        page.locator(".md-search-result__item").first.wait_for(timeout=15_000)
        assert visit.hosts == {"127.0.0.1"} and visit.errors == []
    finally:
        visit.close()
    dark = browser.new_context(color_scheme="dark")  # a reader whose system is dark: Material's slate scheme
    try:
        page = dark.new_page()
        search(page, url, "dejavu")
        page.locator(".md-search-result__item").first.wait_for(timeout=15_000)
        assert page.evaluate("document.body.getAttribute('data-md-color-scheme')") == "slate"
        rgb = page.evaluate("getComputedStyle(document.querySelector('.md-search__output')).backgroundColor")
        assert sum(map(int, re.findall(r"\d+", rgb)[:3])) < 3 * 100, rgb  # results on a dark background
    finally:
        dark.close()


def test_words_no_page_holds_together_find_the_pages_holding_some(browser: Browser,
                                                                  demo_site: tuple[str, Path]) -> None:
    """'postgres lock' style: no memory holds both words, so the memories holding either are shown, not nothing."""
    url, folder = demo_site
    with MemoryStore(folder, agent="reader") as store:
        memories = store.list()
    words = {m.id: (m.abstract + " " + m.content).lower() for m in memories}
    one = next(m for m in memories if "trigram" in words[m.id])
    other = next(m for m in memories if "dejavu" in words[m.id])
    assert not any("trigram" in text and "dejavu" in text for text in words.values())
    visit = Visit(browser)
    try:
        search(visit.page, url, "trigram dejavu")
        results = visit.page.locator(".md-search-result__list > .md-search-result__item")
        results.first.wait_for(timeout=15_000)
        shown = results.all_inner_texts()
        assert any(one.abstract in text for text in shown) and any(other.abstract in text for text in shown)
        assert visit.errors == []
    finally:
        visit.close()


def test_no_serious_accessibility_violation_in_light_or_dark(browser: Browser, demo_site: tuple[str, Path]) -> None:
    """axe-core's WCAG 2 A and AA rules on the home page, a memory, a week and the rankings."""
    from axe_playwright_python.sync_playwright import Axe

    url, folder = demo_site
    addresses = [a for a in page_types(folder) if a in ("", "rankings/") or a.startswith(("m/", "weeks/20"))]
    assert len(addresses) == 4
    axe, found = Axe(), []
    for scheme in ("light", "dark"):
        context = browser.new_context(color_scheme=scheme)
        page = context.new_page()
        for address in addresses:
            page.goto(url + address)
            page.wait_for_load_state("networkidle")
            report = axe.run(page, options={"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa"]}})
            found += [f"{scheme} /{address}: {v['id']} ({v['impact']}) at {v['nodes'][0]['target']}"
                      for v in report.response["violations"] if v["impact"] in ("serious", "critical")]
        context.close()
    assert found == []


def test_search_after_a_build_that_kept_the_index_finds_what_changed_and_not_what_went(
        browser: Browser, demo: Path, tmp_path: Path) -> None:
    """A build after a few writes indexes only them beside the earlier index (search.py): a new memory is found,
    an edited one by its new words and not its old ones, a forgotten one no longer."""
    folder = tmp_path / "memory"
    shutil.copytree(demo, folder, symlinks=True)
    with MemoryStore(folder, agent="reader") as store:
        memories = store.list()
        edited = next(m for m in memories if "trigram" in (m.abstract + m.content).lower())
        gone = next(m for m in memories if "dejavu" in (m.abstract + m.content).lower())
        assert edited.id != gone.id
        added = store.remember("The quokka cluster restarts its workers at noon", category="cases")
        store.update(edited.id, abstract=re.sub("(?i)trigram", "ngram", edited.abstract),
                     content=re.sub("(?i)trigram", "ngram", edited.content))
        store.forget(gone.id, reason="wrong")
    memsite("-C", str(folder), "build", home=tmp_path)
    delta = folder / "site" / "pagefind-delta"
    assert added.id in (delta / "memsite-pages.json").read_text()  # indexed beside the earlier index
    assert gone.id in (delta / "memsite.json").read_text()  # left out of the earlier index's results
    server, url = serve(folder / "site")
    visit = Visit(browser)
    try:
        results = visit.page.locator(".md-search-result__list > .md-search-result__item")
        search(visit.page, url, "quokka")
        expect(results.first).to_contain_text("quokka cluster", timeout=15_000)
        search(visit.page, url, "ngram")
        expect(results.first).to_contain_text(re.sub("(?i)trigram", "ngram", edited.abstract)[:40], timeout=15_000)
        for word, absent in (("trigram", edited), ("dejavu", gone)):
            search(visit.page, url, word)
            meta = visit.page.locator(".md-search-result__meta")
            expect(meta).to_have_text(re.compile("matching document", re.IGNORECASE), timeout=15_000)
            visit.page.wait_for_timeout(500)  # (the answer to the last key)
            assert not any(absent.abstract in text for text in results.all_inner_texts()), word
        assert visit.errors == []
    finally:
        visit.close()
        server.shutdown()
        server.server_close()
