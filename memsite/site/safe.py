"""Untrusted text on its way to the browser: escaped, or rendered and sanitized.

Agents write memory text, so none of it may reach a page as live markup.
Fields (abstracts, tags, names) are HTML-escaped and placed in raw HTML blocks
that Markdown does not touch; bodies are rendered from Markdown and cleaned by
nh3 with an allowlist: no script, no event handler, no ``javascript:`` URL, no
image or frame that would make the page ask another host for anything.
"""

from __future__ import annotations

import functools
import html
import json
import posixpath
import re

import markdown
import nh3

TAGS = {
    "p", "br", "hr", "a", "em", "strong", "b", "i", "code", "pre", "kbd", "blockquote", "del", "s", "sub", "sup",
    "ul", "ol", "li", "dl", "dt", "dd", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
}
ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "th": {"align"}, "td": {"align"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}
_HEADING = re.compile(r"<(/?)h([1-6])\b")

_markdown = markdown.Markdown(extensions=["fenced_code", "tables", "sane_lists"], output_format="html")


def text(value: object) -> str:
    """``value`` as HTML text: every character it holds shows as itself."""
    return html.escape("" if value is None else str(value), quote=True)


def body(markdown_text: str) -> str:
    """Memory text (Markdown) as sanitized HTML; its headings demoted below the page's own.

    Text with nothing Markdown would read as markup is paragraphs of escaped
    text, the HTML Markdown would make of it, without running it (most memory
    text: a tenth of the cost at 100,000 memory pages).
    """
    if not _NOT_PLAIN.search(markdown_text):
        paragraphs = (p.strip() for p in re.split(r"\n\s*\n", markdown_text))
        return "\n".join(f"<p>{text(p)}</p>" for p in paragraphs if p)
    _markdown.reset()
    rendered = _markdown.convert(markdown_text)
    rendered = _HEADING.sub(lambda m: f"<{m.group(1)}h{min(6, int(m.group(2)) + 3)}", rendered)
    return nh3.clean(rendered, tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES,
                     link_rel="noopener noreferrer nofollow", strip_comments=True)


@functools.lru_cache(maxsize=4096)  # a memory's abstract and overview are shown on several pages
def plain(markdown_text: object) -> str:
    """Memory text (Markdown) as one line of plain text: what a reader sees, without the markup."""
    value = str(markdown_text or "")
    if not _MARKUP.search(value):
        return " ".join(value.split())
    _markdown.reset()
    stripped = nh3.clean(_markdown.convert(value).replace("</li>", " </li>"), tags=set(), strip_comments=True)
    return " ".join(html.unescape(stripped).split())


_MARKUP = re.compile(r"[\\`*_\[\]<>&#]|^\s*(?:\d+[.)]|[-+>])\s", re.MULTILINE)
# What Markdown (with fenced code and tables) could read as markup: inline marks, lists, setext headings,
# indented code, table pipes, hard line breaks.
_NOT_PLAIN = re.compile(r"[\\`*_\[\]<>&#|~]|^\s*(?:\d+[.)]|[-+>])\s|^\s*[=-]+\s*$|^(?: {4}|\t)| $", re.MULTILINE)


def url_of(src_uri: str) -> str:
    """The URL (directory style) MkDocs gives a page: ``a/b.md`` -> ``a/b/``, ``a/index.md`` -> ``a/``."""
    stem = src_uri.removesuffix(".md")
    if stem == "index":
        return ""
    return (stem.removesuffix("/index") if stem.endswith("/index") else stem) + "/"


def href(from_src: str, to_src: str, anchor: str | None = None) -> str:
    """A relative link from the page ``from_src`` to the page ``to_src`` (and an anchor on it)."""
    base, target = url_of(from_src), url_of(to_src)
    rel = posixpath.relpath("/" + target, "/" + base)
    rel = "./" if rel == "." else rel + "/"
    return text(rel + (f"#{anchor}" if anchor else ""))


def link(from_src: str, to_src: str, label: str, anchor: str | None = None) -> str:
    return f'<a href="{href(from_src, to_src, anchor)}">{text(label)}</a>'


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!])")


def inline(value: object) -> str:
    """``value`` as one line of Markdown that renders as exactly its text (no markup, no link)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text(" ".join(str(value or "").split())))


def front(title: str | None) -> str:
    """Frontmatter of a generated page: its title, escaped, as Material prints it unescaped.

    No title for the home page: Material then titles it with the site's name alone.
    """
    return "" if title is None else f"---\ntitle: {json.dumps(text(title))}\n---\n"


def short(value: str, limit: int) -> str:
    """``value`` cut to ``limit`` characters, an ellipsis saying so."""
    return value if len(value) <= limit else value[:limit - 1] + "…"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")
