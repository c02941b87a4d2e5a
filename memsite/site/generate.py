"""memsite's own step of a site build, before and after the generator renders: no generator is imported here.

Before (:func:`generate`): read the repository once and compute every page
as Markdown, the finished HTML they refer to by placeholder, and each
memory's article. A generator then renders the Markdown pages through the
site's theme: MkDocs and ProperDocs through memsite's plugin (``plugin``,
pages handed over in memory), Zensical from the pages written out by
:func:`write_docs`. After (:func:`finish`): put the finished HTML in place of
the placeholders the generator left (when it could not), write each memory's
page into the shell it rendered, the redirects from addresses that moved, and
the Pagefind index. Whatever the generator, the same files come out at the
same addresses.
"""

from __future__ import annotations

import functools
import gzip
import multiprocessing
import os
import re
import shutil
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path

from ..features import history, site_guard
from ..foundation.config import Config
from ..foundation.record import Memory, utcnow
from ..storage.activity import pending_counts
from ..storage.reading import read_memory
from . import lists, memory_pages, search, weeks
from .output import previous_site
from .pages import Lists, Site
from .parsed import Entries
from .problems import problem_pages
from .safe import text
from .snapshot import Snapshot, load

THEME = Path(__file__).parent / "theme"  # the memory page's template and the search worker
CSS_URI = "assets/memsite.css"
SOURCES = ("memories/", "archive/", "sessions/", "notes/")  # agent-written: published only as rendered pages
PLACEHOLDER = re.compile(r"<!--memsite-html (\d+)-->")
# Addresses that moved: the daily pages were summaries/<date>/, then reports/<date>/; they are days/<date>/.
MOVED = (("summaries", "days"), ("reports", "days"))
# Accessibility (WCAG 2 AA, checked with axe-core in the browser tests): links in running text are underlined,
# not told apart by colour alone; the footer and linked code are given the contrast Material leaves them short of.
CSS = """\
.memsite-cards{display:flex;flex-wrap:wrap;gap:.6rem;margin:1rem 0}
.memsite-card{border:1px solid var(--md-default-fg-color--lightest);border-radius:.3rem;padding:.5rem .8rem;
  min-width:8rem}
.memsite-card strong{display:block;font-size:1.4rem}
.memsite-chart{max-width:42rem;font-size:12px}
.memsite-chart text{fill:var(--md-default-fg-color)}
.memsite-chart .area{fill:var(--md-primary-fg-color);opacity:.75}
.memsite-chart .line{stroke:var(--md-primary-fg-color);stroke-width:2}
@media (max-width:40em){.memsite-chart{font-size:24px}}
.memsite-bars{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.3rem .6rem;max-width:42rem;
  align-items:center;font-size:.75rem}
.memsite-bars .bar{display:flex;align-items:center;gap:.4rem;min-width:0}
.memsite-bars .bar span{display:block;height:1rem;border-radius:2px;background:var(--md-primary-fg-color);opacity:.75}
.memsite-meta{color:var(--md-default-fg-color--light);font-size:.75rem}
.memsite-tag{background:var(--md-code-bg-color);border-radius:.2rem;padding:0 .3rem}
.memsite-memory,.memsite-entry,.memsite-changes,.memsite-rank td,.memsite-crumbs,.md-typeset h1{overflow-wrap:anywhere}
.memsite-crumbs{font-size:.7rem;color:var(--md-default-fg-color--light)}
.memsite-id{color:var(--md-default-fg-color--light);font-size:.7rem;margin:0}
.memsite-facts{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:0 1rem;font-size:.75rem}
.memsite-facts dd{margin:0;min-width:0}
.memsite-gone{text-decoration:line-through}
.md-typeset .memsite-rank table{display:table;width:100%}
.md-typeset div:is(.memsite-rank,.memsite-who,.memsite-world) table:not([class]) :is(th,td){
  min-width:0;padding:.5em .6em}
.md-typeset .memsite-rank table:not([class]) :is(td,th):first-child{width:1%;padding-right:0}
.md-typeset .memsite-rank .memsite-meta{font-size:.9em}
.md-typeset .memsite-num{text-align:right;white-space:nowrap}
.md-typeset .memsite-key code{overflow-wrap:normal;word-break:normal}
.md-typeset .memsite-world td{overflow-wrap:anywhere}
.md-typeset .memsite-formula code{white-space:pre-wrap}
.md-typeset :is(p,li,dd,td) > a:not(.md-button){text-decoration:underline;text-underline-offset:.15em}
[data-md-color-scheme=slate] .md-typeset a > code{color:var(--md-code-fg-color)}
.md-copyright{color:var(--md-footer-fg-color--light)}
.memsite-search{display:none;position:fixed;top:2.6rem;left:.6rem;right:.6rem;max-width:36rem;margin-left:auto;
  z-index:5;padding:.4rem;border-radius:.2rem;background:var(--md-default-bg-color);color:var(--md-default-fg-color);
  box-shadow:0 .2rem 1rem rgba(0,0,0,.35)}
.md-toggle[data-md-toggle=search]:checked ~ * .memsite-search{display:block}
.memsite-search input{box-sizing:border-box;width:100%;font:inherit;font-size:.8rem;padding:.4rem .6rem;
  border:1px solid var(--md-default-fg-color--lighter);border-radius:.2rem;background:inherit;color:inherit}
.memsite-search .md-search__output{max-height:70vh;overflow:auto;background:var(--md-default-bg-color)}
.memsite-search .md-search-result__meta{font-size:.7rem;margin:.4rem .6rem;color:var(--md-default-fg-color--light)}
.memsite-search ol{list-style:none;margin:0;padding:0}
.memsite-search li{border-top:1px solid var(--md-default-fg-color--lightest)}
.memsite-search a{display:block;padding:.4rem .6rem;color:inherit;font-size:.7rem;overflow-wrap:anywhere}
.memsite-search h1{font-size:.8rem;margin:0 0 .2rem;font-weight:700}
.memsite-search p{margin:0}
.memsite-search .md-tag{
  font-size:.6rem;background:var(--md-default-fg-color--lightest);border-radius:.2rem;padding:0 .3rem}
@media (min-width:60em){
  .memsite-search{display:block;position:relative;top:auto;left:auto;right:auto;width:12rem;margin:0 .6rem 0 auto;
    padding:0;background:none;box-shadow:none}
  .memsite-search input{border:none;background:rgba(0,0,0,.26);color:var(--md-primary-bg-color)}
  .memsite-search input::placeholder{color:var(--md-primary-bg-color--light)}
  .memsite-search .md-search__output{position:absolute;top:2.2rem;right:0;width:34rem;border-radius:.2rem;
    box-shadow:0 .2rem 1rem rgba(0,0,0,.35)}
}
"""


class Beside:
    """What another core works out while this one makes the other pages: the pages of categories and months
    (:meth:`Site.lists`), then each memory's page key (:meth:`Site.article_keys`); and what search holds of each
    memory (:func:`memory_pages.search_key`), worked out here.

    Each is a pass over every memory: seconds at 100,000 of them. Past a few
    thousand memories a forked process does them; where it cannot, or it
    fails, they are done here when asked for.
    """

    def __init__(self, site: Site) -> None:
        self.site = site
        self.listed: Lists | None = None
        self.keys: tuple[dict[str, str], dict[str, str]] | None = None
        self.process: multiprocessing.process.BaseProcess | None = None
        self.receive: Connection | None = None
        # Forked only from a process of one thread (`memsite build`, `mkdocs build`): a lock another thread
        # held at the fork (`mkdocs serve`'s server and watcher) would stay held in the copy for good.
        if len(site.snap.memories) >= memory_pages.PARALLEL and hasattr(os, "fork") and threading.active_count() == 1:
            context = multiprocessing.get_context("fork")
            self.receive, send = context.Pipe(duplex=False)
            self.process = context.Process(target=self._send, args=(send,), daemon=True)
            self.process.start()
            send.close()

    def _send(self, send: Connection) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the build's to handle: it stops this process
        send.send(self.site.lists())
        send.send(self.site.article_keys())
        send.close()

    def _receive(self) -> object:
        if self.receive is not None:
            try:
                return self.receive.recv()
            except (EOFError, OSError):
                self.close()  # (the process failed: the rest is done here)
        return None

    def lists(self) -> Lists:
        """What :meth:`Site.lists` returns."""
        if self.listed is None:
            found = self._receive()
            self.listed = found if isinstance(found, dict) else self.site.lists()
        return self.listed

    def get(self) -> tuple[dict[str, str], dict[str, str]]:
        """(memory id -> article key, memory page address -> search key); the search keys are worked out here
        while the process beside ends its work."""
        if self.keys is None:
            self.lists()
            searched = {f"/m/{s.memory.id}/": memory_pages.search_key(s.memory) for s in self.site.snap.memories}
            found = self._receive()
            self.close()
            self.keys = (found if isinstance(found, dict) else self.site.article_keys()), searched
        return self.keys

    def close(self) -> None:
        """Stop the process (its work done, or no longer wanted: a build that failed before its end)."""
        if self.process is not None:
            if self.process.is_alive():
                self.process.terminate()
            self.process.join()
            self.process = None
        if self.receive is not None:
            self.receive.close()
            self.receive = None


@dataclass
class Generated:
    """What memsite computed for one build: the Markdown pages (src_uri -> text) and the site that renders them."""

    site: Site
    pages: dict[str, str]
    beside: Beside | None = None

    @property
    def snap(self) -> Snapshot:
        return self.site.snap

    def fill(self, html: str) -> str:
        """A rendered page with the finished HTML in place of its placeholders."""
        chunks = self.site.chunks
        if "<!--memsite-html " not in html:
            return html
        return PLACEHOLDER.sub(lambda m: chunks[int(m.group(1))], html)


def build_time() -> datetime:
    """Now, or ``SOURCE_DATE_EPOCH`` for a reproducible build."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), tz=UTC)
    return utcnow()


def generate(root: Path, docs_dir: Path, settings: Config, site_name: str, repo_url: str | None) -> Generated:
    """Every page of the site of ``root`` (its memory files under ``docs_dir``), computed once.

    Raises:
        MemsiteError: the history or a file cannot be read (the message names it).
    """
    with ThreadPoolExecutor(max_workers=1) as git:  # git reads the history while the files are read
        reading = git.submit(history.read, root, "HEAD", settings.content_dir)
        conflicts = git.submit(history.world_conflicts, root)
        snap = load(docs_dir, settings, build_time(), pending_counts(root))
        commits = reading.result()

    def read(path: str, data: bytes) -> Memory | None:  # a memory file as it was, or None
        return read_memory(settings, path, path.removeprefix(settings.memories_dir + "/"), data)

    site = Site(snap, site_name, commits, repo_url,
                gone=weeks.gone_memories(root, commits, settings.memories_dir, read),
                world_at=weeks.world_history(root, commits, settings.world_path),
                world_conflicts=conflicts.result(), entries=Entries(root))
    beside = Beside(site)
    pages = site.pages(beside.lists)
    pages.update(problem_pages(snap))
    pages[CSS_URI] = CSS
    return Generated(site, pages, beside)


def is_source(uri: str) -> bool:
    """Whether a file of docs_dir is an agent-written source: it reaches the site only through rendered pages."""
    return uri.startswith(SOURCES) or uri == "world_state.md"


def write_docs(generated: Generated, docs_dir: Path, root: Path, out: Path) -> None:
    """Write the docs folder a generator without memsite's plugin renders: the site's own files and the pages.

    Each generated page is written at the depth of its address (:func:`as_folder`).
    The repository's own files under ``docs_dir`` (pages a team added, images)
    are linked in, or copied; the agent-written sources and links leading out
    of the repository are not.
    """
    for folder, _, names in os.walk(docs_dir):
        for name in names:
            path = Path(folder) / name
            uri = path.relative_to(docs_dir).as_posix()
            if is_source(uri) or uri in generated.pages or site_guard.escapes(path, root):
                continue
            target = out / uri
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    for uri, page in generated.pages.items():
        target = out / as_folder(uri)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page, encoding="utf-8")


def as_folder(uri: str) -> str:
    """``x.md`` as ``x/index.md``: the page's source at the depth of its address.

    Zensical rewrites every relative link of a page's HTML as if it were
    written relative to the source file; memsite's are relative to the
    page's address, which is then the same place.
    """
    if not uri.endswith(".md") or uri == "index.md" or uri.endswith("/index.md"):
        return uri
    return uri.removesuffix(".md") + "/index.md"


def page_html(site_dir: Path, uri: str) -> Path:
    """Where a generator writes the page of ``uri``.

    Folder addresses: ``x.md`` and ``x/index.md`` -> ``x/index.html``."""
    stem = uri.removesuffix(".md")
    if stem == "index" or stem.endswith("/index"):
        return site_dir / (stem + ".html")
    return site_dir / stem / "index.html"


def fill_pages(site_dir: Path, generated: Generated) -> None:
    """Put the finished HTML into the generated pages a generator rendered without memsite's plugin."""
    for uri in generated.pages:
        if not uri.endswith(".md"):
            continue
        path = page_html(site_dir, uri)
        if path.is_file():
            html = path.read_text(encoding="utf-8")
            filled = search.use_worker(generated.fill(html))
            if filled != html:
                path.write_text(filled, encoding="utf-8")


def finish(site_dir: Path, generated: Generated | None, *, sitemap: bool, log: Callable[[str], None]) -> None:
    """After the generator: memory pages, redirects from moved addresses, the search index, the sitemap.

    Raises:
        MemsiteError: writing the memory pages or indexing failed.
    """
    shell_dir = site_dir / memory_pages.SHELL_SRC.removesuffix(".md")
    previous = previous_site(site_dir)
    beside = None if generated is None else generated.beside or Beside(generated.site)
    if generated is not None and beside is not None and (shell_dir / "index.html").is_file():
        shell = memory_pages.Shell((shell_dir / "index.html").read_text(encoding="utf-8"))
        shutil.rmtree(shell_dir)
        articles, _ = beside.get()
        keys = {mid: shell.key(key) for mid, key in articles.items()}
        kept = memory_pages.reuse(previous, site_dir, keys, shared=shell.files)
        shell.write_files(site_dir)
        memory_pages.write_all(site_dir, shell, functools.partial(generated.site.articles, skip=kept),
                               len(keys) - len(kept), keys)
        memory_pages.record(site_dir, keys)
        log(f"{len(keys)} memory pages: {len(keys) - len(kept)} written, {len(kept)} unchanged since the last build")
    if generated is not None:
        lists.write(site_dir, generated.site.list_pages)
    redirects(site_dir)
    _drop_shell_from_sitemap(site_dir)
    searched = beside.get()[1] if beside is not None else {}
    log(search.index(site_dir, searched, previous))
    if sitemap:
        return
    for name in ("sitemap.xml", "sitemap.xml.gz"):
        (site_dir / name).unlink(missing_ok=True)
    log("no sitemap.xml: set site_url in mkdocs.yml to get one")


def redirects(site_dir: Path) -> None:
    """A page at each address that moved (``summaries/<date>/``, ``reports/<date>/``) sending the reader on."""
    days = sorted(p.name for p in (site_dir / "days").glob("*-*-*") if (p / "index.html").is_file())
    for old, new in MOVED:
        for name in ["", *days]:
            folder = site_dir / old / name
            if (folder / "index.html").exists():
                continue  # the repository has a page there of its own
            folder.mkdir(parents=True, exist_ok=True)
            depth = "../" * (2 if name else 1)
            target = f"{depth}{new}/{name + '/' if name else ''}"
            (folder / "index.html").write_text(
                '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Moved</title>'
                f'<meta name="robots" content="noindex"><link rel="canonical" href="{text(target)}">'
                f'<meta http-equiv="refresh" content="0; url={text(target)}"></head>'
                f'<body><p>This page moved to <a href="{text(target)}">{text(target)}</a>.</p></body></html>',
                encoding="utf-8")


def _drop_shell_from_sitemap(site_dir: Path) -> None:
    """The shells (of memory pages, of list pages) are no pages of the site: take them out of the sitemap."""
    sitemap = site_dir / "sitemap.xml"
    if not sitemap.is_file():
        return
    xml = sitemap.read_text(encoding="utf-8")
    shells = f"(?:{memory_pages.ID_TOKEN}|{lists.PATH_TOKEN})"
    cleaned = re.sub(r"\s*<url>(?:(?!</url>).)*" + shells + r".*?</url>", "", xml, flags=re.S)
    if cleaned != xml:
        sitemap.write_text(cleaned, encoding="utf-8")
        with gzip.GzipFile(site_dir / "sitemap.xml.gz", "wb", mtime=0) as packed:
            packed.write(cleaned.encode("utf-8"))
