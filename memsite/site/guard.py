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
  :func:`safe_walk` is that walk with links leading outside the repository
  (or into its ``.git``) left out and never entered.

:func:`config_warnings` names what ``mkdocs.yml`` adds to the build beyond
memsite's own hook and the built-in plugins, so a reviewer sees a pull request
that adds code to the build. No MkDocs import here: ``hooks`` wires these in.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import yaml

from ..config import read_mkdocs_yml
from ..errors import ConfigError
from ..scaffold import HOOKS_PATH, HOOKS_PY

PYTHON_TAG = "tag:yaml.org,2002:python/"
# ``!!python/name:`` only names a function of these packages (Material's documented
# emoji and fence settings); it imports nothing from the repository and calls nothing.
TRUSTED_NAMES = ("material.", "pymdownx.")
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
        if not isinstance(name, str) or name.removeprefix("material/") not in BUILTIN_PLUGINS:
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


def safe_walk(docs_dir: Path, root: Path, refused: list[str]) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(docs_dir, followlinks=True)`` that neither lists nor enters a link leading outside ``root``.

    Links to places inside the repository are followed as MkDocs follows
    them; a link out of it, into its ``.git``, or to nothing is left out and
    its path (relative to ``root``) appended to ``refused``. A folder reached
    twice (a link loop) is walked once.
    """
    seen: set[str] = set()
    for folder, dirnames, filenames in os.walk(docs_dir, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            dirnames[:] = []
            continue
        seen.add(real)
        for names in (dirnames, filenames):
            for name in list(names):
                path = os.path.join(folder, name)
                if os.path.islink(path) and _escapes(path, root):
                    names.remove(name)
                    refused.append(os.path.relpath(path, root))
        yield folder, dirnames, filenames


def outside_links(docs_dir: Path, root: Path) -> list[str]:
    """Every link under ``docs_dir`` that leads outside ``root`` (or into ``.git``, or nowhere)."""
    refused: list[str] = []
    for _ in safe_walk(docs_dir, root, refused):
        pass
    return refused


def link_problems(docs_dir: Path, root: Path) -> list[str]:
    """One line per link the site build would refuse to follow."""
    return [f"{rel}: a symlink to {os.readlink(root / rel)}, outside the repository; the site build skips it "
            "(it would publish that file or folder): remove the link" for rel in outside_links(docs_dir, root)]


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
