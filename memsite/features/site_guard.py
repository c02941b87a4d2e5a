"""What a memory repository may not make its site build do: publish the host, or run code.

A memory repository is shared through pull requests, so its ``mkdocs.yml``
and its ``content/`` folder are untrusted input to whoever builds the site.
MkDocs (1.6.1) trusts both:

- it reads ``mkdocs.yml`` with PyYAML's full loader, so a
  ``!!python/object/apply:os.system [...]`` tag runs when the file is read;
  :func:`config_problems` finds such tags without constructing anything
  (the YAML is only composed), before MkDocs is handed the file;
- it walks docs_dir with ``os.walk(..., followlinks=True)`` and copies every
  file it finds, so ``content/hostdir -> /etc`` publishes ``/etc``;
  :func:`folder_links` finds the folder links that walk must not enter (the
  plugin refuses to build with one) and :func:`escapes` the files it found
  that must not be copied (the plugin leaves them out).

:func:`config_warnings` names what ``mkdocs.yml`` adds to the build beyond
memsite's own plugin (or hook) and the built-in plugins, so a reviewer sees a pull request
that adds code to the build. No MkDocs import here: ``plugin`` wires these in.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import yaml

from ..foundation.config import PLUGIN, read_mkdocs_yml
from ..foundation.errors import ConfigError

PYTHON_TAG = "tag:yaml.org,2002:python/"
# ``!!python/name:`` only names a function of these packages (Material's documented
# emoji and fence settings); it imports nothing from the repository and calls nothing.
TRUSTED_NAMES = ("material.", "pymdownx.")
# The adapter ``memsite init`` wrote before memsite was a plugin (``mkdocs.yml`` listed it in hooks).
HOOKS_PATH = "hooks/memsite_hooks.py"
HOOKS_PY = '''"""MkDocs hooks that render this memory repository as its website (see memsite.site.hooks)."""

from memsite.site.hooks import *  # noqa: F403 (every hook memsite defines)
'''
BUILTIN_PLUGINS = frozenset({"search", "blog", "group", "info", "meta", "offline", "optimize", "privacy",
                             "projects", "social", "tags", "typeset"})


# --- mkdocs.yml ------------------------------------------------------------------


def config_problems(path: Path) -> list[str]:
    """One line per Python tag in ``path`` (and the files it INHERITs): ``mkdocs.yml:7: ...``.

    The file is composed, never constructed: no tag runs while it is checked.
    MkDocs' own ``!ENV`` and ``!relative`` tags are fine.
    """
    problems: list[str] = []
    seen: set[Path] = set()
    while path.resolve() not in seen:
        seen.add(path.resolve())
        try:
            root = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
        except FileNotFoundError:
            return problems + [f"{path}: not found"]
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            return problems + [f"{path}: not valid YAML ({str(exc).splitlines()[0]})"]
        problems += [f"{path.name}:{node.start_mark.line + 1}: python tags ({_short(node.tag)}) are refused; "
                     "remove it (it would run code when the site is built)"
                     for node in _nodes(root) if _refused(node.tag)]
        inherit = _inherit(root)
        if inherit is None:
            break
        path = path.parent / inherit
    return problems


def refuse_unsafe_config(path: Path) -> None:
    """Raise before MkDocs reads ``path`` if it holds a tag that would run code.

    Raises:
        ConfigError: one line per tag, naming the file and the line.
    """
    problems = config_problems(path)
    if problems:
        raise ConfigError("\n".join(problems))


def config_warnings(root: Path) -> list[str]:
    """What ``root/mkdocs.yml`` adds to the site build that a reviewer should read: hooks and plugins."""
    try:
        data = read_mkdocs_yml(root / "mkdocs.yml")
    except ConfigError:
        return []  # reported as a problem elsewhere
    warnings = []
    hooks = data.get("hooks") or []
    hooks = hooks if isinstance(hooks, list) else [hooks]
    for hook in hooks:
        if hook != HOOKS_PATH:
            warnings.append(f"mkdocs.yml: hooks: {hook!r} adds code to the site build; review it before building")
    plugins = data.get("plugins") or []
    names = list(plugins) if isinstance(plugins, (list, dict)) else [plugins]
    for entry in names:
        name = next(iter(entry), None) if isinstance(entry, dict) else entry
        if name != PLUGIN and (not isinstance(name, str) or name.removeprefix("material/") not in BUILTIN_PLUGINS):
            warnings.append(f"mkdocs.yml: plugins: {name!r} is not a built-in plugin of MkDocs or Material; "
                            "it adds code to the site build: review it before building")
    adapter = root / HOOKS_PATH
    if HOOKS_PATH in hooks and adapter.is_file() and adapter.read_text(encoding="utf-8", errors="replace") != HOOKS_PY:
        warnings.append(f"{HOOKS_PATH}: differs from the adapter memsite writes; it runs at every build: "
                        "review it before building")
    return warnings


def build_problems(root: Path, content_dir: str | None) -> list[str]:
    """What would make building the site of ``root`` run code or publish the host, one line each."""
    problems = config_problems(root / "mkdocs.yml") if (root / "mkdocs.yml").is_file() else []
    if content_dir is not None and (root / content_dir).is_dir():
        problems += link_problems(root / content_dir, root)
    return problems


def _nodes(root: yaml.Node | None) -> Iterator[yaml.Node]:
    stack, seen = [root] if root is not None else [], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(part for pair in node.value for part in pair)


def _refused(tag: str) -> bool:
    if not tag.startswith(PYTHON_TAG):
        return False
    kind, _, name = tag[len(PYTHON_TAG):].partition(":")
    return not (kind == "name" and name.startswith(TRUSTED_NAMES))


def _short(tag: str) -> str:
    return "!!python/" + tag[len(PYTHON_TAG):].split(":", 1)[0]


def _inherit(root: yaml.Node | None) -> str | None:
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if key.value == "INHERIT" and isinstance(value, yaml.ScalarNode):
                return str(value.value)
    return None


# --- docs_dir ----------------------------------------------------------------------


def _links(docs_dir: Path, root: Path) -> Iterator[tuple[str, str, bool]]:
    """Each link under ``docs_dir`` a site build must not follow: (its path relative to ``root``, why, a folder?).

    ``why`` is ``out`` (it leads outside ``root``, into its ``.git``, or to
    nothing) or ``loop`` (a folder link to a folder holding it). Links to
    other places inside the repository are followed, as MkDocs follows them;
    a folder reached twice is read once. One ``scandir`` a folder: no call per file.
    """
    seen: set[str] = set()
    stack = [str(docs_dir)]
    while stack:
        folder = stack.pop()
        real = os.path.realpath(folder)
        if real in seen:
            continue
        seen.add(real)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if not entry.is_symlink():
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                continue
            rel, is_dir = os.path.relpath(entry.path, root), entry.is_dir()
            target = os.path.realpath(entry.path)
            if _escapes(entry.path, root):
                yield rel, "out", is_dir
            elif is_dir and (real == target or real.startswith(target + os.sep)):
                yield rel, "loop", True
            elif is_dir:
                stack.append(entry.path)


def outside_links(docs_dir: Path, root: Path) -> list[str]:
    """Every link under ``docs_dir`` that leads outside ``root`` (or into ``.git``, or nowhere)."""
    return sorted(rel for rel, why, _ in _links(docs_dir, root) if why == "out")


def folder_links(docs_dir: Path, root: Path) -> list[tuple[str, str]]:
    """Each folder link under ``docs_dir`` that MkDocs' walk must not enter, and why, in words.

    MkDocs (1.6.1) walks docs_dir following every link: through one to a
    folder outside the repository (``/`` as well), and round a link to a
    folder that holds it until the path is too long.
    """
    words = {"out": "outside the repository", "loop": "a folder that holds it"}
    return sorted((rel, words[why]) for rel, why, is_dir in _links(docs_dir, root) if is_dir)


def link_problems(docs_dir: Path, root: Path) -> list[str]:
    """One line per link the site build refuses to follow: a file link it skips, a folder link it stops at."""
    lines = []
    for rel, why, is_dir in sorted(_links(docs_dir, root)):
        where = "outside the repository" if why == "out" else "a folder that holds it"
        effect = "stops at it (it would walk it)" if is_dir else "skips it (it would publish that file)"
        lines.append(f"{rel}: a symlink to {os.readlink(root / rel)}, {where}; "
                     f"the site build {effect}: remove the link")
    return lines


def escapes(path: str | Path, root: Path) -> bool:
    """Whether ``path`` resolves outside ``root``, into its ``.git`` folder, or to nothing."""
    return _escapes(str(path), root)


def _escapes(path: str, root: Path) -> bool:
    target = os.path.realpath(path)
    top = os.path.realpath(root)
    if not os.path.exists(target) or not (target == top or target.startswith(top + os.sep)):
        return True
    inner = os.path.relpath(target, top).split(os.sep)
    return inner[0] in (".git", ".memsite")
