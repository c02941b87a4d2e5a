"""What ``memsite init`` writes into a new memory repository."""

from __future__ import annotations

import os
import shutil
from datetime import datetime
from pathlib import Path

import yaml

from ..foundation.config import DEFAULT_CATEGORIES, plugin_options, read_mkdocs_yml
from ..foundation.errors import InvalidInput, MemsiteError, RepositoryError
from ..foundation.record import utcnow
from ..git import Git
from ..git.commands import last_line
from . import workflows, world
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
        "  # memsite turns the memory files into the site's pages; its settings (memsite.Config):",
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
# the built site, a build under way, an old site being removed after a build, the one the next build starts from
site/
.site.building-*/
.site.old-*/
.site.spare/
# a file memsite was writing when its process was killed ('memsite doctor --fix' removes them)
.*.memsite-tmp
"""


def create_repository(path: Path, *, when: datetime) -> None:
    """Lay out a memory repository at ``path`` and commit it.

    Raises:
        MemsiteError: ``path`` already has an ``mkdocs.yml``.
    """
    from ..git import Author, Repository
    from .merge import clone_settings

    path.mkdir(parents=True, exist_ok=True)
    settings = path / "mkdocs.yml"
    if settings.exists():
        if is_memory(path):
            raise MemsiteError(f"{path}: is already a memsite repository (MemoryStore.init(..., exist_ok=True) "
                               "opens it)")
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


def is_memory(path: Path) -> bool:
    """Whether ``path`` holds a memsite repository: an ``mkdocs.yml`` with memsite's settings.

    Raises:
        ConfigError: its ``mkdocs.yml`` cannot be read.
    """
    settings = path / "mkdocs.yml"
    if not settings.is_file():
        return False
    data = read_mkdocs_yml(settings)
    extra = data.get("extra")
    return (isinstance(extra, dict) and "memsite" in extra) or plugin_options(data.get("plugins")) is not None


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


# --- joining a team's memory, and publishing one ----------------------------------------------------------

SHARED_BRANCH = "main"  # the branch memsite shares a memory through
_NOT_A_REPOSITORY = ("does not appear to be a git repository", "not a git repository", "repository not found",
                     "not found", "no such file or directory")


def remote_branches(url: str, where: Path, shown: str | None = None) -> tuple[dict[str, str], str | None]:
    """The branches of the repository at ``url`` ({name: commit}) and the branch its HEAD names, if any.

    Args:
        where: an existing folder to run git in (a local ``url`` is taken as given, relative to the caller's).
        shown: the remote as the user gave it, for messages.

    Raises:
        RepositoryError: ``url`` is not a git repository or cannot be reached (one line).
    """
    result = Git(where).run("ls-remote", "--symref", url, env={"GIT_TERMINAL_PROMPT": "0"})
    if result.returncode != 0:
        said = " ".join(result.stderr.split()).lower()
        prefer = "ssh:" if "ssh:" in result.stderr else "fatal:"  # (ssh's own line says why it could not connect)
        reason = last_line(result.stderr, prefer=prefer).removeprefix("fatal: ")
        if any(words in said for words in _NOT_A_REPOSITORY) and "could not resolve" not in said:
            raise RepositoryError(f"{shown or url}: not a git repository ({reason})")
        raise RepositoryError(f"cannot reach {shown or url} ({reason}); nothing was made")
    branches: dict[str, str] = {}
    head = None
    for line in result.stdout.splitlines():
        left, _, name = line.partition("\t")
        if left.startswith("ref: ") and name == "HEAD":
            head = left.removeprefix("ref: ").removeprefix("refs/heads/")
        elif name.startswith("refs/heads/"):
            branches[name.removeprefix("refs/heads/")] = left
    return branches, head


def _source(url: str) -> str:
    """``url`` as git is given it: a folder on this machine as its absolute path (git runs elsewhere)."""
    local = Path(url).expanduser()
    return str(local.resolve()) if local.exists() else url


def destination(url: str, path: str | os.PathLike[str] | None) -> Path:
    """Where a clone of ``url`` goes: ``path``, else the last part of the URL without ``.git`` (as git does)."""
    if path is not None:
        return Path(path)
    name = url.rstrip("/").replace("\\", "/").rpartition("/")[2].rpartition(":")[2].removesuffix(".git")
    if not name or name in (".", ".."):
        raise InvalidInput(f"cannot tell a folder name from {url!r}; give one: memsite clone URL DIR")
    return Path(name)


def clone_repository(url: str, path: Path, branch: str | None = None) -> tuple[str, bool]:
    """Clone the memory at ``url`` into ``path`` (which must not exist, or be an empty folder).

    The shared branch is ``branch``, else ``main``, else the one the remote's
    HEAD names: a remote made by a plain ``git init --bare`` names
    ``master`` while memsite pushes ``main``, and the agents' branches
    (``agent/...``) are never the one checked out. An empty remote gets a new
    memory, published to it (as ``memsite init --remote``). Nothing is left
    behind when anything fails.

    Returns:
        (the branch checked out, whether the memory was new: the remote was empty).

    Raises:
        InvalidInput: ``path`` exists and is not an empty folder.
        RepositoryError: ``url`` is not a git repository, cannot be reached, has no such branch, or holds no
            memsite memory.
    """
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise InvalidInput(f"{path}: already exists and is not empty; clone into a new folder")
    source = _source(url)
    parent = path.resolve().parent
    if not parent.is_dir():
        raise InvalidInput(f"{parent}: no such folder to clone into")
    branches, head = remote_branches(source, parent, url)
    existed = path.exists()
    try:
        if not branches:
            create_repository(path, when=utcnow())
            publish(path, source)
            return SHARED_BRANCH, True
        chosen = branch or next((b for b in (SHARED_BRANCH, head) if b in branches), None)
        if chosen is None or chosen not in branches:
            listed = ", ".join(sorted(branches)[:10])
            raise RepositoryError(f"{url} has no branch {branch or SHARED_BRANCH} (it has {listed}); "
                                  "name the memory's branch with --branch")
        result = Git(parent).run("clone", "--quiet", "--branch", chosen, source, str(path.resolve()),
                                 env={"GIT_TERMINAL_PROMPT": "0"})
        if result.returncode != 0:
            raise RepositoryError(f"cannot clone {url}: {last_line(result.stderr, prefer='fatal:')}")
        if not is_memory(path):
            raise RepositoryError(f"{url}: not a memsite memory (branch {chosen} has no mkdocs.yml with memsite "
                                  "settings); clone it with git, or start a memory with 'memsite init DIR --remote "
                                  "URL' on an empty remote")
        return chosen, False
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)  # all of it is what this clone made
        if existed:
            path.mkdir(exist_ok=True)
        raise


def check_publishable(url: str, where: Path) -> None:
    """Refuse, in one line, a remote a new memory cannot be published to: unreachable, or holding a ``main``.

    Args:
        where: an existing folder to run git in.
    """
    branches, _ = remote_branches(_source(url), where, url)
    if SHARED_BRANCH in branches:
        raise RepositoryError(f"{url} already has a branch {SHARED_BRANCH}; join that memory with "
                              f"'memsite clone {url}' instead")


def publish(path: Path, url: str) -> str | None:
    """Push the new memory at ``path`` to the empty remote ``url`` (see :func:`check_publishable`) as
    ``origin``'s ``main``, and make the remote's HEAD name ``main`` where it can (a remote on this machine), so
    that a plain ``git clone`` checks it out.

    Returns:
        None, or what to do on the hosting service (a remote elsewhere: its default branch is set there).

    Raises:
        RepositoryError: the remote cannot be reached or refused the push.
    """
    source = _source(url)
    git = Git(path)
    if "origin" in git.run("remote").stdout.split():
        raise RepositoryError(f"{path} already has a remote origin; publish with git push")
    _git(path, "remote", "add", "origin", source)
    pushed = git.run("push", "--quiet", "--set-upstream", "origin", SHARED_BRANCH, env={"GIT_TERMINAL_PROMPT": "0"})
    if pushed.returncode != 0:
        _git(path, "remote", "remove", "origin")
        raise RepositoryError(f"cannot push to {url}: {last_line(pushed.stderr, prefer='fatal:')}; the memory is "
                              "in this folder, not on the remote")
    _git(path, "remote", "set-head", "origin", SHARED_BRANCH)
    bare = Git(Path(source)) if Path(source).is_dir() else None
    if bare is not None and bare.run("rev-parse", "--is-bare-repository").stdout.strip() == "true" \
            and bare.run("symbolic-ref", "HEAD", f"refs/heads/{SHARED_BRANCH}").returncode == 0:
        return None
    return (f"set the default branch of {url} to {SHARED_BRANCH} on its hosting service, "
            f"so that a plain git clone checks the memory out")
