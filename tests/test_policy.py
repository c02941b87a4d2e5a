"""The policy the API enforces: routing, capacity, and refusing bad input without writing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memsite import ConfigError, InvalidInput, MemoryStore, SecretFound
from memsite.foundation.config import DEFAULT_CATEGORIES, Capacity, Watermark, parse_config
from memsite.foundation.decay import TrimCandidate, plan_trim
from memsite.foundation.fileformat import parse_memory

from .conftest import START, Clock, assert_clean, git, head

fixture_ok = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def set_memsite_config(store_root: Path, **changes: object) -> None:
    """Edit the memsite plugin's settings in mkdocs.yml and commit it, as a person would."""
    path = store_root / "mkdocs.yml"
    data = yaml.safe_load(path.read_text())
    data["plugins"]["memsite"].update(changes)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    git(store_root, "commit", "-qam", "Change memsite settings")


# --- routing ------------------------------------------------------------------

ROUTES = [(alias, c.name, c.folder) for c in DEFAULT_CATEGORIES for alias in (c.name, *c.aliases)]


@fixture_ok
@given(st.sampled_from(ROUTES), st.sampled_from([str.lower, str.upper, lambda s: s.replace("_", "-")]))
def test_every_name_and_alias_routes_to_its_folder(store: MemoryStore, route: tuple[str, str, str], spelling) -> None:
    alias, name, folder = route
    memory = store.remember(f"routed through {alias}", category=spelling(alias))
    assert memory.category == name
    assert memory.path is not None
    assert memory.path.parent == store.root / "content" / "memories" / folder / "2026-11" / "001"


def test_the_original_aliases_route_as_specified(store: MemoryStore) -> None:
    assert store.remember("a", category="user_pref").category == "preferences"
    assert store.remember("b", category="error_solution").category == "cases"
    assert store.remember("c", category="file_pattern").category == "patterns"


def test_an_unknown_category_lists_the_valid_ones_and_writes_nothing(store: MemoryStore) -> None:
    before = head(store.root)
    with pytest.raises(InvalidInput) as info:
        store.remember("x", category="recipes")
    assert "'recipes' is unknown" in str(info.value)
    assert "profile, preferences, entities, events, cases, patterns, general" in str(info.value)
    assert head(store.root) == before


def test_a_configured_fallback_takes_unknown_categories(store: MemoryStore) -> None:
    set_memsite_config(store.root, fallback_category="general")
    with MemoryStore(store.root, agent="planner") as reopened:
        assert reopened.remember("x", category="recipes").category == "general"


def test_categories_come_from_configuration(store: MemoryStore) -> None:
    set_memsite_config(store.root, categories={
        "runbooks": {"description": "How to operate things", "aliases": ["ops"], "folder": "run-books"},
        "general": {},
    })
    with MemoryStore(store.root, agent="planner") as reopened:
        memory = reopened.remember("Restart with systemctl", category="ops")
        assert memory.path is not None and memory.path.parent.parent.parent.name == "run-books"
        with pytest.raises(InvalidInput, match="use one of: runbooks, general"):
            reopened.remember("x", category="preferences")


# --- capacity -------------------------------------------------------------------


def test_past_the_high_mark_a_write_trims_to_the_low_mark_in_the_same_commit(
    store: MemoryStore, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    set_memsite_config(store.root, categories={
        "cases": {"capacity": {"entries": {"high": 5, "low": 3}}}, "general": {},
    })
    with MemoryStore(store.root, agent="planner", clock=clock) as capped:
        ids = []
        for i in range(5):
            clock.advance(days=1)
            ids.append(capped.remember(f"case {i}", category="cases").id)
        assert len(capped.list(category="cases")) == 5
        clock.advance(days=1)
        with caplog.at_level("INFO", logger="memsite"):
            newest = capped.remember("case 5", category="cases")
        (record,) = [r for r in caplog.records if "trimming" in r.getMessage()]
        assert all(mid in record.getMessage() for mid in ids[:3])
        kept = [m.id for m in capped.list(category="cases")]
        assert kept == [ids[3], ids[4], newest.id]  # the most recent, within the low mark
        trimmed = [value for key, value in _trailers(capped.root) if key == "Memory-Id"][1:]
        assert trimmed == ids[:3]
        body = git(capped.root, "log", "-1", "--format=%B")
        assert "Trimmed 3 memories over capacity" in body and body.count("Action: trimmed") == 3
        archive = capped.root / "content" / "archive" / "cases" / "2026-11" / "001"  # category, month created
        archived = [parse_memory(p.read_text(), str(p)) for p in sorted(archive.iterdir())]
        assert sorted(m.id for m in archived) == sorted(ids[:3])
        assert all("cases capacity (6 entries > 5" in m.extra["archive_reason"] for m in archived)
        assert_clean(capped.root)


def test_trimming_by_lines_keeps_pinned_memories_and_can_delete(store: MemoryStore, clock: Clock) -> None:
    set_memsite_config(store.root, trim="delete", categories={
        "cases": {"capacity": {"lines": {"high": 10, "low": 7}}}, "general": {},
    })
    with MemoryStore(store.root, agent="planner", clock=clock) as capped:
        pinned = capped.remember("pinned\nfour\nlines\nhere", category="cases", pinned=True)
        clock.advance(days=1)
        old = capped.remember("old\ntwo", category="cases")
        clock.advance(days=1)
        mid = capped.remember("mid\ntwo", category="cases")
        clock.advance(days=1)
        new = capped.remember("new\nthree\nlines", category="cases")  # 11 lines > 10
        remaining = {m.id for m in capped.list(category="cases")}
        assert remaining == {pinned.id, new.id}
        assert not (capped.root / "content" / "archive").exists()
        assert {old.id, mid.id} <= {v for k, v in _trailers(capped.root) if k == "Memory-Id"}


def test_trim_applies_lowered_marks_on_demand(store: MemoryStore) -> None:
    ids = [store.remember(f"case {i}", category="cases").id for i in range(4)]
    assert store.trim("cases") == []
    set_memsite_config(store.root, categories={"cases": {"capacity": {"entries": {"high": 2, "low": 1}}},
                                               "general": {}})
    with MemoryStore(store.root, agent="planner") as capped:
        assert capped.trim("cases") == ids[:3]
        assert git(capped.root, "log", "-1", "--format=%s").strip() == "Trim cases"


def test_an_unbounded_category_is_never_trimmed(store: MemoryStore) -> None:
    with store.transaction() as tx:
        for i in range(700):
            tx.remember(f"line one\nline two {i}", category="cases")
    assert len(store.list(category="cases")) == 700


@settings(max_examples=200)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 20), st.booleans()), max_size=40),
    high=st.integers(1, 400),
    gap=st.integers(1, 200),
)
def test_trimming_lands_under_the_low_mark_keeping_the_most_recent(
    sizes: list[tuple[int, int, bool]], high: int, gap: int
) -> None:
    from datetime import timedelta

    low = max(0, high - gap)
    members = [
        TrimCandidate(f"m{i:03d}", START + timedelta(hours=i), 0, pinned, lines)
        for i, (lines, _, pinned) in enumerate(sizes)
    ]
    capacity = Capacity(lines=Watermark(high=high, low=low))
    trimmed = set(plan_trim(members, capacity, START + timedelta(days=2)))
    kept = [m for m in members if m.id not in trimmed]
    total = sum(m.lines for m in members)
    if total <= high:
        assert not trimmed
        return
    assert not any(m.pinned for m in members if m.id in trimmed)
    pinned_lines = sum(m.lines for m in members if m.pinned)
    assert sum(m.lines for m in kept) <= max(low, pinned_lines)
    # With equal activity the oldest unpinned go first: every kept unpinned
    # memory is newer than every trimmed one.
    if trimmed:
        newest_trimmed = max(m.created for m in members if m.id in trimmed)
        assert all(m.created > newest_trimmed for m in kept if not m.pinned)


def test_a_memory_recalled_often_outlives_a_newer_idle_one() -> None:
    from datetime import timedelta

    busy = TrimCandidate("busy", START, 1000, False, 1)
    idle = TrimCandidate("idle", START + timedelta(days=1), 0, False, 1)
    assert plan_trim([busy, idle], Capacity(entries=Watermark(1, 1)), START + timedelta(days=2)) == ["idle"]


# --- bad input ------------------------------------------------------------------


def assert_nothing_written(store: MemoryStore, before: str) -> None:
    assert head(store.root) == before
    assert not (store.root / "content" / "memories").exists()
    assert_clean(store.root)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"content": ""}, InvalidInput, r"content: is empty"),
        ({"content": "  \n\t \n"}, InvalidInput, r"content: is empty"),
        ({"content": "x" * 70_000}, InvalidInput, r"content: is 70000 bytes, over the 65536-byte cap"),
        ({"content": "before\x00after"}, InvalidInput, r"content: contains a NUL byte \(line 1\)"),
        ({"content": b"caf\xe9"}, InvalidInput, r"content: not valid UTF-8 \(byte 3\)"),
        ({"content": "lone \ud800 surrogate"}, InvalidInput,
         r"content: not valid text \(a lone surrogate, U\+D800, at character 5"),
        ({"content": 42}, InvalidInput, r"content: expected text, got int"),
        ({"content": "x", "tags": ["../x"]}, InvalidInput, r"tag '\.\./x'"),
        ({"content": "x", "tags": ["/etc/passwd"]}, InvalidInput, r"tag '/etc/passwd'"),
        ({"content": "x", "tags": ["a b"]}, InvalidInput, r"tag 'a b'"),
        ({"content": "x", "tags": [""]}, InvalidInput, r"tag ''"),
        ({"content": "x", "category": "../../etc"}, InvalidInput, r"category '\.\./\.\./etc' is unknown"),
        ({"content": "x", "pinned": "yes"}, InvalidInput, r"pinned: expected true or false"),
        ({"content": "x", "abstract": "a\x00b"}, InvalidInput, r"abstract: contains a NUL byte"),
        ({"content": "x", "source": "s" * 600}, InvalidInput, r"source: is 600 bytes"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(store: MemoryStore, kwargs: dict, error: type, message: str) -> None:
    before = head(store.root)
    with pytest.raises(error, match=message):
        store.remember(**kwargs)
    assert_nothing_written(store, before)


@pytest.mark.parametrize("agent", ["../x", "/abs/path", "a/b", "..", ".hidden", "x.lock", "", "a" * 65, "sp ace/x",
                                   "!!!"])
def test_agent_names_that_would_escape_the_repository_are_refused(store: MemoryStore, agent: str) -> None:
    with pytest.raises(InvalidInput, match="agent"):
        MemoryStore(store.root, agent=agent)


@pytest.mark.parametrize(("agent", "slug"), [("sp ace", "sp-ace"), ("José Núñez", "jose-nunez"), ("Claude", "Claude")])
def test_a_person_s_name_as_agent_writes_as_its_slug(store: MemoryStore, agent: str, slug: str) -> None:
    with MemoryStore(store.root, agent=agent) as named:
        assert named.agent == slug


SECRETS = [
    ("private-key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----"),
    ("aws-access-key-id", "the key is AKIAQWERTYUIOPASDF23"),
    ("github-token", "token ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"),
    ("gitlab-token", "glpat-" + "xY9zA8bC7dE6fG5hI4jK"),
    ("slack-token", "xoxb-123456789012-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"),
    ("stripe-key", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    ("google-api-key", "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    ("openai-project-key", "OPENAI=sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0u1V2w3X4"),
    ("anthropic-api-key", "sk-ant-api03-" + "x" * 30 + "Y7z" * 20 + "-AAAA"),
    ("jwt", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
    ("generic-credential", "db password = 'Xk9#mP2$vL8qR4nW7zT1'"),
    ("url-credentials", "postgres://admin:S3cr3tP4ssw0rd9@db.internal:5432/app"),
]


@pytest.mark.parametrize(("rule", "text"), SECRETS, ids=[rule for rule, _ in SECRETS])
def test_secrets_are_refused_naming_rule_and_line_never_the_secret(store: MemoryStore, rule: str, text: str) -> None:
    before = head(store.root)
    with pytest.raises(SecretFound) as info:
        store.remember("Deploy notes\n\n" + text, category="cases")
    message = str(info.value)
    assert f"rule {rule}" in message
    assert re.search(r"content line \d+:", message)
    secret_like = list(re.findall(r"[A-Za-z0-9_+/=.$#-]{12,}", text))
    assert not any(token in message for token in secret_like)
    assert_nothing_written(store, before)


def test_secrets_in_tags_abstract_and_updates_are_refused_too(store: MemoryStore) -> None:
    with pytest.raises(SecretFound, match="abstract line 1"):
        store.remember("x", abstract="key AKIAQWERTYUIOPASDF23")
    memory = store.remember("clean")
    with pytest.raises(SecretFound, match="content line 1"):
        store.update(memory.id, content="now ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6")
    assert store.get(memory.id).content == "clean"


@pytest.mark.parametrize(
    "text",
    [
        "Rotate the API key every 90 days; keys live in the vault.",
        "password: see the team vault entry 'prod-db'",
        "The token endpoint is /oauth/token and returns a JWT.",
        "Use AWS_ACCESS_KEY_ID from the environment, never hard-code it.",
        "commit 3f2a9c81d4e5b6a7c8d9e0f1a2b3c4d5e6f7a8b9 fixed the leak",
    ],
)
def test_prose_about_secrets_is_not_a_secret(store: MemoryStore, text: str) -> None:
    assert store.remember(text).commit


def test_unknown_update_fields_are_refused(store: MemoryStore) -> None:
    memory = store.remember("x")
    with pytest.raises(InvalidInput, match="cannot change agent, id"):
        store.update(memory.id, id="other", agent="someone")


# --- configuration ----------------------------------------------------------------


def test_every_configuration_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({
            "max_memory_bytes": -1,
            "trim": "shred",
            "decay": {"half_life_days": 0},
            "fallback_category": "nowhere",
            "colour": "blue",
            "categories": {"cases": {"capacity": {"lines": {"high": 400, "low": 500}}, "aliases": ["x"]},
                           "Bad Name": {}, "other": {"aliases": ["x"]}},
        })
    lines = str(info.value).splitlines()
    joined = "\n".join(lines)
    for key in ("max_memory_bytes", "trim", "decay.half_life_days", "fallback_category", "colour",
                "categories.cases.capacity.lines", "categories.Bad Name", "categories.other"):
        assert f"Config value 'plugins.memsite.{key}'" in joined, key
    assert all(line.startswith("Config value") for line in lines[1:])


def test_a_broken_mkdocs_yml_is_a_clear_error(store: MemoryStore) -> None:
    (store.root / "mkdocs.yml").write_text("site_name: [unclosed\n")
    with pytest.raises(ConfigError, match="mkdocs.yml: not valid YAML"):
        MemoryStore(store.root)


def test_mkdocs_yml_tags_are_not_executed(store: MemoryStore) -> None:
    text = (store.root / "mkdocs.yml").read_text()
    (store.root / "mkdocs.yml").write_text(
        text + "markdown_extensions:\n  - pymdownx.emoji:\n      emoji_index: !!python/name:os.system\n"
        "copyright: !ENV [COPYRIGHT, 'x']\n"
    )
    with MemoryStore(store.root, agent="planner") as reopened:
        assert reopened.config.content_dir == "content"


def _trailers(repo: Path) -> list[tuple[str, str]]:
    out = git(repo, "log", "-1", "--format=%(trailers:only,unfold)")
    return [tuple(line.split(": ", 1)) for line in out.splitlines() if ": " in line]  # type: ignore[misc]


secret_like = st.lists(st.sampled_from([text for _, text in SECRETS] + [
    "plain words", " ", "password = short", "token: " + "aB3dE6gH9jK2mN5pQ8sT", "\n", "AWS", "sk", "://", "Key=",
]), max_size=4).map(" ".join) | st.text(alphabet="akisAKIS_-:/=@.3ghpxoz0 ", max_size=60)


@settings(max_examples=500)
@given(secret_like)
def test_the_literal_triggers_never_hide_what_the_rules_find(text: str) -> None:
    from memsite.foundation import secrets

    assert secrets.scan(text) == secrets.matches(text, secrets.RULES)


@settings(max_examples=500)
@given(st.lists(secret_like | st.sampled_from(["\n\n", "# ", "> ", "-", "\t", "      ", "token:",
                                              "aB3dE6gH9jK2mN5pQ8sT"]),
               max_size=6).map("".join))
@example("token:      aB3dE6gH9jK2mN5pQ8sT")
def test_a_derived_abstract_and_overview_are_refused_exactly_as_when_scanned_in_full(text: str) -> None:
    """A memory's abstract and overview cut from its text are only scanned when the text has a rule's
    trigger; the verdict and its message are those of scanning every field (spaces the text has too
    many of for a rule are collapsed in them: 'token:      <value>' is found in the abstract alone)."""
    from memsite.foundation import inputs
    from memsite.foundation.record import derive_abstract, derive_overview, normalize_content

    content = normalize_content(text)
    abstract = derive_abstract(content)
    fields = {"content": content, "abstract": abstract, "overview": derive_overview(content, abstract)}

    def verdict(**kwargs: object) -> str | None:
        try:
            inputs.no_secrets(fields, **kwargs)  # type: ignore[arg-type]
        except SecretFound as exc:
            return str(exc)
        return None

    assert verdict(excerpts=["abstract", "overview"]) == verdict()
