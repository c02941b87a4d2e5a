"""memsite's MkDocs plugin: hands the pages memsite generated to a MkDocs (or ProperDocs) build.

A memory repository's ``mkdocs.yml`` names it (``plugins: {memsite: {...}}``,
the options being memsite's settings); repositories made before list
``hooks/memsite_hooks.py`` instead, whose hooks are this plugin's events
(``memsite.site.hooks``). The work is memsite's own (``generate``): the plugin
hands its pages to MkDocs in memory with ``File.generated`` (nothing is
written into docs_dir), takes the agent-written source files out of the build
(they reach the site only through the escaped, sanitized pages rendered from
them), and once MkDocs has written its pages calls ``generate.finish`` (memory
pages, redirects, the Pagefind index). Run by ``mkdocs build`` itself, it
also makes the build atomic (``output``): MkDocs writes into a fresh folder
that replaces the site only once whole.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.config import base
from mkdocs.config.config_options import BaseConfigOption
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File, Files, InclusionLevel

from ..features import site_guard
from ..foundation.config import DEPRECATED, LEGACY, PLUGIN, Config, check_settings, parse_config, settings_of, top_level
from ..foundation.errors import MemsiteError
from . import output, search
from .generate import CSS_URI, THEME, Generated, finish, generate, is_source
from .problems import SRC

log = logging.getLogger("mkdocs.plugins.memsite")


class _Setting(BaseConfigOption):
    """A name under the plugin's options (a setting, or a section of them).

    Declared in ``memsite.foundation.config.Config``."""


class _Options(base.Config):
    def validate(self) -> tuple[list[tuple[str, Exception]], list[tuple[str, str]]]:
        """Check every setting at once, as ``memsite.foundation.config.load_config`` does.

        (MkDocs' own check stops at the first.)

        An unknown name is a problem too, not only a warning: the Python API
        would refuse to open the repository with it.
        """
        _, problems = check_settings({key: value for key, value in self.items() if value is not None})
        return [(key, base.ValidationError(message)) for key, message in problems], []


# The plugin's options: memsite's settings as memsite.foundation.config.Config declares them (unset: Config's default).
MemsiteOptions: type[_Options] = type("MemsiteOptions", (_Options,), {name: _Setting() for name in top_level()})


class MemsitePlugin(BasePlugin[_Options]):
    """Renders a memory repository as its website; each build's state is on the instance, reset in on_config.

    ``from_hooks``: run as the hooks of ``hooks/memsite_hooks.py`` (a
    repository made before the plugin), reading the settings from
    ``extra.memsite``.
    """

    config_class = MemsiteOptions

    def __init__(self, *, from_hooks: bool = False) -> None:
        self.from_hooks = from_hooks
        self.settings: Config | None = None
        self.generated: Generated | None = None
        self.default_nav = False
        self.command: str | None = None  # what the mkdocs command line runs (None: called from Python)
        self.build: output.Build | None = None
        self.whole = False  # the build's folder holds the whole site (on_post_build ran to its end)

    def on_startup(self, *, command: str, dirty: bool) -> None:
        """Note whether ``mkdocs build`` runs: only then does the plugin make the build atomic itself."""
        self.command = command

    def on_config(self, config: Any) -> Any:
        """Read memsite's settings, forget the last build (``mkdocs serve`` builds again), set the site's defaults."""
        self._forget()
        self.generated, self.default_nav, self.build, self.whole = None, False, None, False
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
            # After the site's own overrides and Material's: adds, replaces nothing.
            config.theme.dirs.append(str(THEME))
        if CSS_URI not in config.extra_css:
            config.extra_css.append(CSS_URI)
        if not config.nav:
            self.default_nav = True
            config.nav = default_nav(self.settings)
        if self.command == "build" and not output.is_build_folder(Path(config.site_dir)):
            commit, erased = output.rewritten(root, Path(config.site_dir))
            self.build = output.Build(Path(config.site_dir), "mkdocs", commit=commit, erased=erased)
            try:
                config.site_dir = str(self.build.begin())
            except MemsiteError as exc:
                raise PluginError(str(exc)) from None
            for note in self.build.notes:
                log.info(note)  # news, not a warning: --strict does not fail on it
        return config

    def on_pre_build(self, config: Any) -> None:
        """Refuse a folder link out of the repository before MkDocs walks docs_dir (it follows every link).

        A link to a file outside is only listed by that walk, and ``on_files``
        leaves it out; a link to a folder would be walked through, be it
        ``/``, and a link to a folder holding it would be walked round and round.
        """
        root = Path(config.config_file_path).parent
        refused = [f"{rel}: a symlink to {os.readlink(root / rel)}, {why}; remove the link (the site build "
                   "would walk it)" for rel, why in site_guard.folder_links(Path(config.docs_dir), root)]
        if refused:
            raise PluginError("\n".join(refused))

    def on_files(self, files: Files, config: Any) -> Files:
        """Replace the agent-written sources with the generated pages (kept out of the nav check: no "not in nav")."""
        root, settings = Path(config.config_file_path).parent, self.settings
        assert settings is not None  # set in on_config
        try:
            generated = generate(root, Path(config.docs_dir), settings, config.site_name, config.repo_url)
        except MemsiteError as exc:
            raise PluginError(str(exc)) from None
        for problem in generated.snap.problems:
            log.warning("skipped %s", problem)  # --strict fails on it
        if SRC in generated.pages and self.default_nav:
            config.nav.append({"Problems": SRC})
        self.generated = generated
        docs_dir = os.path.abspath(config.docs_dir) + os.sep
        links: set[str] = set()
        for file in list(files):
            uri = file.src_uri
            if is_source(uri) or uri in generated.pages:
                files.remove(file)
            elif (file.abs_src_path and file.abs_src_path.startswith(docs_dir)
                  and site_guard.escapes(file.abs_src_path, root)):
                links.add(os.path.relpath(file.abs_src_path, root))  # a link to a file outside: never copied
                files.remove(file)
        for rel in sorted(links):
            target = os.readlink(root / rel) if os.path.islink(root / rel) else "?"
            log.warning("%s: skipped: a symlink to %s, outside the repository (it would publish that file)",
                        rel, target)
        for uri, text in generated.pages.items():
            files.append(File.generated(config, uri, content=text, inclusion=InclusionLevel.NOT_IN_NAV))
        return files

    def on_page_content(self, html: str, page: Any, config: Any, files: Files) -> str:
        """Put the finished HTML of the generated pages in place of their placeholders."""
        return self.generated.fill(html) if self.generated else html

    def on_post_page(self, output: str, page: Any, config: Any) -> str:
        """Point Material's search box at memsite's search worker (Pagefind) instead of its own."""
        return search.use_worker(output)

    def on_post_build(self, config: Any) -> None:
        """Memory pages, redirects and the search index (``generate.finish``): the build's folder is then whole."""
        try:
            finish(Path(config.site_dir), self.generated, sitemap=bool(config.site_url), log=log.info)
        except MemsiteError as exc:
            raise PluginError(str(exc)) from None
        self.whole = True

    def on_build_error(self, error: Exception) -> None:
        """A failed ``mkdocs build`` (``--strict`` failing on a warning too) leaves the site as it was."""
        self.whole = False
        self._forget()
        if self.build is not None:
            self.build.abort(interrupted=False)
            self.build = None

    def _forget(self) -> None:
        """Stop what the last build still works out beside it (``generate.Beside``)."""
        if self.generated is not None and self.generated.beside is not None:
            self.generated.beside.close()

    def on_shutdown(self) -> None:
        """The end of ``mkdocs build``: the finished site goes in place; one stopped by Ctrl-C leaves the old one.

        Not in ``on_post_build``: ``--strict`` fails a build after it.
        """
        if self.build is not None:
            if self.whole:
                self.build.finish()
            else:
                self.build.abort(interrupted=True)
            self.build = None


@contextlib.contextmanager
def files_without_memories() -> Iterator[None]:
    """While in it, a MkDocs build lists docs_dir without the memory files (``memories/``, ``archive/``).

    MkDocs makes a ``File`` of every file under docs_dir before any plugin
    sees them (a build's largest cost after Pagefind at 100,000 memories,
    docs/benchmarks.md), which :meth:`MemsitePlugin.on_files` then takes
    out (they reach the site only through the pages rendered from them).
    ``memsite build`` lists the same files without walking those folders; a
    plain ``mkdocs build`` still walks them.
    """
    import mkdocs.commands.build as mkdocs_build
    from mkdocs.structure.files import get_files

    def listed(config: Any) -> Files:
        real = os.walk

        def walk(top: str, *args: Any, **kwargs: Any) -> Iterator[tuple[str, list[str], list[str]]]:
            for folder, dirnames, filenames in real(top, *args, **kwargs):
                if folder == top:  # docs_dir itself
                    dirnames[:] = [d for d in dirnames if f"{d}/" not in MEMORY_FOLDERS]
                yield folder, dirnames, filenames

        os.walk = walk  # type: ignore[assignment]  # (get_files' own walk: MkDocs 1.6 has no way to prune it)
        try:
            return get_files(config)
        finally:
            os.walk = real

    mkdocs_build.get_files = listed
    try:
        yield
    finally:
        mkdocs_build.get_files = get_files


MEMORY_FOLDERS = ("memories/", "archive/")  # under docs_dir: the agent-written sources there are in thousands


def default_nav(settings: Config) -> list[dict[str, Any]]:
    """The navigation of a site whose mkdocs.yml gives none."""
    return [
        {"This week": "index.md"},
        {"Memories": [{"All categories": "memories/index.md"},
                      *[{c.name: f"memories/{c.folder}/index.md"} for c in settings.categories]]},
        {"Rankings": "rankings.md"}, {"Weeks": "weeks/index.md"}, {"Days": "days/index.md"},
        {"Skills": "skills.md"}, {"World state": "world.md"}, {"Sessions": "sessions/index.md"},
        {"Agents": "agents/index.md"},
    ]


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
