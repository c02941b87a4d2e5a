"""The lists of memories: by category (best ranked first) and by month created, over numbered pages.

:class:`ListPages` (mixed into :class:`pages.Site`) makes their content:
each memory's entry once per build (or as an earlier build kept it,
:class:`parsed.Entries`), then the pages of PER_PAGE entries. The first
page of a list is rendered by the generator as any other page; the later
ones (``page-<n>/``) are each put into one rendered shell.

At 100,000 memories written in one month, each category lists some 17,000
of them over 80 pages, and its month as many again: a thousand pages that
differ only in their title, their address and what they list. Rendering
each through the generator (the whole nav, Markdown over 100 KB of HTML)
was most of the time a build spends on pages. None of them is in the nav,
so around what they list they are the same page wherever they sit at the
same depth: the generator renders one shell per depth (:func:`shell_src`),
with tokens where the title, the address and the list go, and
:func:`write` puts each page into the shell of its depth.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..foundation.config import Category
from ..foundation.errors import MemsiteError
from . import safe
from .memory_pages import overview_of
from .output import discard
from .safe import link, text, url_of
from .snapshot import Scored

if TYPE_CHECKING:
    from ..foundation.record import Memory
    from .parsed import Entries
    from .snapshot import Snapshot

PER_PAGE = 200  # memories on a page of a list: ~100 KB of HTML
Lists = dict[str, tuple[str, str, int]]  # the pages of lists: src -> (title, content HTML, number in its list)
# An entry made for every list page and build (ListPages.entry): tokens for the way up to m/ and the score.
ANY_PAGE, UP, SCORE = "\0any page", "\0up to m/\0", "\0score\0"

PATH_TOKEN = "ZZMEMSITELISTPAGEZZ"  # each folder of a shell's address
TITLE_TOKEN = "ZZMEMSITELISTTITLEZZ"
CONTENT_TOKEN = "<!--memsite-list-page-->"
ANCHOR = "memsite-list"  # the heading's id, in place of the one the generator made of the token


class ListPages:
    """The category and month lists of a :class:`pages.Site`."""

    if TYPE_CHECKING:  # what they use of the Site they are mixed into
        snap: Snapshot
        kept_entries: Entries | None
        folders: dict[str, str]
        _entries: dict[str, str]

        def folder(self, here: str, folder: str) -> str: ...
        def memory_link(self, here: str, memory: Memory) -> str: ...
        def meta(self, scored: Scored, here: str = "index.md", score: str | None = None) -> str: ...

    def listed(self, here: str, members: Iterable[Scored]) -> str:
        """``members`` as entries (:meth:`entry`) of the list page ``here``."""
        return "\n".join(self.entry(s) for s in members).replace(UP, self.folder(here, "m"))

    def entry(self, scored: Scored) -> str:
        """A memory in a list: abstract (L0) linking to its page, overview (L1), metadata.

        Made once per memory (each is listed by category and by month, 200,000
        entries at 100,000 memories) with a token for the way up to ``m/``,
        all that differs from one list page to another (:meth:`listed` puts
        it in), and a token for its score, which changes with the time of the
        build: all that differs from one build to the next for a memory read
        from the same file (:class:`parsed.Entries` keeps them).
        """
        m = scored.memory
        made = self._entries.get(m.id)
        if made is None:
            if self.kept_entries is None:
                made = self._entry(scored)
            else:  # a superseded memory's entry links its successor: made in each build
                origin = self.snap.origins.get(m.id) if m.valid_until is None else None
                made = self.kept_entries.get(m.id, origin, lambda: self._entry(scored))
            made = self._entries[m.id] = made.replace(SCORE, f"{scored.score:.3f}")
        return made

    def _entry(self, scored: Scored) -> str:
        m = scored.memory
        overview = safe.short(overview_of(m), 600)
        return (f'<div class="memsite-entry">\n<h3 id="{text(m.id)}">'
                f"{self.memory_link(ANY_PAGE, m)}</h3>\n" + (f"<p>{text(overview)}</p>\n" if overview else "")
                + f"{self.meta(scored, ANY_PAGE, SCORE)}\n</div>")

    def lists(self) -> Lists:
        """The pages of every category and month (:meth:`category_pages`, :meth:`month_pages`); the entries
        made for them are kept for the next build (:class:`parsed.Entries`)."""
        made = self.category_pages()
        made.update(self.month_pages())
        if self.kept_entries is not None:
            self.kept_entries.save()
        return made

    def paged(self, first: str, members: list[Scored], heading: str, intro: str, empty: str) -> Lists:
        """A list of memories over pages of PER_PAGE: ``first`` (``<x>.md`` or ``<x>/index.md``), then ``page-<n>``.

        ``intro`` and ``empty`` are HTML, as each page's content is (src -> (title, content, its number)):
        the generator renders the first page; the others are put into a shell after it (:func:`write`).
        """
        count = max(1, -(-len(members) // PER_PAGE))
        folder = first.removesuffix("/index.md").removesuffix(".md")
        srcs = [first] + [f"{folder}/page-{n}.md" for n in range(2, count + 1)]
        pages = {}
        for number, here in enumerate(srcs, start=1):
            chunk = members[(number - 1) * PER_PAGE: number * PER_PAGE]
            title_ = heading + (f" (page {number} of {count})" if count > 1 else "")
            pager = _pager(here, srcs, number) if count > 1 else ""
            listed = self.listed(here, chunk) if chunk else empty
            pages[here] = (title_, f"{intro}\n{pager}{listed}\n{pager}", number)
        return pages

    def category_pages(self) -> Lists:
        pages: Lists = {}
        grouped = self.snap.by_category()
        for category in self.snap.config.categories:
            members = grouped.get(category.name, [])
            capacity = _capacity(category)
            months = [f"{year:04d}-{month:02d}" for year, month in
                      sorted({(s.memory.created.year, s.memory.created.month) for s in members}, reverse=True)]
            here = f"memories/{category.folder}/index.md"
            by_month = ("By month created: " + ", ".join(
                link(here, f"memories/{category.folder}/{m}.md", m) for m in months[:24])
                + (f" and {len(months) - 24} earlier" if len(months) > 24 else "") + ".") if months else ""
            held = f"{memories_of(len(members))}, best ranked first" + (f"; capacity {capacity}" if capacity else "")
            intro = (f"<blockquote><p>{text(category.description)}</p></blockquote>\n<p>{text(held)}.</p>\n"
                     + (f"<p>{by_month}</p>" if by_month else ""))
            pages.update(self.paged(here, members, category.name, intro, "<p>No memories in this category yet.</p>"))
        return pages

    def month_pages(self) -> Lists:
        """Per category and month created: its memories, oldest first, each linking to its page."""
        buckets: dict[tuple[str, int, int], list[Scored]] = {}
        for s in self.snap.memories:
            buckets.setdefault((s.memory.category, s.memory.created.year, s.memory.created.month), []).append(s)
        pages: Lists = {}
        for (category, year, number), members in buckets.items():
            month = f"{year:04d}-{number:02d}"
            members.sort(key=lambda s: (s.memory.created, s.memory.id))
            folder = self.folders.get(category, category)
            named = datetime.strptime(month, "%Y-%m").strftime("%B %Y")
            here = f"memories/{folder}/{month}.md"
            intro = (f"<p>{memories_of(len(members))} created in {named}, oldest first. "
                     + link(here, f"memories/{folder}/index.md", f"All {category}, best ranked first") + ".</p>")
            pages.update(self.paged(here, members, f"{category}: created in {named}", intro, ""))
        return pages


def memories_of(n: int, kind: str = "") -> str:
    """``n`` memories (``kind``: a word before, as "new ")."""
    return f"{n} {kind}{'memory' if n == 1 else 'memories'}"


def _capacity(category: Category) -> str:
    """The category's high marks, as the page states them ('' when unbounded)."""
    marks = (("entries", category.capacity.entries), ("lines", category.capacity.lines))
    return " / ".join(f"{mark.high} {unit}" for unit, mark in marks if mark is not None)


def _pager(here: str, srcs: list[str], number: int) -> str:
    shown = sorted({1, 2, number - 1, number, number + 1, len(srcs) - 1, len(srcs)} & set(range(1, len(srcs) + 1)))
    links, last = [], 0
    for n in shown:
        if n > last + 1:
            links.append("…")
        links.append(f"<strong>{n}</strong>" if n == number else link(here, srcs[n - 1], str(n)))
        last = n
    return '<nav class="memsite-pager">Pages: ' + " ".join(links) + "</nav>\n"


def depth(src: str) -> int:
    """How many folders deep the page of ``src`` is (``memories/cases/page-3.md``: 3)."""
    return url_of(src).count("/")


def shell_src(folders: int) -> str:
    """The source of the shell the generator renders for the pages ``folders`` deep."""
    return "/".join([PATH_TOKEN] * folders) + ".md"


def shell_page() -> str:
    """The Markdown of a shell: a title and a heading to fill in, and the place of the list (not searched)."""
    return f"---\ntitle: {TITLE_TOKEN}\nsearch:\n  exclude: true\n---\n\n# {TITLE_TOKEN}\n\n{CONTENT_TOKEN}\n"


def shells(pages: dict[str, tuple[str, str]]) -> dict[str, str]:
    """The shells the generator renders for ``pages``: src_uri -> Markdown, one per depth they are at."""
    return {shell_src(folders): shell_page() for folders in sorted({depth(src) for src in pages})}


class Shell:
    """A rendered shell, cut where a page's title, address and list go."""

    def __init__(self, html: str, folders: int) -> None:
        if CONTENT_TOKEN not in html:
            raise MemsiteError(f"the list page shell {shell_src(folders)} has no place for the list: "
                               "does a template of the site's theme leave out page.content?")
        slug = TITLE_TOKEN.lower()  # the id Markdown gave the heading, which the table of contents links to
        html = html.replace(f'id="{slug}"', f'id="{ANCHOR}"').replace(f'href="#{slug}"', f'href="#{ANCHOR}"')
        address = "/".join([PATH_TOKEN] * folders) + "/"
        before, _, after = html.partition(CONTENT_TOKEN)
        self.before = [part.split(TITLE_TOKEN) for part in before.split(address)]
        self.after = [part.split(TITLE_TOKEN) for part in after.split(address)]

    def fill(self, url: str, title: str, content: str) -> str:
        """The page at ``url`` (``memories/cases/page-3/``): ``title`` (HTML) and ``content`` (its list, HTML)."""
        def put(parts: list[list[str]]) -> str:
            return url.join(title.join(part) for part in parts)

        return put(self.before) + content + put(self.after)


def write(site_dir: Path, pages: dict[str, tuple[str, str]]) -> None:
    """Write each of ``pages`` (src_uri -> (title, content HTML)) into the shell of its depth, then drop the shells.

    Raises:
        MemsiteError: the generator rendered a shell without the place for the list.
    """
    if not pages:
        return
    made: dict[int, Shell] = {}
    for src in shells(pages):
        folders = depth(src)
        made[folders] = Shell((site_dir / url_of(src) / "index.html").read_text(encoding="utf-8"), folders)
    discard(site_dir / PATH_TOKEN)
    for src, (title, content) in pages.items():
        url = url_of(src)
        target = site_dir / url / "index.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(made[depth(src)].fill(url, text(title), content), encoding="utf-8")
