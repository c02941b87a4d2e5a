"""memsite's code in one-way layers: git plumbing <- the store <- features <- the facade <- cli and site.

Read from the source with ``ast``: an import added in the wrong direction,
or one that closes a circle, fails here before anyone has to untangle it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "memsite"
# The floors, lowest first: a module may import its own floor and those below, never one above.
# A module's floor is read from its path (its package under memsite/); what is not listed is the top.
FLOORS = ["memsite.foundation", "memsite.git", "memsite.storage", "memsite.features", "memsite.api"]
# What git plumbing may take from the foundation (it reads git, not memories).
GIT_FOUNDATION = {"memsite.foundation", "memsite.foundation.errors"}


def floor(name: str) -> int:
    """The floor of module ``name``: its index in FLOORS, or len(FLOORS) for the top (cli, site, integrations...)."""
    return next((i for i, prefix in enumerate(FLOORS) if name == prefix or name.startswith(prefix + ".")), len(FLOORS))


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


def test_each_module_imports_only_its_own_floor_and_those_below() -> None:
    above = [f"{name} ({FLOORS[floor(name)]}) imports {m}" for name in MODULES for m in sorted(imports(name))
             if floor(m) > floor(name)]
    assert above == []


def test_git_plumbing_imports_nothing_of_memsite_but_its_errors() -> None:
    for name in MODULES:
        if floor(name) == FLOORS.index("memsite.git"):
            outside = {m for m in imports(name) if floor(m) != floor(name)}
            assert outside <= GIT_FOUNDATION, f"{name} imports {sorted(outside)}"


def test_every_module_is_on_a_floor_its_path_names() -> None:
    """memsite/ itself holds only the package's doors: the facade, the demo and ``python -m memsite``."""
    loose = sorted(name for name in MODULES if name.count(".") == 1 and name not in
                   {"memsite.api", "memsite.demo", "memsite.__main__"} and not (PACKAGE / name.split(".")[1]).is_dir())
    assert loose == []


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


# The modules outside memsite/git/ that may start a process, and what each starts: none of them git.
NOT_GIT_PROCESSES = {
    "memsite.site.search": "Pagefind, which indexes the built site",
    "memsite.site.output": "a Python process removing an old build folder in the background",
    "memsite.site.build": "the ProperDocs and Zensical command lines (memsite build --engine)",
}
_PROCESS_CALLS = {("subprocess", name) for name in ("run", "Popen", "call", "check_call", "check_output",
                                                    "getoutput", "getstatusoutput")}
_PROCESS_CALLS |= {("os", name) for name in ("system", "popen", "execv", "execvp", "execvpe", "execl", "execlp",
                                             "spawnv", "spawnvp", "spawnl", "spawnlp", "posix_spawn", "posix_spawnp")}


def git_outside_the_door(package: Path) -> list[str]:
    """Where a module of ``package`` reaches git other than through memsite.git: GitPython imported
    (anywhere: memsite.git reads objects and runs git itself), or, outside ``git/``, a process started
    that is not on NOT_GIT_PROCESSES (or is git, even there)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        name = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        door = rel.parts[1] == "git"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "git" or alias.name.startswith("git."):
                        found.append(f"{where}: imports GitPython ({alias.name})")
                    elif alias.name == "subprocess" and not door and name not in NOT_GIT_PROCESSES:
                        found.append(f"{where}: imports subprocess")
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                if node.module == "git" or node.module.startswith("git."):
                    found.append(f"{where}: imports GitPython ({node.module})")
                elif node.module == "subprocess" and not door and name not in NOT_GIT_PROCESSES:
                    found.append(f"{where}: imports from subprocess")
            elif (not door and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and isinstance(node.func.value, ast.Name) and (node.func.value.id, node.func.attr) in _PROCESS_CALLS):
                command = node.args[0] if node.args else None
                first = command.elts[0] if isinstance(command, (ast.List, ast.Tuple)) and command.elts else command
                runs_git = isinstance(first, ast.Constant) and str(first.value).split()[:1] == ["git"]
                if name not in NOT_GIT_PROCESSES or runs_git:
                    found.append(f"{where}: starts a process ({node.func.value.id}.{node.func.attr})")
    return found


def test_only_memsite_git_runs_git() -> None:
    """One door into git: every module outside memsite/git/ goes through Repository (``repo.git``), Git or
    merge_file, never GitPython or a git process of its own."""
    assert git_outside_the_door(PACKAGE) == []


def test_a_git_process_started_outside_memsite_git_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "memsite"
    (package / "git").mkdir(parents=True)
    (package / "git" / "commands.py").write_text("import subprocess\nsubprocess.run(['git', 'log'])\n")
    (package / "git" / "repo.py").write_text("import git\n")
    (package / "history.py").write_text("import subprocess\n\ndef log():\n    subprocess.run(['git', 'log'])\n")
    (package / "sync.py").write_text("from git import Repo\n")
    (package / "site").mkdir()
    (package / "site" / "search.py").write_text("import subprocess\nsubprocess.run(['git', 'status'])\n")
    (package / "site" / "output.py").write_text("import subprocess\nsubprocess.Popen(['pagefind'])\n")
    assert git_outside_the_door(package) == [
        "memsite/git/repo.py:1: imports GitPython (git)",
        "memsite/history.py:1: imports subprocess",
        "memsite/history.py:4: starts a process (subprocess.run)",
        "memsite/site/search.py:2: starts a process (subprocess.run)",  # allowed a process, but not git
        "memsite/sync.py:1: imports GitPython (git)",
    ]


def test_only_the_site_package_imports_mkdocs() -> None:
    """docs/design.md says so: MkDocs stays behind memsite/site/ (its plugin, hooks and build)."""
    outside = []
    for name, path in MODULES.items():
        if name == "memsite.site" or name.startswith("memsite.site."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                sources = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                sources = [node.module or ""]
            else:
                continue
            outside += [f"{name} imports {source}" for source in sources if source.split(".")[0] == "mkdocs"]
    assert outside == []
