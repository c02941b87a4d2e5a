"""memsite's code in one-way layers: git plumbing <- the store <- features <- the facade <- cli and site.

Read from the source with ``ast``: an import added in the wrong direction,
or one that closes a circle, fails here before anyone has to untangle it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "memsite"
# What the store may import besides itself and git/: shared definitions, no feature.
FOUNDATION = {"memsite.errors", "memsite.config", "memsite.model", "memsite.text", "memsite.fileformat",
              "memsite.ranking", "memsite.checks", "memsite.secrets"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imports(name: str, *, top_level_only: bool = False) -> set[str]:
    """The memsite modules ``name`` imports (a function's own imports too, unless ``top_level_only``)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # 'from . import checks' imports a module; 'from .model import Memory' a name of one.
            found |= {f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else source
                      for alias in node.names}
    return {module for module in found if module in MODULES}


def test_git_plumbing_imports_nothing_of_memsite_but_its_errors() -> None:
    for name in MODULES:
        if name.startswith("memsite.git"):
            outside = {m for m in imports(name) if not m.startswith("memsite.git")}
            assert outside <= {"memsite.errors"}, f"{name} imports {sorted(outside)}"


def test_the_store_imports_no_feature() -> None:
    for name in MODULES:
        if name.startswith("memsite.store"):
            outside = {m for m in imports(name) if not m.startswith(("memsite.store", "memsite.git"))}
            assert outside <= FOUNDATION, f"{name} imports {sorted(outside - FOUNDATION)}"


def test_no_module_imports_itself_back_through_others() -> None:
    """No import circle among modules (imports inside functions, which run later, left aside)."""
    graph = {name: imports(name, top_level_only=True) - {name} for name in MODULES}
    graph = {name: {m for m in deps if not name.startswith(m + ".")} for name, deps in graph.items()}  # (its package)
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                raise AssertionError("import circle: " + " -> ".join(path[path.index(dep):] + [name, dep]))
            if dep not in state:
                visit(dep, [*path, name])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


def test_the_public_api_is_importable_from_the_package() -> None:
    from memsite import Memory, MemoryStore, MemsiteError

    assert isinstance(MemoryStore, type) and isinstance(Memory, type) and issubclass(MemsiteError, Exception)
