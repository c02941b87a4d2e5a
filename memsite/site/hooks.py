"""MkDocs hooks: add the memory site's pages to a build (the only module that knows MkDocs).

A memory repository's ``mkdocs.yml`` lists ``hooks/memsite_hooks.py``, which
imports these. Pages are generated in memory with ``File.generated``; nothing
is written into docs_dir. The agent-written source files (memories, sessions,
notes, world state) are taken out of the build: they reach the site only
through the escaped, sanitized pages rendered from them. After MkDocs has
written its pages, each memory gets its own (``memory_pages``) and Pagefind
indexes the site for the search box (``search``).
"""

from __future__ import annotations

import gzip
import logging
import os
import re
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import mkdocs.commands.build
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files, set_exclusions

from .. import history
from ..config import parse_config
from ..errors import MemsiteError
from ..model import utcnow
from ..store.activity import pending_counts
from ..store.problems import read_memory
from . import guard, memory_pages, search, weeks
from .pages import Site
from .problems import SRC, problem_pages
from .snapshot import Snapshot, load

__all__ = ["on_config", "on_files", "on_page_content", "on_post_page", "on_post_build"]
THEME = Path(__file__).parent / "theme"  # the memory page's template and the search worker

CSS_URI = "assets/memsite.css"
SOURCES = ("memories/", "archive/", "sessions/", "notes/")
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
.md-typeset div:is(.memsite-rank,.memsite-who,.memsite-world) table:not([class]) :is(th,td){min-width:0;padding:.5em .6em}
.md-typeset .memsite-rank table:not([class]) :is(td,th):first-child{width:1%;padding-right:0}
.md-typeset .memsite-rank .memsite-meta{font-size:.9em}
.md-typeset .memsite-num{text-align:right;white-space:nowrap}
.md-typeset .memsite-key code{overflow-wrap:normal;word-break:normal}
.md-typeset .memsite-world td{overflow-wrap:anywhere}
.md-typeset .memsite-formula code{white-space:pre-wrap}
"""

_state: dict[str, Any] = {}
log = logging.getLogger("mkdocs.plugins.memsite")
_PLACEHOLDER = re.compile(r"<!--memsite-html (\d+)-->")


def on_config(config: Any) -> Any:
    """Reset per-build state (MkDocs imports a hook once per process) and set the site's defaults."""
    _state.clear()
    mkdocs.commands.build.get_files = guarded_files  # the walk of docs_dir comes after on_config
    root = Path(config.config_file_path).parent
    docs_dir = Path(config.docs_dir)
    try:
        relative = docs_dir.resolve().relative_to(root.resolve()).as_posix()
        settings = (config.extra or {}).get("memsite", {})
        _state["config"] = parse_config(settings, docs_dir=relative, where=str(config.config_file_path))
    except (ValueError, MemsiteError) as exc:
        raise PluginError(str(exc)) from None
    config.theme["font"] = False  # Material would fetch Google Fonts: the site asks no other host
    quiet_material_search(config)
    if str(THEME) not in config.theme.dirs:
        config.theme.dirs.append(str(THEME))  # after the site's own overrides and Material's: adds, replaces nothing
    if CSS_URI not in config.extra_css:
        config.extra_css.append(CSS_URI)
    if not config.nav:
        _state["default_nav"] = True
        memsite = _state["config"]
        config.nav = [
            {"This week": "index.md"},
            {"Memories": [{"All categories": "memories/index.md"},
                          *[{c.name: f"memories/{c.folder}/index.md"} for c in memsite.categories]]},
            {"Rankings": "rankings.md"}, {"Weeks": "weeks/index.md"}, {"Days": "days/index.md"},
            {"Skills": "skills.md"}, {"World state": "world.md"}, {"Sessions": "sessions/index.md"},
            {"Agents": "agents/index.md"},
        ]
    return config


def quiet_material_search(config: Any) -> None:
    """Keep Material's search plugin for its search box, but stop it indexing every page: Pagefind searches.

    Its ``on_page_context`` reads each page's HTML into its JSON index (the
    part that grows with the site); without it the plugin writes an index of
    no documents, which Material's search box still fetches and Pagefind
    answers for.
    """
    events = config.plugins.events["page_context"]
    events[:] = [e for e in events if not type(getattr(e, "__self__", None)).__module__.startswith(
        "material.plugins.search")]


def on_files(files: Files, config: Any) -> Files:
    """Replace the agent-written sources with the generated pages."""
    root, settings = Path(config.config_file_path).parent, _state["config"]
    try:
        snap = load(Path(config.docs_dir), settings, build_time(), pending_counts(root))
        commits = history.read(root, "HEAD", settings.content_dir)

        def read(path: str, data: bytes):  # noqa: ANN202 (a memory file as it was, or None)
            return read_memory(settings, path, path.removeprefix(settings.memories_dir + "/"), data)

        site = Site(snap, config.site_name, commits, config.repo_url,
                    gone=weeks.gone_memories(root, commits, settings.memories_dir, read),
                    world_at=weeks.world_history(root, commits, settings.world_path))
        pages = site.pages()
    except MemsiteError as exc:
        raise PluginError(str(exc)) from None
    add_problems(snap, pages, config)
    _state["chunks"] = site.chunks
    _state["site"] = site
    for file in list(files):
        uri = file.src_uri
        if uri.startswith(SOURCES) or uri == "world_state.md" or uri in pages or uri == CSS_URI:
            files.remove(file)
    root, docs_dir = Path(config.config_file_path).parent, os.path.abspath(config.docs_dir) + os.sep
    for file in list(files):  # should the walk not have been guarded_files: nothing from outside is copied
        source = file.abs_src_path
        if source and os.path.abspath(source).startswith(docs_dir) and guard.escapes(source, root):
            log.warning(f"{os.path.relpath(source, root)}: skipped: it leads out of the repository")
            files.remove(file)
    for uri, text in pages.items():
        files.append(File.generated(config, uri, content=text))
    files.append(File.generated(config, CSS_URI, content=CSS))
    return files


def add_problems(snap: Snapshot, pages: dict[str, str], config: Any) -> None:
    """Warn about each file left out (``--strict`` fails on it) and list them on a problems page."""
    for problem in snap.problems:
        log.warning(f"skipped {problem}")
    extra = problem_pages(snap)
    pages.update(extra)
    if extra and _state.get("default_nav"):
        config.nav.append({"Problems": SRC})


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    """Put the finished HTML of the generated pages in place of their placeholders."""
    chunks = _state.get("chunks")
    if not chunks or "<!--memsite-html " not in html:
        return html
    return _PLACEHOLDER.sub(lambda m: chunks[int(m.group(1))], html)


def on_post_page(output: str, page: Any, config: Any) -> str:
    """Point Material's search box at memsite's search worker (Pagefind) instead of its own."""
    return search.use_worker(output)


def on_post_build(config: Any) -> None:
    """Write every memory's page into the shell MkDocs rendered, then index the site for search.

    Also drops the sitemap MkDocs writes empty when there is no ``site_url``
    (a sitemap needs full URLs).
    """
    site_dir = Path(config.site_dir)
    site: Site | None = _state.get("site")
    shell_dir = site_dir / memory_pages.SHELL_SRC.removesuffix(".md")
    lean = tempfile.mkdtemp(prefix="memsite-search-")
    try:
        if site is not None and (shell_dir / "index.html").is_file():
            shell = memory_pages.Shell((shell_dir / "index.html").read_text(encoding="utf-8"))
            (shell_dir / "index.html").unlink()
            shell_dir.rmdir()
            memory_pages.write_all(site_dir, shell, site.articles, len(site.snap.memories), Path(lean))
            log.info(f"{len(site.snap.memories)} memory pages written")
        _drop_shell_from_sitemap(site_dir)
        try:
            log.info(search.index(site_dir, Path(lean)))
        except MemsiteError as exc:
            raise PluginError(str(exc)) from None
    finally:
        remove_later(Path(lean))
    if config.site_url:
        return
    for name in ("sitemap.xml", "sitemap.xml.gz"):
        path = site_dir / name
        if path.is_file():
            path.unlink()
    log.info("no sitemap.xml: set site_url in mkdocs.yml to get one")


def remove_later(folder: Path) -> None:
    """Remove ``folder`` in a process of its own that the build does not wait for.

    It holds a copy of every memory page (100,000 files at scale): removing
    them took a quarter of the build.
    """
    subprocess.Popen([sys.executable, "-c", "import shutil, sys; shutil.rmtree(sys.argv[1], ignore_errors=True)",
                      str(folder)], start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)


def _drop_shell_from_sitemap(site_dir: Path) -> None:
    """The memory page shell is no page of the site: take it out of the sitemap MkDocs wrote."""
    sitemap = site_dir / "sitemap.xml"
    if not sitemap.is_file():
        return
    xml = sitemap.read_text(encoding="utf-8")
    cleaned = re.sub(r"\s*<url>(?:(?!</url>).)*" + memory_pages.ID_TOKEN + r".*?</url>", "", xml, flags=re.S)
    if cleaned != xml:
        sitemap.write_text(cleaned, encoding="utf-8")
        with gzip.GzipFile(site_dir / "sitemap.xml.gz", "wb", mtime=0) as packed:
            packed.write(cleaned.encode("utf-8"))


def guarded_files(config: Any) -> Files:
    """MkDocs' ``get_files`` (1.6.1) walking docs_dir with :func:`guard.safe_walk`.

    MkDocs follows every symlink under docs_dir and copies what it finds; this
    walk never enters or lists a link leading out of the repository, and
    warns once for each one it leaves out. The rest is MkDocs' own logic:
    files in sorted order, index before README, README dropped beside an index.
    """
    docs_dir, root = config.docs_dir, Path(config.config_file_path).parent
    refused: list[str] = []
    files: list[File] = []
    conflicts: list[tuple[File, File]] = []
    for folder, dirnames, filenames in guard.safe_walk(Path(docs_dir), root, refused):
        relative = os.path.relpath(folder, docs_dir)
        dirnames.sort()
        filenames.sort(key=lambda name: (os.path.splitext(name)[0] not in ("index", "README"), name))
        by_dest: dict[str, File] = {}
        for name in filenames:
            file = File(os.path.join(relative, name), docs_dir, config.site_dir, config.use_directory_urls)
            first = by_dest.setdefault(file.dest_uri, file)
            if first is not file:
                conflicts.append((first, file))
            files.append(file)
    for rel in refused:
        log.warning(f"{rel}: skipped: a symlink to {os.readlink(root / rel)}, outside the repository "
                    "(it would publish that file or folder)")
    set_exclusions(files, config)
    for a, b in conflicts:
        loser = a if b.inclusion.is_included() else b
        if loser in files:
            files.remove(loser)
    return Files(files)


def build_time() -> datetime:
    """Now, or ``SOURCE_DATE_EPOCH`` for a reproducible build."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), tz=timezone.utc)
    return utcnow()
