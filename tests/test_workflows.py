"""The GitHub workflows: memsite's own, and those `memsite init` writes, valid and with no security finding."""

from __future__ import annotations

import subprocess
from pathlib import Path

from memsite import MemoryStore
from memsite.features.workflows import for_memory_repository, for_product_repository
from tests.sites import ROOT


def lint(folder: Path) -> None:
    files = sorted(str(p) for p in folder.glob("*.yml"))
    assert files
    schema = subprocess.run(["check-jsonschema", "--builtin-schema", "vendor.github-workflows", *files],
                            capture_output=True, text=True)
    assert schema.returncode == 0, schema.stdout + schema.stderr
    audit = subprocess.run(["zizmor", "--offline", "--min-severity", "medium", "--format", "plain", str(folder)],
                           capture_output=True, text=True)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "No findings to report" in audit.stdout + audit.stderr


def test_memsites_own_workflows_are_valid_and_clean() -> None:
    for path, text in for_product_repository().items():
        assert (ROOT / path).read_text() == text, f"{path} differs from memsite.features.workflows; regenerate it"
    lint(ROOT / ".github" / "workflows")


def test_init_writes_the_memory_workflows_valid_and_clean(tmp_path: Path) -> None:
    with MemoryStore.init(tmp_path / "memory", agent="planner") as store:
        folder = store.root / ".github" / "workflows"
        assert sorted(p.name for p in folder.glob("*.yml")) == ["integrate.yml", "memory-review.yml", "pages.yml"]
        for path, text in for_memory_repository().items():
            assert (store.root / path).read_text() == text
        review = (folder / "memory-review.yml").read_text()
        assert 'memsite check --base "origin/$BASE_REF"' in review and "GITHUB_STEP_SUMMARY" in review
        assert "memsite build --strict" in review and "upload-artifact" in review
        assert "deploy-pages" in (folder / "pages.yml").read_text()
        queue = (folder / "integrate.yml").read_text()
        assert 'branches: ["agent/**"]' in queue and "group: memsite-integrate" in queue
        assert "memsite --agent integrator integrate --branch main" in queue and "contents: write" in queue
    lint(folder)
