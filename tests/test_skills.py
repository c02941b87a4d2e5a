"""Skill drafts from patterns recalled often enough."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from memsite import MemoryStore, render_skill
from memsite.cli import main
from memsite.features.skills import write_drafts

RELEASE = """To cut a release:

1. Tag the commit with the version number.
2. Wait for CI to go green on the tag.
3. Publish the wheel with twine.
"""


@pytest.fixture
def pattern(store: MemoryStore):
    memory = store.remember(RELEASE, category="patterns", abstract="Cutting a release of the package",
                            tags=("release", "packaging"))
    store.remember("Tabs, not spaces, in the Makefile", category="patterns")
    return memory


def recall(store: MemoryStore, times: int) -> None:
    for _ in range(times):
        store.recall("release wheel twine")


def test_a_pattern_becomes_a_candidate_only_at_the_threshold(store: MemoryStore, pattern) -> None:
    recall(store, 4)
    assert store.skill_candidates(threshold=5) == []
    recall(store, 1)
    [candidate] = store.skill_candidates(threshold=5)
    assert candidate.source_pattern_id == pattern.id
    assert candidate.steps == ("Tag the commit with the version number.", "Wait for CI to go green on the tag.",
                               "Publish the wheel with twine.")
    assert candidate.triggers[0] == "When cutting a release of the package"
    assert "Work involving packaging" in candidate.triggers
    assert candidate.name == "cutting-a-release-of-the-package"
    assert candidate.analysis == "deterministic" and candidate.confidence >= 0.7


def test_a_pattern_without_steps_is_no_skill(store: MemoryStore) -> None:
    store.remember("Releases are usually quiet on Fridays.", category="patterns", abstract="Friday releases")
    for _ in range(6):
        store.recall("releases fridays")
    assert store.skill_candidates(threshold=5) == []


def test_an_llm_decides_with_its_confidence(store: MemoryStore, pattern) -> None:
    recall(store, 5)
    prompts = []

    def confident(prompt: str) -> str:
        prompts.append(prompt)
        return "Sure:\n" + json.dumps({"name": "Release Package", "description": "Release the package to PyPI",
                                       "triggers": ["a release is due"], "steps": ["tag", "wait", "publish"],
                                       "confidence": 0.9})

    [candidate] = store.skill_candidates(threshold=5, llm=confident)
    assert "Publish the wheel with twine" in prompts[0]
    assert ((candidate.name, candidate.steps, candidate.analysis)
            == ("release-package", ("tag", "wait", "publish"), "llm"))
    doubtful = lambda prompt: json.dumps({"name": "x", "steps": ["a"], "confidence": 0.6})  # noqa: E731
    assert store.skill_candidates(threshold=5, llm=doubtful) == []

    def broken(prompt: str) -> str:
        raise TimeoutError("no answer")

    assert store.skill_candidates(threshold=5, llm=broken) == []


def test_the_draft_is_a_valid_agent_skill_that_asks_for_review(store: MemoryStore, pattern) -> None:
    recall(store, 5)
    [candidate] = store.skill_candidates(threshold=5)
    text = render_skill(candidate)
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["name"] == candidate.name and front["description"] == "Cutting a release of the package"
    assert front["metadata"]["pattern_id"] == pattern.id and front["metadata"]["confidence"] == candidate.confidence
    assert "**Needs review.**" in text and "deterministic analysis" in text
    assert "1. Tag the commit with the version number." in text


def test_drafts_are_rewritten_but_never_over_a_persons_edit(store: MemoryStore, pattern, tmp_path: Path) -> None:
    recall(store, 5)
    found = store.skill_candidates(threshold=5)
    assert [status for _, _, status in write_drafts(found, tmp_path)] == ["written"]
    assert [status for _, _, status in write_drafts(found, tmp_path)] == ["unchanged"]
    path = tmp_path / found[0].name / "SKILL.md"
    edited = path.read_text().replace("3. Publish", "3. Sign, then publish")
    path.write_text(edited)
    recall(store, 1)  # the recall count in the draft changes
    again = store.skill_candidates(threshold=5)
    assert [status for _, _, status in write_drafts(again, tmp_path)] == ["kept"]
    assert path.read_text() == edited


def test_the_cli_lists_and_writes_drafts(store: MemoryStore, pattern, tmp_path: Path) -> None:
    runner = CliRunner()
    none = runner.invoke(main, ["-C", str(store.root), "skills"])
    assert none.exit_code == 0 and "No pattern has been recalled 5 times yet." in none.output
    recall(store, 5)
    listed = runner.invoke(main, ["-C", str(store.root), "skills", "--no-llm"])
    assert "cutting-a-release-of-the-package" in listed.output and "recalled 5x" in listed.output
    written = runner.invoke(main, ["-C", str(store.root), "skills", "--write", str(tmp_path / "skills")])
    assert written.exit_code == 0, written.output
    assert (tmp_path / "skills" / "cutting-a-release-of-the-package" / "SKILL.md").is_file()
