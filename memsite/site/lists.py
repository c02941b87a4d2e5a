"""The numbered pages of a long list (``page-<n>/`` of a category or of a month), each put into one rendered shell.

At 100,000 memories written in one month, each category lists some 17,000
of them over 80 pages, and its month as many again: a thousand pages that
differ only in their title, their address and what they list. Rendering
each through the generator (the whole nav, Markdown over 100 KB of HTML)
was most of the time a build spends on pages. None of them is in the nav,
so around what they list they are the same page wherever they sit at the
same depth: the generator renders one shell per depth (:func:`shell_src`),
with tokens where the title, the address and the list go, and
:func:`write` puts each page into the shell of its depth. A list's first
page, which the nav names, is rendered by the generator as any other page.
"""

from __future__ import annotations

from pathlib import Path

from ..foundation.errors import MemsiteError
from .output import discard
from .safe import text, url_of

PATH_TOKEN = "ZZMEMSITELISTPAGEZZ"  # each folder of a shell's address
TITLE_TOKEN = "ZZMEMSITELISTTITLEZZ"
CONTENT_TOKEN = "<!--memsite-list-page-->"
ANCHOR = "memsite-list"  # the heading's id, in place of the one the generator made of the token


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
