"""The site in a real headless Chromium (Debian's chromium, driven by Playwright)."""

from __future__ import annotations

import functools
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from memsite import MemoryStore
from tests.sites import hostile_repository, memsite

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
    page.locator("label.md-search__icon, .md-search__input").first.click()
    page.locator("input.md-search__input").press_sequentially(words, delay=30)


@pytest.fixture(scope="module")
def demo_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    home = tmp_path_factory.mktemp("home")
    folder = tmp_path_factory.mktemp("demo") / "memory"
    memsite("demo", str(folder), home=home)
    server, url = serve(folder / "site")
    yield url, folder
    server.shutdown()
    server.server_close()


def test_dashboard_memory_link_and_search(browser: Browser, demo_site: tuple[str, Path]) -> None:
    url, folder = demo_site
    visit = Visit(browser)
    page = visit.page
    page.goto(url)
    assert page.locator("h2", has_text="Memories by category").is_visible()
    assert page.locator("svg.memsite-chart").count() == 2

    top = page.locator("table a").first
    abstract = top.inner_text()
    top.click()
    page.wait_for_load_state()
    article = page.locator("article.memsite-memory:has(h2:target)")
    assert article.locator("h2").inner_text() == abstract
    assert "decay" in article.inner_text() and "boost" in article.inner_text()

    with MemoryStore(folder, agent="reader") as store:
        wanted = next(m for m in store.list() if "trigram" in m.abstract)
    search(page, url, "trigram")
    result = page.locator(".md-search-result__item", has_text=wanted.abstract).first
    result.wait_for(timeout=15_000)
    result.locator("a").first.click()
    page.wait_for_load_state()
    assert page.locator(f"[id='{wanted.id}']").first.is_visible()
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
        urls += [f"{url}memories/general/{month}/" for month in months]
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
        search(page, url, "notes")
        page.locator(".md-search-result__item").first.wait_for(timeout=15_000)
        assert page.evaluate("window.__pwned") is None
        assert "<script>window.__pwned='abstract'</script>Deploy notes" in page.locator(".md-search-result").inner_text()
        assert visit.dialogs == []
        assert visit.hosts == {"127.0.0.1"}, visit.hosts
    finally:
        visit.close()
        server.shutdown()
        server.server_close()
