"""Site search: a Pagefind index of the built site, searched through Material's own search box.

Material's built-in search loads one JSON index of the whole site into the
browser (6-7 MB at 10,000 memories, ~65 MB at 100,000). Pagefind writes a
chunked index next to the site; a query fetches the chunk its words fall in
and the fragments of the results shown. Material lets a site bring its own
search worker: ``theme/assets/memsite/search-worker.js`` answers Material's
worker messages with Pagefind, so the header box, its keyboard shortcuts and
the result list are Material's. What gets indexed is marked in the pages with
``data-pagefind-body`` (memories, sessions, skills, the world state).

Indexing 100,000 pages takes minutes, so a build does not index them all
again. The index of a whole site (``pagefind/``, the *main* one) is kept
from build to build with what it holds (``pagefind/memsite.json``: each
page's address and search key); each build indexes only the pages that are
new or changed since it into a small second index (``pagefind-delta/``),
and lists in ``pagefind-delta/memsite.json`` the pages the main index holds
in an older form or that are gone (``stale``; what the second index holds is
in ``memsite-pages.json`` beside it). The search worker asks both
and drops the main index's answers for stale pages. Once the second index
would hold more than ``delta_limit`` pages, the whole site is indexed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from ..foundation.errors import MemsiteError
from .output import KEPT, discard, link_tree, throw_away

WORKER = "assets/memsite/search-worker.js"
UNUSED = ("pagefind-ui.js", "pagefind-ui.css", "pagefind-modular-ui.js", "pagefind-modular-ui.css",
          "pagefind-component-ui.js", "pagefind-component-ui.css", "pagefind-highlight.js")
SEARCHED = ("sessions", "skills", "world")  # besides memory pages, the pages that mark content for search
_MATERIAL_WORKER = re.compile(r'("search":\s*"[^"]*?)assets/javascripts/workers/search\.[0-9a-f]+\.min\.js"')


def use_worker(html: str) -> str:
    """A page of the site with Material told to start memsite's search worker instead of its own."""
    return _MATERIAL_WORKER.sub(lambda m: m.group(1) + WORKER + '"', html, count=1)


def executable() -> str:
    """The Pagefind binary that ``pagefind[bin]`` installs (or one on PATH).

    Raises:
        MemsiteError: none is installed (the message says what to install).
    """
    try:
        from pagefind_bin import get_executable

        return str(get_executable())
    except (ImportError, FileNotFoundError):
        found = shutil.which("pagefind")
        if found:
            return found
    raise MemsiteError("the site's search needs Pagefind: pip install 'pagefind[bin]' (memsite depends on it)")


MAIN, DELTA, HOLDS, PAGES = "pagefind", "pagefind-delta", "memsite.json", "memsite-pages.json"
_SOURCE = ".memsite-delta-pages"  # (in the build's folder while the second index is made: links to its pages)


def delta_limit(pages: int) -> int:
    """Pages the second index may hold (new, changed or gone since the main one) before all are indexed again."""
    return max(50, min(2_000, pages // 10))


def index(site_dir: Path, memories: dict[str, str], previous: Path | None = None) -> str:
    """Write the site's search index: ``site_dir/pagefind/`` and ``site_dir/pagefind-delta/``.

    ``memories``: the address of each memory page and its search key
    (``memory_pages.search_key``); the other pages searched (``SEARCHED``)
    are keyed by their bytes. With ``previous`` (the site the build
    replaces), its main index is kept when few pages changed since it was
    written, and only those are indexed. Returns a line saying what was indexed.

    Raises:
        MemsiteError: Pagefind failed (its message).
    """
    pages = {**memories, **_other_pages(site_dir)}
    main = _main_index(site_dir, previous)
    if main is not None:
        held = main["pages"]
        fresh = {url: key for url, key in pages.items() if held.get(url) != key}
        stale = sorted(url for url, key in held.items() if pages.get(url) != key)
        if len(fresh) + len(stale) <= delta_limit(len(pages)):
            _write_delta(site_dir, fresh, stale, main["id"])
            return (f"{len(fresh)} new or changed pages indexed for search ({len(held)} kept from an earlier "
                    f"build's index, {len(stale)} of them left out of its results)")
    out = site_dir / MAIN
    if out.is_dir():
        throw_away(out, site_dir)
    glob = "{" + ",".join(["m/*/index.html", *(f"{folder}/**/*.html" for folder in SEARCHED)]) + "}"
    summary = _pagefind(site_dir, glob, out)
    held = json.dumps(dict(sorted(pages.items())), separators=(",", ":"))
    made = hashlib.sha256(held.encode("utf-8")).hexdigest()[:16]  # (the same pages indexed: the same index)
    (out / HOLDS).write_text(f'{{"id":"{made}","pages":{held}}}', encoding="utf-8")
    _write_delta(site_dir, {}, [], made)
    found = re.search(r"Indexed (\d+) pages?", summary)
    return f"{found.group(1) if found else 'some'} pages indexed for search"


def searchable(site_dir: Path) -> dict[str, str]:
    """What a search of the built ``site_dir`` finds: the address of each page and the search key of the form it
    is found in (the main index's pages less the stale ones, and the second index's)."""
    main = _holds(site_dir / MAIN)
    try:
        delta = json.loads((site_dir / DELTA / HOLDS).read_text(encoding="utf-8"))
        fresh = json.loads((site_dir / DELTA / PAGES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        delta, fresh = {}, {}
    found = dict(main["pages"]) if main else {}
    for url in delta.get("stale", []):
        found.pop(url, None)
    found.update(fresh)
    return found


def _pagefind(site_dir: Path, glob: str, out: Path) -> str:
    """Run Pagefind over the pages of ``site_dir`` that ``glob`` names, into ``out``; returns what it printed."""
    result = subprocess.run([executable(), "--site", str(site_dir), "--glob", glob, "--output-path", str(out),
                             "--force-language", "en"], capture_output=True, text=True)
    if result.returncode != 0:
        raise MemsiteError(f"Pagefind could not index {site_dir}: {(result.stderr or result.stdout).strip()[-2000:]}")
    for name in UNUSED:  # Pagefind's own user interfaces: the site searches through Material's
        (out / name).unlink(missing_ok=True)
    return result.stdout


def _write_delta(site_dir: Path, fresh: dict[str, str], stale: list[str], main: str) -> None:
    """``pagefind-delta/``: the index of the ``fresh`` pages (none: no index) and what the worker reads first."""
    out = site_dir / DELTA
    discard(out)
    if fresh:
        source = site_dir / _SOURCE
        discard(source)
        try:
            for url in fresh:
                rel = url.strip("/") + "/index.html" if url != "/" else "index.html"
                (source / rel).parent.mkdir(parents=True, exist_ok=True)
                os.link(site_dir / rel, source / rel)
            _pagefind(source, "**/*.html", out)
        finally:
            discard(source)
    out.mkdir(exist_ok=True)
    # What the search worker reads first (kept small: it is fetched with every first search), and what it holds.
    (out / HOLDS).write_text(json.dumps({"main": main, "stale": stale, "indexed": len(fresh)}, separators=(",", ":")),
                             encoding="utf-8")
    (out / PAGES).write_text(json.dumps(dict(sorted(fresh.items())), separators=(",", ":")), encoding="utf-8")


def _main_index(site_dir: Path, previous: Path | None) -> dict | None:
    """The main index of the site ``previous`` (its ``id`` and ``pages``), put in place in ``site_dir``: the one
    a recycled spare kept when it is the same, else linked from ``previous``; None when there is none to keep."""
    kept = site_dir / KEPT[MAIN]
    served = _holds(previous / MAIN) if previous is not None else None
    try:
        if previous is None or served is None:
            return None
        own = _holds(kept)
        if own is not None and own.get("id") == served["id"]:
            os.rename(kept, site_dir / MAIN)
        elif not link_tree(previous / MAIN, site_dir / MAIN):
            return None
        return served
    finally:
        if kept.is_dir():
            throw_away(kept, site_dir)


def _holds(folder: Path) -> dict | None:
    """What a main index says it holds (``id``, ``pages``), or None (no index there, or not one memsite wrote)."""
    try:
        data = json.loads((folder / HOLDS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not isinstance(data.get("pages"), dict):
        return None
    return data


def _other_pages(site_dir: Path) -> dict[str, str]:
    """The address of each page searched besides the memory pages, and a digest of its bytes."""
    found = {}
    for folder in SEARCHED:
        for path in sorted((site_dir / folder).glob("**/*.html")):
            data = path.read_bytes()
            if b"data-pagefind-body" in data:  # (the others are not indexed: Pagefind reads only marked pages)
                url = "/" + path.relative_to(site_dir).as_posix().removesuffix("index.html")
                found[url] = hashlib.sha256(data).hexdigest()[:12]
    return found

