"""Each memory on a page of its own, ``/m/<id>/``: the address PR comments, the dashboard and search link to.

The address depends on the id alone, so it never changes when lists are
paginated, a memory is re-ranked, or the file layout moves. There can be
100,000 of these pages: they do not go through MkDocs' page pipeline (every
MkDocs page renders the whole nav, which Material makes slow). MkDocs renders one
shell page through the site's own theme (``theme/memsite-memory.html``), and
:func:`fill` puts each memory's article into a copy of it: a string join per
memory. Every memory page sits at the same depth, so the shell's relative
links hold for all of them.
"""

from __future__ import annotations

import errno
import hashlib
import json
import multiprocessing
import os
import re
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from ..features.history import Commit
from ..foundation.errors import MemsiteError, NotFound
from ..foundation.record import Memory, short_id
from ..storage.chain import chain
from . import safe
from .output import KEPT, discard, link_tree, version
from .safe import text
from .snapshot import Scored

ID_TOKEN = "ZZMEMSITEMEMORYIDZZ"  # the id in the shell page's URL, canonical link and content
TITLE_TOKEN = "ZZMEMSITEMEMORYTITLEZZ"
CONTENT_TOKEN = "<!--memsite-memory-article-->"
SHELL_SRC = f"m/{ID_TOKEN}.md"
MAX_TEXT = 100_000  # characters of memory text rendered on its page: escaped, that stays well under 1 MB
MAX_TITLE = 300  # characters of an abstract shown as a title
HISTORY = 30  # changes listed on the page
PARALLEL = 5_000  # memory pages from which each core writes a share
KEY_TOKEN = "ZZMEMSITEPAGEKEYZZ"


def memory_src(memory_id: str) -> str:
    """The (virtual) source path of a memory's page: its URL is ``m/<id>/``."""
    return f"m/{memory_id}.md"


def shell_page() -> str:
    """The Markdown of the shell MkDocs renders once (frontmatter: its template, kept out of Material's search)."""
    return (f"---\ntitle: {TITLE_TOKEN}\ntemplate: memsite-memory.html\n"
            f"search:\n  exclude: true\n---\n\n{CONTENT_TOKEN}\n")


def title(memory: Memory) -> str:
    """The abstract as a title: one line, at most MAX_TITLE characters."""
    line = " ".join(memory.abstract.split())
    return line if len(line) <= MAX_TITLE else line[:MAX_TITLE - 1] + "…"


def search_key(memory: Memory) -> str:
    """What the search index holds of a memory's page depends on this alone (its title, overview, text and
    label: ``Article.render`` marks them ``data-pagefind-*``): equal keys, the same page in the index."""
    fields = (memory.id, memory.abstract, memory.overview or "", memory.content, memory.category,
              "superseded" if memory.valid_until is not None else "")
    return hashlib.sha1("\0".join(fields).encode("utf-8")).hexdigest()[:12]  # (no secret: a change detector)


def up(target_src: str, anchor: str | None = None) -> str:
    """A link from any memory page (all at ``m/<id>/``) to the page ``target_src``."""
    return text("../../" + safe.url_of(target_src) + (f"#{anchor}" if anchor else ""))


def compact(html: str) -> str:
    """The shell without the indentation its templates leave (a fifth of its bytes, copied into every memory page).

    A line's leading white space renders as the one space the line break
    before it already gives, except in ``pre`` and ``textarea``: a shell
    holding either is left as it is.
    """
    if re.search(r"<(?:pre|textarea)\b", html, re.IGNORECASE):
        return html
    return re.sub(r"\n\s+", "\n", html)


_SVG = re.compile(r'<svg\b([^>]*?)\s*viewBox="([^"]*)"([^>]*)>(.*?)</svg>', re.S)
_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)
SPRITE = "ZZMEMSITEICONSZZ"  # the sprite's name until its content is known


def shared(html: str) -> tuple[str, dict[str, str]]:
    """The shell with its icons and inline scripts in files every memory page shares: (shell, name -> file text).

    Each icon becomes a ``<use>`` of one symbol in an SVG file, each script a
    ``<script src>`` at the same place (run at the same moment: the palette's
    reads the inputs before it). The files are named by their content and sit
    in ``m/``, so ``../name`` reaches them from every memory page, and a page
    that names a file is never served an older one.
    """
    symbols: dict[str, str] = {}  # the svg as written -> its symbol in the sprite (named i<n>, in order)
    files: dict[str, str] = {}

    def icon(match: re.Match[str]) -> str:
        if ID_TOKEN in match.group(0) or TITLE_TOKEN in match.group(0):
            return match.group(0)
        if match.group(0) not in symbols:
            symbols[match.group(0)] = (f'<symbol id="i{len(symbols)}" viewBox="{match.group(2)}">{match.group(4)}'
                                       "</symbol>")
        number = list(symbols).index(match.group(0))
        attributes = re.sub(r'\s*xmlns="[^"]*"', "", match.group(1) + match.group(3))
        return f'<svg{attributes}><use href="../{SPRITE}#i{number}"/></svg>'

    html = _SVG.sub(icon, html)
    if symbols:  # named by its content, known once every icon is in
        sprite = '<svg xmlns="http://www.w3.org/2000/svg">' + "".join(symbols.values()) + "</svg>\n"
        name = f"icons-{_digest(sprite)}.svg"
        files[name] = sprite
        html = html.replace(f"../{SPRITE}#", f"../{name}#")

    def script(match: re.Match[str]) -> str:
        code = match.group(1)
        if ID_TOKEN in code or TITLE_TOKEN in code or not code.strip():
            return match.group(0)
        name = f"script-{_digest(code)}.js"
        files[name] = code
        return f'<script src="../{name}"></script>'

    return _SCRIPT.sub(script, html), files


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


class Shell:
    """The rendered shell page, cut where each memory's id, title and article go.

    ``files``: what its pages share (:func:`shared`), to write into ``m/``;
    ``digest``: changes whenever the pages it makes would.
    """

    def __init__(self, html: str) -> None:
        if CONTENT_TOKEN not in html:
            raise ValueError("the memory page shell has no place for the article")
        html, self.files = shared(compact(html))
        self.digest = _digest(html)
        doctype = re.search(r"<!doctype[^>]*>\n?", html, re.IGNORECASE)
        at = doctype.end() if doctype else 0
        html = f"{html[:at]}<!--memsite-page {KEY_TOKEN}-->\n{html[at:]}"
        before, _, after = html.partition(CONTENT_TOKEN)
        self.before = before.split(ID_TOKEN)
        self.after = after.split(ID_TOKEN)

    def key(self, article_key: str) -> str:
        """The key of a page: its article's (:meth:`Article.key`) and this shell's."""
        return _digest(article_key + self.digest)

    def fill(self, memory_id: str, page_title: str, article: str, key: str) -> str:
        head = memory_id.join(self.before).replace(TITLE_TOKEN, page_title).replace(KEY_TOKEN, key)
        return head + article + memory_id.join(self.after)

    def write_files(self, site_dir: Path) -> None:
        """Write what the memory pages share into ``site_dir/m/``."""
        folder = site_dir / "m"
        folder.mkdir(parents=True, exist_ok=True)
        for name, content in self.files.items():
            (folder / name).unlink(missing_ok=True)  # (never written in place: it may be a served site's too)
            (folder / name).write_text(content, encoding="utf-8")


PAGES = ".memsite-pages.json"  # in a built site: memory id -> the key of its page (what it was made from)


def pages_made(site_dir: Path) -> dict[str, str] | None:
    """Memory id -> key of each memory page ``site_dir`` holds, as its build recorded them (None: no record)."""
    return _read_record(site_dir / PAGES)


def _read_record(path: Path) -> dict[str, str] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    pages = data.get("pages") if isinstance(data, dict) else None
    return pages if isinstance(pages, dict) else None


def record(site_dir: Path, keys: dict[str, str]) -> None:
    """Write what :func:`pages_made` reads: the key of every memory page of the site."""
    (site_dir / PAGES).write_text(json.dumps({"pages": dict(sorted(keys.items()))}, separators=(",", ":")),
                                  encoding="utf-8")


def reuse(previous: Path | None, site_dir: Path, keys: dict[str, str], shared: Collection[str] = ()) -> set[str]:
    """Put into ``site_dir/m/`` each memory page already made from what it would be made from now (its key,
    :meth:`Shell.key`); returns their ids. The others are left for :func:`write_all`.

    A build that starts from the spare (``output.Build``) finds the pages
    of the site before the served one set aside (``output.KEPT``): those
    whose key is right are kept where they are, those of the served site
    linked over them, pages of memories gone removed. Otherwise the served
    site's pages are linked in (``cp -al``: every folder made again, the
    slow way, once after each build that did not keep a spare). A page is
    linked, never copied or written in place: the same file in both sites.
    ``shared``: the files in ``m/`` the pages share, kept; any other file
    there (an older build's) is removed.
    """
    served = pages_made(previous) if previous is not None else None
    folder, kept = site_dir / "m", site_dir / KEPT["m"]
    have = _kept_record(site_dir)
    if not kept.is_dir() or have is None:
        discard(kept)
        have = {}
        if served and previous is not None and link_tree(previous / "m", kept):
            have = dict(served)
    if kept.is_dir():  # what the generator wrote into m/ joins the pages kept, which then take its place
        for entry in os.scandir(folder) if folder.is_dir() else ():
            discard(kept / entry.name)
            os.rename(entry.path, kept / entry.name)
        discard(folder)
        os.rename(kept, folder)
        for entry in os.scandir(folder):
            if entry.name not in keys and entry.name not in shared:
                discard(Path(entry.path))  # a memory gone, or a shared file of an older shell
    linked: set[str] = set()
    for memory_id, key in keys.items():
        if have.get(memory_id) == key:
            linked.add(memory_id)
            continue
        if not served or served.get(memory_id) != key or previous is None:
            continue
        page = folder / memory_id / "index.html"
        try:
            page.parent.mkdir(parents=True, exist_ok=True)
            page.unlink(missing_ok=True)
            os.link(previous / "m" / memory_id / "index.html", page)
        except FileNotFoundError:
            continue  # removed since it was read: written again
        except OSError as exc:
            if exc.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                return linked  # no links on this file system: the rest is written
            raise
        linked.add(memory_id)
    return linked


def _kept_record(site_dir: Path) -> dict[str, str] | None:
    """:func:`pages_made` of the spare a build started from (its record set aside with its pages)."""
    return _read_record(site_dir / KEPT[PAGES])


def write_all(site_dir: Path, shell: Shell, pages: Callable[[int, int], Iterator[tuple[str, str, str]]],
              count: int, keys: dict[str, str]) -> None:
    """Write the ``count`` memory pages; ``pages(part, parts)`` yields one share of them, ``keys`` their keys.

    Past a few thousand pages the share of each core is written by a forked
    process (rendering is Python: one process would use one core).

    Raises:
        MemsiteError: a process writing pages failed.
    """
    parts = min(os.cpu_count() or 1, 4) if count >= PARALLEL and hasattr(os, "fork") else 1
    if parts == 1:
        write(site_dir, shell, pages(0, 1), keys)
        return
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=write, args=(site_dir, shell, pages(n, parts), keys)) for n in range(parts)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    failed = [w.exitcode for w in workers if w.exitcode != 0]
    if failed:
        raise MemsiteError(f"writing the memory pages into {site_dir / 'm'} failed (exit {failed[0]}); "
                           "the messages above say why")


def write(site_dir: Path, shell: Shell, pages: Iterator[tuple[str, str, str]], keys: dict[str, str]) -> int:
    """Write ``site_dir/m/<id>/index.html`` for each (id, title, article); returns how many."""
    count = 0
    for memory_id, page_title, article in pages:
        folder = site_dir / "m" / memory_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "index.html").unlink(missing_ok=True)  # (never written in place: it may be a served site's too)
        (folder / "index.html").write_text(shell.fill(memory_id, text(page_title), article, keys[memory_id]),
                                           encoding="utf-8")
        count += 1
    return count


class Article:
    """One memory in full, as the HTML of its page's content."""

    def __init__(self, folders: dict[str, str], session_names: set[str], history: dict[str, list[tuple[Commit, str]]],
                 file_of: dict[str, str], repo_url: str, memories: dict[str, Scored] | None = None,
                 half_life_days: float = 30.0, origins: dict[str, object] | None = None) -> None:
        self.memories = memories or {}  # id -> every memory of the site: a chain is followed through them
        self.origins = origins or {}  # id -> what the memory was read from (Snapshot.origins)
        self.folders = folders
        self.session_names = session_names
        self.history = history
        self.file_of = file_of
        self.repo_url = repo_url
        self.half_life_days = half_life_days
        # What every article depends on besides its memory: a change to it changes every key.
        self.common = _digest(repr((version(), sorted(folders.items()), repo_url, half_life_days)))

    def key(self, scored: Scored) -> str:
        """What :meth:`render` makes of ``scored`` depends on this alone: equal keys, equal articles.

        The memory (recall counts too), its place, file and history, whether
        its session has a page, the memories of its chain, and the site's
        settings the article shows; never the build's time, so an unchanged
        memory's page stays the same file from one build to the next. The
        memory is named by what it was read from where that is known (a
        file unchanged since, as the parse cache knows it: cheaper than
        spelling out the memory), a commit by its id.
        """
        m = scored.memory
        changes = self.history.get(m.id, [])
        chain = self.chain(m)
        origin = self.origins.get(m.id)
        inputs = [self.common, repr(m) if origin is None else repr(origin), str(m.source in self.session_names),
                  str(self.file_of.get(m.id)), str(len(changes)), *(f"{c.sha} {action}" for c, action in
                                                                     changes[:HISTORY])]
        if len(chain) > 1:
            inputs.append(repr([(x.id, title(x), x.created, x.agent, x.valid_until) for x in chain]))
        return _digest("\0".join(inputs))

    def commit_link(self, commit: Commit) -> str:
        """A commit: on the hosted repository when ``repo_url`` is set, else the page of its day."""
        label = f"<code>{commit.sha[:10]}</code>"
        if self.repo_url:
            return f'<a href="{text(self.repo_url)}/commit/{commit.sha}">{label}</a>'
        return f'<a href="{up(f"days/{commit.when:%Y-%m-%d}.md")}">{label}</a>'

    def render(self, scored: Scored) -> str:
        """The article: where it sits, the abstract as its heading, the text, the facts, the history.

        The heading, id, overview and text are what search indexes
        (``data-pagefind-body``); the category is the result's label.
        """
        m = scored.memory
        folder = self.folders.get(m.category, m.category)
        month = f"{m.created:%Y-%m}"
        crumbs = (f'<nav class="memsite-crumbs" aria-label="Where this memory is">'
                  f'<a href="{up("memories/index.md")}">Memories</a> › '
                  f'<a href="{up(f"memories/{folder}/index.md")}">{text(m.category)}</a> › '
                  f'<a href="{up(f"memories/{folder}/{month}.md")}">created {month}</a></nav>')
        source = text(m.source) if m.source else "unknown"
        if m.source in self.session_names:
            source = f'<a href="{up(f"sessions/{m.source}.md")}">{text(m.source)}</a>'
        changes = self.history.get(m.id, [])
        facts = [("Category", f'<a href="{up(f"memories/{folder}/index.md")}">{text(m.category)}</a>'),
                 ("Agent", f'<a href="{up(f"agents/{m.agent}.md")}">{text(m.agent)}</a>'),
                 ("Created", f"{m.created:%Y-%m-%d %H:%M}"), ("Updated", f"{m.updated:%Y-%m-%d %H:%M}"),
                 ("Recalled", safe.plural(m.active_count, "time")
                  + (f", last {m.last_recalled:%Y-%m-%d}" if m.last_recalled else "")),
                 ("Score", (f"boost {scored.boost:.3f}, pinned: no decay" if m.pinned else
                            f"decay × boost {scored.boost:.3f}, the decay halving every {self.half_life_days:g} days "
                            f"from {m.created:%Y-%m-%d}") + f'; <a href="{up(f"memories/{folder}/index.md")}">its '
                  "category</a> ranks it by today's score"),
                 ("Source", source),
                 ("Tags", ", ".join(f'<span class="memsite-tag">{text(t)}</span>' for t in m.tags) or "none")]
        if changes:
            last = changes[0][0]
            facts.append(("Last change", f"{last.when:%Y-%m-%d %H:%M} by {text(last.author)}, "
                          f"{self.commit_link(last)}"))
        path = self.file_of.get(m.id)
        if self.repo_url and path:
            facts.append(("File", f'<a href="{text(self.repo_url)}/commits/HEAD/{text(path)}">'
                          f"<code>{text(path)}</code></a> ({safe.plural(len(changes), 'change')})"))
        elif path:
            facts.append(("File", f"<code>{text(path)}</code>"))
        dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
        items = "".join(
            f"<li>{c.when:%Y-%m-%d %H:%M} {text(action)} by {text(c.author)} in {self.commit_link(c)}: "
            f"{text(c.subject)}</li>" for c, action in changes[:HISTORY])
        overview = overview_of(m)
        content = m.content
        cut = ""
        if len(content) > MAX_TEXT:
            content = content[:MAX_TEXT]
            where = f" in <code>{text(path)}</code>" if path else ""
            cut = (f'<p class="memsite-cut">The text is cut here: it is {len(m.content):,} characters long; '
                   f"the whole text is{where} in the repository.</p>")
        if overview and " ".join(content[:2 * len(overview) + 100].split()).startswith(overview.rstrip(".…")):
            overview = ""  # the text opens with it: saying it twice helps nobody
        chain = self.chain(m)
        replaced = self.replaced(m, chain)
        label = f"{m.category} · superseded" if replaced else m.category  # the search result says so
        return (f'{crumbs}\n<article class="memsite-memory" data-pagefind-body '
                f'data-pagefind-meta="category:{text(label)}">\n'
                + replaced
                + f'<h1 id="{text(m.id)}" data-pagefind-meta="title">{text(title(m))}</h1>\n'
                f'<p class="memsite-id">id <code>{text(short_id(m.id))}</code> (<code>{text(m.id)}</code>)</p>\n'
                + (f'<p class="memsite-overview">{text(overview)}</p>\n' if overview else "")
                + f'<dl class="memsite-facts" data-pagefind-ignore>{dl}</dl>\n'
                f'<div class="memsite-body" data-pagefind-weight="2">{safe.body(content)}</div>\n{cut}'
                + self.chain_list(m, chain)
                + (f'<details class="memsite-history" id="history" data-pagefind-ignore>'
                   f"<summary>History ({safe.plural(len(changes), 'change')})</summary><ul>{items}</ul></details>\n"
                   if items else "") + "</article>")


    def chain(self, memory: Memory) -> list[Memory]:
        """The memories that replaced one another around ``memory``, oldest first (those on the site)."""
        if memory.supersedes is None and memory.superseded_by is None:
            return [memory]
        return chain(memory, self._get)

    def _get(self, mid: str) -> Memory:
        scored = self.memories.get(mid)
        if scored is None:
            raise NotFound(mid)
        return scored.memory

    def replaced(self, m: Memory, chain: list[Memory]) -> str:
        """The notice at the top of a memory that no longer holds, linking forward to what replaced it."""
        if m.valid_until is None:
            return ""
        at = [c.id for c in chain].index(m.id)
        after = chain[at + 1] if at + 1 < len(chain) else None
        newest = chain[-1]
        if after is None:
            return (f'<p class="memsite-superseded" data-pagefind-ignore><strong>No longer holds</strong> since '
                    f"{m.valid_until:%Y-%m-%d}.</p>\n")
        latest = ("" if newest.id == after.id
                  else f' The newest is <a href="../{text(newest.id)}/">{text(title(newest))}</a>.')
        return (f'<p class="memsite-superseded" data-pagefind-ignore><strong>Superseded</strong> on '
                f"{m.valid_until:%Y-%m-%d} by {text(after.agent)}: replaced by "
                f'<a href="../{text(after.id)}/">{text(title(after))}</a>.{latest}</p>\n')

    def chain_list(self, m: Memory, chain: list[Memory]) -> str:
        """The whole chain, oldest to newest: each memory, when and by whom written, when it was replaced."""
        if len(chain) < 2:
            return ""
        items = []
        for memory, after in zip(chain, [*chain[1:], None]):
            name = (f"<strong>{text(title(memory))}</strong>" if memory.id == m.id
                    else f'<a href="../{text(memory.id)}/">{text(title(memory))}</a>')
            line = f"{name}, {memory.created:%Y-%m-%d} by {text(memory.agent)}"
            if memory.valid_until is not None:
                line += f" → replaced on {memory.valid_until:%Y-%m-%d}" + (f" by {text(after.agent)}" if after else "")
            items.append(f"<li>{line}</li>")
        return (f'<section class="memsite-chain" data-pagefind-ignore><h2>How this fact changed</h2>'
                f'<ol>{"".join(items)}</ol></section>\n')


def overview_of(memory: Memory) -> str:
    """The overview (L1) on one line, or '' when it only repeats the abstract.

    Shown escaped as it is written (no Markdown run: it is one line, and lists
    show it for every memory).
    """
    overview = " ".join((memory.overview or "").split())
    return "" if overview.rstrip(".") == " ".join(memory.abstract.split()).rstrip(".") else overview
