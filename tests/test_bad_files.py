"""Files are the truth, and people edit them: one bad file is one problem, and ids stay unique.

A frontmatter broken by hand, a memory moved to another category's folder
with ``git mv`` (as a reviewer would in a PR), a note added without
frontmatter, a memory file copied: reads skip the file with one warning,
writes to other memories go on, ``check`` names it and the fix, the site
lists it on a problems page, and changing it is refused naming it.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import FormatError, MemoryStore, NotFound
from memsite.api import storage_of
from memsite.cli import main

from .conftest import assert_clean, git


def run(repo: Path, *args: str):
    return CliRunner().invoke(main, ["-C", str(repo), "--agent", "cli-agent", *args])


def broken_yaml(store: MemoryStore, path: Path) -> str:
    path.write_text(path.read_text().replace("tags: []", "tags: [unclosed"))
    return "line"


def moved_to_other_category(store: MemoryStore, path: Path) -> str:
    target = store.root / "content" / "memories" / "cases" / path.parent.parent.name / path.parent.name
    target.mkdir(parents=True, exist_ok=True)
    git(store.root, "mv", str(path), str(target / path.name))
    return "git mv"


def note_without_frontmatter(store: MemoryStore, path: Path) -> str:
    path.write_text("Remember to water the plants.\n")
    return "no frontmatter"


BREAKERS: list[Callable[[MemoryStore, Path], str]] = [broken_yaml, moved_to_other_category, note_without_frontmatter]


@pytest.mark.parametrize("breaker", BREAKERS, ids=lambda f: f.__name__)
def test_one_bad_file_is_one_problem(store: MemoryStore, breaker: Callable[[MemoryStore, Path], str],
                                     caplog: pytest.LogCaptureFixture) -> None:
    good = store.remember("The staging cluster is called vega", category="general")
    bad = store.remember("Deploys happen on Tuesdays", category="general")
    assert bad.path is not None
    hint = breaker(store, bad.path)
    git(store.root, "add", "-A")
    git(store.root, "commit", "-qm", "edited by a person")
    with caplog.at_level(logging.WARNING, logger="memsite"):
        listed = store.list()
        store.list()  # read again: no second warning for the same file
    assert [m.id for m in listed] == [good.id]
    warnings = [r.getMessage() for r in caplog.records if r.name == "memsite"]
    assert len(warnings) == 1 and warnings[0].startswith("skipped content/memories/") and hint in warnings[0]
    assert store.get(good.id).content == good.content
    later = store.remember("Writes to other memories go on", category="general")
    assert {m.id for m in store.list()} == {good.id, later.id}
    store.update(good.id, tags=["still", "writable"])
    assert store.recall("staging cluster")[0].memory.id == good.id
    # Changing the bad one is refused, naming its file (a note without frontmatter claims no id).
    expected = (NotFound, "no memory with id") if hint == "no frontmatter" else (
        FormatError, rf"memory {bad.id}: its file content/memories/\S+ cannot be read")
    for change in (lambda: store.update(bad.id, content="new text"), lambda: store.forget(bad.id)):
        with pytest.raises(expected[0], match=expected[1]):
            change()
    # check fails naming it and the fix; so does the CLI.
    result = run(store.root, "check")
    assert result.exit_code == 1 and hint in result.output
    assert run(store.root, "list").exit_code == 0
    assert_clean(store.root)


@pytest.mark.slow
def test_the_site_renders_the_rest_and_lists_bad_files_on_a_problems_page(store: MemoryStore, tmp_path: Path) -> None:
    good = store.remember("The staging cluster is called vega", category="general")
    bad = store.remember("Deploys happen on Tuesdays", category="general")
    assert bad.path is not None
    broken_yaml(store, bad.path)
    git(store.root, "commit", "-qam", "broken by hand")
    built = run(store.root, "build", "--site-dir", str(tmp_path / "site"))
    assert built.exit_code == 0, built.output
    page = (tmp_path / "site" / "problems" / "index.html").read_text()
    assert bad.path.name in page and "frontmatter is not valid YAML" in page
    assert good.abstract in (tmp_path / "site" / "memories" / "general" / "2026-11" / "index.html").read_text()
    assert 'href="problems/"' in (tmp_path / "site" / "index.html").read_text()  # in the navigation
    strict = run(store.root, "build", "--strict", "--site-dir", str(tmp_path / "strict"))
    assert strict.exit_code == 1 and "strict" in strict.output


def copy_memory(store: MemoryStore, path: Path, name: str = "copy-of-it.md") -> Path:
    copy = path.parent / name
    shutil.copy(path, copy)
    git(store.root, "add", str(copy))
    git(store.root, "commit", "-qm", "copied by a reviewer")
    return copy


def test_a_copied_memory_is_found_at_read_and_changing_it_is_refused(store: MemoryStore) -> None:
    memory = store.remember("The on-call rota changes on Mondays", category="general")
    assert memory.path is not None
    copy = copy_memory(store, memory.path, "a-copy.md")  # sorts first: the copy is what list shows
    rel_original = memory.path.relative_to(store.root).as_posix()
    rel_copy = copy.relative_to(store.root).as_posix()
    assert [m.id for m in store.list()] == [memory.id]
    problems = storage_of(store).catalog.problems()
    assert [(p, mid, dup) for p, mid, dup, _ in problems] == [(rel_original, memory.id, True)]
    for change in (lambda: store.forget(memory.id), lambda: store.update(memory.id, content="changed")):
        with pytest.raises(FormatError, match=f"memory {memory.id} is in 2 files: {rel_copy} and {rel_original}"):
            change()
    result = run(store.root, "check")
    assert result.exit_code == 1
    assert f"{rel_original}: field 'id': {memory.id} is also the id of {rel_copy}" in result.output
    # Dedup does not merge into it either: a new memory is written beside.
    again = store.remember("The on-call rota changes on Mondays!", category="general")
    assert again.action == "created"


@pytest.mark.parametrize("remove", ["copy", "original"])
def test_removing_either_copy_leaves_the_other_visible(store: MemoryStore, remove: str) -> None:
    memory = store.remember("The on-call rota changes on Mondays", category="general")
    assert memory.path is not None
    copy = copy_memory(store, memory.path)
    git(store.root, "rm", "-q", str(copy if remove == "copy" else memory.path))
    git(store.root, "commit", "-qm", "one copy removed")
    listed = store.list()
    assert [m.id for m in listed] == [memory.id]
    kept = copy if remove == "original" else memory.path
    assert listed[0].path == kept and listed[0].commit is not None
    assert storage_of(store).catalog.problems() == []
    store.forget(memory.id, reason="settled")
    assert store.list() == []
    with pytest.raises(NotFound):
        store.get(memory.id)
    assert run(store.root, "check").exit_code == 0
    assert_clean(store.root)


def test_a_rebuilt_index_agrees_with_the_one_kept_up_to_date(store: MemoryStore) -> None:
    memory = store.remember("The on-call rota changes on Mondays", category="general")
    other = store.remember("Backups run nightly", category="general")
    assert memory.path is not None and other.path is not None
    copy_memory(store, memory.path, "a-copy.md")
    broken_yaml(store, other.path)
    git(store.root, "commit", "-qam", "broken")
    before = ([m.path for m in store.list()], storage_of(store).catalog.problems())
    store.rebuild_index()
    assert ([m.path for m in store.list()], storage_of(store).catalog.problems()) == before
    assert len(before[1]) == 2
