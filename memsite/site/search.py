"""Site search: a Pagefind index of the built site, searched through Material's own search box.

Material's built-in search loads one JSON index of the whole site into the
browser (6-7 MB at 10,000 memories, ~65 MB at 100,000). Pagefind writes a
chunked index next to the site; a query fetches the chunk its words fall in
and the fragments of the results shown. Material lets a site bring its own
search worker: ``theme/assets/memsite/search-worker.js`` answers Material's
worker messages with Pagefind, so the header box, its keyboard shortcuts and
the result list are Material's. What gets indexed is marked in the pages with
``data-pagefind-body`` (memories, sessions, skills, the world state).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from ..foundation.errors import MemsiteError

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


def index(site_dir: Path) -> str:
    """Write ``site_dir/pagefind/``: the index of every element marked ``data-pagefind-body``.

    Only the pages that mark any are read: the memory pages and the few
    ``SEARCHED`` ones. Returns Pagefind's summary line (pages indexed).

    Raises:
        MemsiteError: Pagefind failed (its message).
    """
    out = site_dir / "pagefind"
    shutil.rmtree(out, ignore_errors=True)
    glob = "{" + ",".join(["m/*/index.html", *(f"{folder}/**/*.html" for folder in SEARCHED)]) + "}"
    result = subprocess.run([executable(), "--site", str(site_dir), "--glob", glob, "--output-path", str(out),
                             "--force-language", "en"], capture_output=True, text=True)
    if result.returncode != 0:
        raise MemsiteError(f"Pagefind could not index {site_dir}: {(result.stderr or result.stdout).strip()[-2000:]}")
    for name in UNUSED:  # Pagefind's own user interfaces: the site searches through Material's
        (out / name).unlink(missing_ok=True)
    found = re.search(r"Indexed (\d+) pages?", result.stdout)
    return f"{found.group(1) if found else 'some'} pages indexed for search"
