"""What ``memsite init`` writes into a new memory repository."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import yaml

from . import workflows, world
from .config import DEFAULT_CATEGORIES, plugin_options, read_mkdocs_yml
from .errors import MemsiteError, RepositoryError
from .git import Git
from .merge import gitattributes

INIT_AGENT = "memsite"


def mkdocs_yml(site_name: str = "Agent memory") -> str:
    """The settings file of a new memory repository (site + memsite)."""
    lines = [
        f"site_name: {site_name}",
        "docs_dir: content",
        "theme:",
        "  name: material",
        "  font: false        # no web fonts: the site asks no other host for anything",
        "  palette:          # light or dark, as the reader's system is; the header toggles it",
        "    - media: '(prefers-color-scheme: light)'",
        "      scheme: default",
        "      toggle: {icon: material/brightness-7, name: Switch to dark mode}",
        "    - media: '(prefers-color-scheme: dark)'",
        "      scheme: slate",
        "      toggle: {icon: material/brightness-4, name: Switch to light mode}",
        "  features:",
        "    - navigation.sections",
        "    - search.highlight",
        "plugins:",
        "  search:           # Material's search box; memsite answers it from a Pagefind index",
        "  # memsite turns the memory files into the site's pages; its settings (memsite.config.Config):",
        "  memsite:",
        "    # What builds the site (memsite build): mkdocs, properdocs or zensical (pip install 'memsite[zensical]').",
        "    engine: mkdocs",
        "    # Largest memory text accepted, in bytes.",
        "    max_memory_bytes: 65536",
        "    # What trimming does: archive (move to content/archive/) or delete (kept in git history).",
        "    trim: archive",
        "    decay:",
        "      half_life_days: 30   # a memory not recalled loses half its score in 30 days",
        "      active_weight: 0.1   # boost = 1 + active_weight * ln(1 + recalls)",
        "    # Lines of core memory an agent loads at start.",
        "    auto_load_lines: 200",
        "    # remember() skips exact duplicates and merges near-duplicates (word pairs in common).",
        "    dedupe: {enabled: true, threshold: 0.8}",
        "    # Recalls are journaled in .memsite/ and their counts committed in batches of this size.",
        "    activity: {flush_every: 500}",
        "    # Memory files in one folder: a month's are in numbered folders (001/, 002/, ...) of this many.",
        "    segment_size: 500",
        "    # Categories: the folder under content/memories/ (a folder per month in it), the names routed to it,",
        "    # and optional capacity marks. A category without marks is unbounded. Marks trim",
        "    # the lowest-ranked (oldest, least recalled) unpinned memories, in the same commit",
        "    # as the write that overflowed, once a measure passes 'high', down to 'low':",
        "    #   capacity:",
        "    #     lines: {high: 500, low: 400}     # lines of memory text",
        "    #     entries: {high: 200, low: 150}   # number of memories",
        "    categories:",
    ]
    for category in DEFAULT_CATEGORIES:
        lines += [
            f"      {category.name}:",
            f"        description: {_flow(category.description)}",
            f"        aliases: {_flow(list(category.aliases))}",
        ]
        if category.name == "cases":
            lines.append("        # capacity: {lines: {high: 500, low: 400}}")
    return "\n".join(lines) + "\n"


def _flow(value: object) -> str:
    """``value`` as one line of YAML, quoted where YAML needs it."""
    return yaml.safe_dump(value, default_flow_style=True, width=1_000_000).strip().removesuffix("...").strip()


INDEX_MD = """\
# Agent memory

What the agents working in this repository have learned. Each memory is a
Markdown file under `memories/<category>/<YYYY-MM>/<NNN>/` (the month it
was created, then numbered folders of a few hundred), written through
memsite's API; every change is a git commit by the agent that made it.
"""

GITIGNORE = """\
# memsite's derived state (catalog, search index, locks, checkpoints): rebuilt from git
.memsite/
# the built site, a build under way, and an old site being removed after a build
site/
.site.building-*/
.site.old-*/
# a file memsite was writing when its process was killed ('memsite doctor --fix' removes them)
.*.memsite-tmp
"""


def create_repository(path: Path, *, when: datetime) -> None:
    """Lay out a memory repository at ``path`` and commit it.

    Raises:
        MemsiteError: ``path`` already has an ``mkdocs.yml``.
    """
    from .git import Author, Repository
    from .merge import clone_settings

    path.mkdir(parents=True, exist_ok=True)
    settings = path / "mkdocs.yml"
    if settings.exists():
        data = read_mkdocs_yml(settings)
        extra = data.get("extra") if isinstance(data.get("extra"), dict) else {}
        if "memsite" in extra or plugin_options(data.get("plugins")) is not None:
            raise MemsiteError(f"{path}: is already a memsite repository")
        raise MemsiteError(f"{settings}: already exists; memsite init would overwrite it (move it away first)")
    if not _is_work_tree(path):
        _git(path, "init", "-q", "-b", "main")
    repo = Repository(path)
    try:
        repo.ensure_config(clone_settings(repo))  # merge drivers, split index, loose objects stored
        files = {
            "mkdocs.yml": mkdocs_yml(),
            "content/index.md": INDEX_MD,
            "content/world_state.md": world.render("", {}),
            **workflows.for_memory_repository(),
        }
        with repo.locked():
            for rel in files:
                if (path / rel).exists():
                    raise MemsiteError(f"{path / rel}: already exists; move it away before memsite init")
            # The user's own .gitignore and .gitattributes lines are kept.
            for rel, lines in ((".gitignore", GITIGNORE.splitlines()), (".gitattributes", gitattributes("content"))):
                text = _appended(path / rel, lines)
                if text is not None:
                    files[rel] = text
            ref = repo.branch()
            repo.commit(
                ref,
                repo.refs.read(ref),
                {rel: text.encode() for rel, text in files.items()},
                message="Initialise memsite memory repository\n\nmkdocs.yml holds the site and memsite settings.",
                author=Author.writer(INIT_AGENT),
                when=int(when.timestamp()),
            )
    finally:
        repo.close()


def _appended(path: Path, lines: list[str]) -> str | None:
    """The text of ``path`` with those of ``lines`` it lacks added at the end; None if it has them all."""
    existing = path.read_text() if path.exists() else ""
    present = set(existing.splitlines())
    missing = [line for line in lines if line not in present]
    if not [line for line in missing if line.strip() and not line.startswith("#")]:
        return None
    return existing + ("\n" if existing and not existing.endswith("\n") else "") + "\n".join(missing) + "\n"


def _is_work_tree(path: Path) -> bool:
    top = Git(path).toplevel()
    return top is not None and top.resolve() == path.resolve()


def _git(path: Path, *args: str) -> None:
    result = Git(path).run(*args)
    if result.returncode != 0:
        raise RepositoryError(f"git {' '.join(args)} failed in {path}: {result.stderr.strip()}")
