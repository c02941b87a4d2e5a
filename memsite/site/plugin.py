"""memsite's MkDocs plugin: adds the memory site's pages to a build (the only module that knows MkDocs).

A memory repository's ``mkdocs.yml`` names it (``plugins: {memsite: {...}}``,
the options being memsite's settings); repositories made before list
``hooks/memsite_hooks.py`` instead, whose hooks are this plugin's events
(``memsite.site.hooks``). Pages are generated in memory with
``File.generated``; nothing is written into docs_dir. The agent-written source
files (memories, sessions, notes, world state) are taken out of the build:
they reach the site only through the escaped, sanitized pages rendered from
them. After MkDocs has written its pages, each memory gets its own
(``memory_pages``) and Pagefind indexes the site for the search box
(``search``).
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

from mkdocs.config import base
from mkdocs.config.config_options import BaseConfigOption
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File, Files

from .. import history
from ..config import DEPRECATED, LEGACY, PLUGIN, Config, check_settings, parse_config, settings_of, top_level
from ..errors import MemsiteError
from ..model import utcnow
from ..store.activity import pending_counts
from ..store.problems import read_memory
from . import guard, memory_pages, search, weeks
from .pages import Site
from .problems import SRC, problem_pages
from .snapshot import Snapshot, load

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

log = logging.getLogger("mkdocs.plugins.memsite")
_PLACEHOLDER = re.compile(r"<!--memsite-html (\d+)-->")


class _Setting(BaseConfigOption):
    """A name under the plugin's options (a setting, or a section of them): declared in ``memsite.config.Config``."""


class _Options(base.Config):
    def validate(self) -> tuple[list[tuple[str, Exception]], list[tuple[str, str]]]:
        """Check every setting at once, as ``memsite.config.load_config`` does (MkDocs' own check stops at the first).

        An unknown name is a problem too, not only a warning: the Python API
        would refuse to open the repository with it.
        """
        _, problems = check_settings({key: value for key, value in self.items() if value is not None})
        return [(key, base.ValidationError(message)) for key, message in problems], []


# The plugin's options: memsite's settings as memsite.config.Config declares them (unset: Config's default).
MemsiteOptions: type[base.Config] = type("MemsiteOptions", (_Options,), {name: _Setting() for name in top_level()})


class MemsitePlugin(BasePlugin[MemsiteOptions]):  # type: ignore[valid-type]
    """Renders a memory repository as its website; each build's state is on the instance, reset in on_config.

    ``from_hooks``: run as the hooks of ``hooks/memsite_hooks.py`` (a
    repository made before the plugin), reading the settings from
    ``extra.memsite``.
    """

    config_class = MemsiteOptions

    def __init__(self, *, from_hooks: bool = False) -> None:
        self.from_hooks = from_hooks
        self.settings: Config | None = None
        self.site: Site | None = None
        self.default_nav = False

    def on_config(self, config: Any) -> Any:
        """Read memsite's settings, forget the last build (``mkdocs serve`` builds again), set the site's defaults."""
        self.site, self.default_nav = None, False
        if self.from_hooks and PLUGIN in config.plugins:
            raise PluginError(f"{config.config_file_path}: names memsite in plugins and in hooks; "
                              "remove hooks/memsite_hooks.py from hooks")
        root = Path(config.config_file_path).parent
        docs_dir = Path(config.docs_dir)
        try:
            relative = docs_dir.resolve().relative_to(root.resolve()).as_posix()
            options = {} if self.from_hooks else {k: v for k, v in self.config.items() if v is not None}
            settings, prefix = settings_of(options, dict(config.extra or {}).get("memsite"),
                                           str(config.config_file_path))
            self.settings = parse_config(settings, docs_dir=relative, where=str(config.config_file_path),
                                         prefix=prefix)
        except (ValueError, MemsiteError) as exc:
            raise PluginError(str(exc)) from None
        if prefix == LEGACY:
            log.info(DEPRECATED)
        config.theme["font"] = False  # Material would fetch Google Fonts: the site asks no other host
        quiet_material_search(config)
        if str(THEME) not in config.theme.dirs:
            config.theme.dirs.append(str(THEME))  # after the site's own overrides and Material's: adds, replaces nothing
        if CSS_URI not in config.extra_css:
            config.extra_css.append(CSS_URI)
        if not config.nav:
            self.default_nav = True
            config.nav = [
                {"This week": "index.md"},
                {"Memories": [{"All categories": "memories/index.md"},
                              *[{c.name: f"memories/{c.folder}/index.md"} for c in self.settings.categories]]},
                {"Rankings": "rankings.md"}, {"Weeks": "weeks/index.md"}, {"Days": "days/index.md"},
                {"Skills": "skills.md"}, {"World state": "world.md"}, {"Sessions": "sessions/index.md"},
                {"Agents": "agents/index.md"},
            ]
        return config

    def on_pre_build(self, config: Any) -> None:
        """Refuse a folder link out of the repository before MkDocs walks docs_dir (it follows every link).

        A link to a file outside is only listed by that walk, and ``on_files``
        leaves it out; a link to a folder would be walked through, be it
        ``/``, and a link to a folder holding it would be walked round and round.
        """
        root = Path(config.config_file_path).parent
        refused = [f"{rel}: a symlink to {os.readlink(root / rel)}, {why}; remove the link (the site build "
                   "would walk it)" for rel, why in guard.folder_links(Path(config.docs_dir), root)]
        if refused:
            raise PluginError("\n".join(refused))

    def on_files(self, files: Files, config: Any) -> Files:
        """Replace the agent-written sources with the generated pages."""
        root, settings = Path(config.config_file_path).parent, self.settings
        assert settings is not None  # set in on_config
        try:
            snap = load(Path(config.docs_dir), settings, build_time(), pending_counts(root))
            commits = history.read(root, "HEAD", settings.content_dir)

            def read(path: str, data: bytes):  # noqa: ANN202 (a memory file as it was, or None)
                return read_memory(settings, path, path.removeprefix(settings.memories_dir + "/"), data)

            site = Site(snap, config.site_name, commits, config.repo_url,
                        gone=weeks.gone_memories(root, commits, settings.memories_dir, read),
                        world_at=weeks.world_history(root, commits, settings.world_path),
                        world_conflicts=history.world_conflicts(root))
            pages = site.pages()
        except MemsiteError as exc:
            raise PluginError(str(exc)) from None
        self.add_problems(snap, pages, config)
        self.site = site
        docs_dir = os.path.abspath(config.docs_dir) + os.sep
        links: set[str] = set()
        for file in list(files):
            uri = file.src_uri
            if uri.startswith(SOURCES) or uri == "world_state.md" or uri in pages or uri == CSS_URI:
                files.remove(file)
            elif file.abs_src_path and file.abs_src_path.startswith(docs_dir) and guard.escapes(file.abs_src_path, root):
                links.add(os.path.relpath(file.abs_src_path, root))  # a link to a file outside: never copied
                files.remove(file)
        for rel in sorted(links):
            log.warning(f"{rel}: skipped: a symlink to {os.readlink(root / rel) if os.path.islink(root / rel) else '?'}"
                        ", outside the repository (it would publish that file)")
        for uri, text in pages.items():
            files.append(File.generated(config, uri, content=text))
        files.append(File.generated(config, CSS_URI, content=CSS))
        return files

    def add_problems(self, snap: Snapshot, pages: dict[str, str], config: Any) -> None:
        """Warn about each file left out (``--strict`` fails on it) and list them on a problems page."""
        for problem in snap.problems:
            log.warning(f"skipped {problem}")
        extra = problem_pages(snap)
        pages.update(extra)
        if extra and self.default_nav:
            config.nav.append({"Problems": SRC})

    def on_page_content(self, html: str, page: Any, config: Any, files: Files) -> str:
        """Put the finished HTML of the generated pages in place of their placeholders."""
        chunks = self.site.chunks if self.site else None
        if not chunks or "<!--memsite-html " not in html:
            return html
        return _PLACEHOLDER.sub(lambda m: chunks[int(m.group(1))], html)

    def on_post_page(self, output: str, page: Any, config: Any) -> str:
        """Point Material's search box at memsite's search worker (Pagefind) instead of its own."""
        return search.use_worker(output)

    def on_post_build(self, config: Any) -> None:
        """Write every memory's page into the shell MkDocs rendered, then index the site for search.

        Also drops the sitemap MkDocs writes empty when there is no ``site_url``
        (a sitemap needs full URLs).
        """
        site_dir, site = Path(config.site_dir), self.site
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


def build_time() -> datetime:
    """Now, or ``SOURCE_DATE_EPOCH`` for a reproducible build."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), tz=timezone.utc)
    return utcnow()
