"""memsite settings: typed, with defaults in one place, validated all at once.

They live in the memory repository's ``mkdocs.yml`` under ``extra.memsite``
(MkDocs rejects unknown top-level keys in ``--strict`` builds; ``extra`` is its
free-form section), beside the site settings, so one file configures both.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from .errors import ConfigError, InvalidInput


@dataclass(frozen=True)
class Watermark:
    """Trim when a measure goes over ``high``; trim down to ``low`` or below."""

    high: int
    low: int


@dataclass(frozen=True)
class Capacity:
    """High/low marks on a category's memory count and lines of text (either or both)."""

    entries: Watermark | None = None
    lines: Watermark | None = None

    @property
    def bounded(self) -> bool:
        return self.entries is not None or self.lines is not None


@dataclass(frozen=True)
class Category:
    """A category: where its memories live and how many it keeps."""

    name: str
    description: str = ""
    folder: str = ""
    aliases: tuple[str, ...] = ()
    capacity: Capacity = field(default_factory=Capacity)

    def __post_init__(self) -> None:
        if not self.folder:
            object.__setattr__(self, "folder", self.name)


DEFAULT_CATEGORIES: tuple[Category, ...] = (
    Category("profile", "Who the user is: role, background, context that rarely changes.",
             aliases=("user_profile", "user_info", "identity")),
    Category("preferences", "How the user likes things done: style, tools, habits.",
             aliases=("user_pref", "user_preference", "preference", "prefs")),
    Category("entities", "People, projects, systems and services worth knowing about.",
             aliases=("entity", "project", "person", "system")),
    Category("events", "Things that happened: releases, incidents, decisions.",
             aliases=("event", "incident", "decision", "milestone")),
    Category("cases", "Problems met and how they were solved.",
             aliases=("error_solution", "case", "bug", "fix", "solution")),
    Category("patterns", "Reusable approaches: file patterns, workflows, recipes.",
             aliases=("pattern", "file_pattern", "workflow", "recipe", "howto")),
    Category("general", "Anything else worth keeping.", aliases=("misc", "other", "note", "notes")),
)

TRIM_POLICIES = ("archive", "delete")
MAX_SEGMENT_SIZE = 1000  # files GitHub's web view lists in a folder


@dataclass(frozen=True)
class Config:
    """Every memsite setting, with its default."""

    content_dir: str = "content"
    """MkDocs ``docs_dir``: the folder that holds memories, world state, sessions and notes."""
    categories: tuple[Category, ...] = DEFAULT_CATEGORIES
    """The categories memories are routed to (replaces the defaults when given)."""
    fallback_category: str | None = None
    """Category for unknown names; with none, an unknown category is an error."""
    max_memory_bytes: int = 64 * 1024
    """Largest memory text accepted."""
    max_world_bytes: int = 128 * 1024
    """Largest world_state.md a merge (store.world.merge or a task's world changes) may leave."""
    trim: str = "archive"
    """What trimming does with a memory: ``archive`` (moved to archive/) or ``delete`` (kept in history)."""
    half_life_days: float = 30.0
    """Decay half-life: a memory not recalled loses half its score in this many days."""
    active_weight: float = 0.1
    """Weight of recalls in the score: boost = 1 + active_weight * ln(1 + active_count)."""
    auto_load_lines: int = 200
    """Most lines the core memory loaded at an agent's start may have."""
    dedupe: bool = True
    """Whether remember() skips exact duplicates and merges near-duplicates of its category."""
    dedupe_threshold: float = 0.8
    """How alike (word pairs in common, Dice 0-1) a new memory must be to an existing one to merge."""
    flush_every: int = 500
    """Recalls recorded before their counts are committed in one batch."""
    embedding_weight: float = 0.8
    """With an embedder: the weight of meaning (cosine) in hybrid relevance; the rest is the share of words.

    Chosen with ``bench/quality.py --tune`` on bench/data/validation.tsv and
    queries.tsv; the held-out questions (heldout.tsv) never took part."""
    embedding_model: str = "auto"
    """The embedder recall uses: ``wordllama``, ``none`` (words only), ``auto`` (wordllama when installed),
    or ``model2vec:``, ``fastembed:`` or ``sentence-transformers:`` followed by a folder or a model name."""
    embedding_floor: float = 0.95
    """The share of off-topic background questions that must recall nothing: sets the meaning floor
    (see memsite/relevance.py); 0 turns the floor off (every query gets its closest memories)."""
    embedding_download: bool = False
    """Whether a model named by ``model2vec:``, ``fastembed:`` or ``sentence-transformers:`` may be
    downloaded when it is not in the local cache (``MEMSITE_EMBEDDING_DOWNLOAD=1`` allows it too)."""
    lock_timeout: float = 10.0
    """Seconds a write waits for a git lock file held by someone else (a running ``git commit``) before failing."""
    sync_publish: str = "agent/{agent}"
    """The branch ``memsite sync`` publishes an agent's commits to (``{agent}``: its name); empty: publish none."""
    sync_attempts: int | None = None
    """How many times ``memsite sync`` tries to integrate into the shared branch before leaving it queued.

    Default: once when agents publish (a sync that lost the race is queued
    and ``memsite integrate`` merges it: a retry would only add to the
    contention), five times with backoff when they publish none."""
    recent_days: int = 7
    """Days the site's home page looks back over ("This week": what was learned, changed, forgotten)."""
    segment_size: int = 500
    """Memory files a writer puts in a month's numbered folder before it opens the next (at most 1,000).

    Half of GitHub's 1,000 entries a folder, so clones that filled the same
    folder at once still merge far below it."""

    # --- where things live in the repository ---------------------------------

    @property
    def memories_dir(self) -> str:
        return f"{self.content_dir}/memories"

    @property
    def archive_dir(self) -> str:
        return f"{self.content_dir}/archive"

    def memory_folder(self, category: Category, created: datetime, *, archived: bool = False) -> str:
        """The month folder of a memory: ``memories/<category folder>/<YYYY-MM>``, the month it was created (UTC).

        Its file is in one of the numbered folders in it (``<NNN>/``, see
        :func:`segment_name`), chosen when it is written.
        """
        top = self.archive_dir if archived else self.memories_dir
        return f"{top}/{category.folder}/{created.astimezone(timezone.utc):%Y-%m}"

    @property
    def world_path(self) -> str:
        return f"{self.content_dir}/world_state.md"

    @property
    def sessions_dir(self) -> str:
        return f"{self.content_dir}/sessions"

    def notes_path(self, agent: str, name: str) -> str:
        """``notes/<agent>/<name>`` (agent_knowledge.md, task_process.md)."""
        return f"{self.content_dir}/notes/{agent}/{name}"

    def route(self, name: str) -> Category:
        """The category ``name`` (or one of its aliases) routes to.

        Raises:
            InvalidInput: for an unknown name when no fallback is configured.
        """
        key = _normalize(name) if isinstance(name, str) else ""
        for category in self.categories:
            if key == category.name or key in category.aliases:
                return category
        if self.fallback_category is not None:
            return self.category(self.fallback_category)
        valid = ", ".join(c.name for c in self.categories)
        raise InvalidInput(
            f"category {name!r} is unknown; use one of: {valid} "
            "(or add it under extra.memsite.categories in mkdocs.yml)"
        )

    def category(self, name: str) -> Category:
        for category in self.categories:
            if category.name == name:
                return category
        raise KeyError(name)

    def by_folder(self, folder: str) -> Category | None:
        for category in self.categories:
            if category.folder == folder:
                return category
        return None


MONTH_FOLDER = re.compile(r"[0-9]{4}-(0[1-9]|1[0-2])")
SEGMENT_FOLDER = re.compile(r"[0-9]{3,}")


def segment_name(number: int) -> str:
    """The name of a month's numbered folder: ``001``, ``002``, ... (``1000`` after ``999``)."""
    return f"{number:03d}"


@dataclass(frozen=True)
class Place:
    """Where a memory file sits under ``memories/`` (or ``archive/``)."""

    folder: str  # the category folder
    month: str | None  # YYYY-MM; None in the flat layout (memsite before month folders)
    segment: str | None = None  # NNN; None in the flat and the month layout ('memsite migrate' moves both)


def place_of(rel: str) -> Place | None:
    """The place of ``rel`` (a path under ``memories/`` or ``archive/``) if it is a memory file there.

    ``<folder>/<YYYY-MM>/<NNN>/<name>.md`` is the layout; the layouts of
    earlier versions, ``<folder>/<YYYY-MM>/<name>.md`` (month folders) and
    ``<folder>/<name>.md`` (flat), are still read. None for any other path.
    """
    parts = rel.split("/")
    if not parts[-1].endswith(".md"):
        return None
    if len(parts) == 2:
        return Place(parts[0], None)
    if len(parts) >= 3 and MONTH_FOLDER.fullmatch(parts[1]):
        if len(parts) == 3:
            return Place(parts[0], parts[1])
        if len(parts) == 4 and SEGMENT_FOLDER.fullmatch(parts[2]):
            return Place(parts[0], parts[1], parts[2])
    return None


@functools.lru_cache(maxsize=256)  # every write routes its category name
def _normalize(name: str) -> str:
    return re.sub(r"[\s-]+", "_", name.strip().lower())


# --- reading mkdocs.yml -----------------------------------------------------


class _TolerantLoader(yaml.SafeLoader):
    """Reads mkdocs.yml without running its tags (``!!python/name:``, ``!ENV``)."""


def _ignore_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    return None


_TolerantLoader.add_multi_constructor("!", _ignore_tag)
_TolerantLoader.add_multi_constructor("tag:yaml.org,2002:python/", _ignore_tag)


def read_mkdocs_yml(path: Path) -> dict[str, Any]:
    """The settings in ``path`` as plain data (tags read as null)."""
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_TolerantLoader)  # noqa: S506
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found; run 'memsite init' to create a memory repository") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings")
    return data


def site_url(root: Path) -> str:
    """Where the memory website is published: ``site_url`` of ``root/mkdocs.yml`` ('' when unset or unreadable)."""
    try:
        value = read_mkdocs_yml(root / "mkdocs.yml").get("site_url")
    except ConfigError:
        return ""
    return value.strip() if isinstance(value, str) and value.strip().startswith(("http://", "https://")) else ""


def memory_url(base: str, memory_id: str) -> str:
    """A memory's page on the site published at ``base``: ``<base>/m/<id>/``, the address that never moves."""
    return f"{base.rstrip('/')}/m/{quote(memory_id, safe='')}/"


def load_config(root: Path) -> Config:
    """Read and validate ``root/mkdocs.yml``.

    Raises:
        ConfigError: listing every problem, one per line.
    """
    path = root / "mkdocs.yml"
    data = read_mkdocs_yml(path)
    extra = data.get("extra") or {}
    settings = extra.get("memsite") if isinstance(extra, dict) else None
    if settings is None:
        raise ConfigError(f"{path}: has no 'extra.memsite' section; run 'memsite init' or add one")
    return parse_config(settings, docs_dir=data.get("docs_dir", "docs"), where=str(path))


def parse_config(settings: Any, *, docs_dir: Any = "content", where: str = "mkdocs.yml") -> Config:
    """Validate a settings mapping into a :class:`Config` (all problems at once)."""
    errors: list[str] = []
    defaults = Config()

    def err(key: str, expected: str, got: Any) -> None:
        errors.append(f"Config value 'extra.memsite.{key}': expected {expected}, got {got!r}")

    if not isinstance(settings, dict):
        raise ConfigError(f"{where}: Config value 'extra.memsite': expected a mapping, got {settings!r}")
    known = {"categories", "fallback_category", "max_memory_bytes", "max_world_bytes", "trim", "decay", "auto_load_lines",
             "dedupe", "activity", "embedding", "lock_timeout", "sync", "site", "segment_size"}
    for key in settings:
        if key not in known:
            err(key, f"one of {', '.join(sorted(known))}", key)

    def number(key: str, value: Any, default: Any, *, kind: type, minimum: float, exclusive: bool = False) -> Any:
        if value is None:
            return default
        ok = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
        if ok and (value > minimum if exclusive else value >= minimum):
            return kind(value)
        bound = f"> {minimum}" if exclusive else f">= {minimum}"
        err(key, f"{'a number' if kind is float else 'a whole number'} {bound}", value)
        return default

    if not isinstance(docs_dir, str) or not _safe_relative(docs_dir):
        errors.append(f"Config value 'docs_dir': expected a folder inside the repository, got {docs_dir!r}")
        docs_dir = defaults.content_dir

    categories = defaults.categories
    raw_categories = settings.get("categories")
    if raw_categories is not None:
        if not isinstance(raw_categories, dict) or not raw_categories:
            err("categories", "a mapping of category name to settings", raw_categories)
        else:
            categories = tuple(
                _parse_category(name, spec or {}, err) for name, spec in raw_categories.items()
            )
            seen: dict[str, str] = {}
            for category in categories:
                for key in (category.name, *category.aliases):
                    if key in seen and seen[key] != category.name:
                        err(f"categories.{category.name}", f"a name or alias not already used by '{seen[key]}'", key)
                    seen[key] = category.name
            folders = [c.folder for c in categories]
            for folder in {f for f in folders if folders.count(f) > 1}:
                err("categories", "a different folder for each category", folder)

    fallback = settings.get("fallback_category")
    if fallback is not None and fallback not in {c.name for c in categories}:
        err("fallback_category", f"one of {', '.join(c.name for c in categories)}", fallback)

    trim = settings.get("trim", defaults.trim)
    if trim not in TRIM_POLICIES:
        err("trim", " or ".join(TRIM_POLICIES), trim)
        trim = defaults.trim

    decay = _section(settings, "decay", ("half_life_days", "active_weight"), err)

    dedupe = _section(settings, "dedupe", ("enabled", "threshold"), err)
    enabled = dedupe.get("enabled", defaults.dedupe)
    if not isinstance(enabled, bool):
        err("dedupe.enabled", "true or false", enabled)
        enabled = defaults.dedupe
    threshold = number("dedupe.threshold", dedupe.get("threshold"), defaults.dedupe_threshold, kind=float, minimum=0,
                       exclusive=True)
    if threshold > 1:
        err("dedupe.threshold", "a number in (0, 1]", threshold)
    activity = _section(settings, "activity", ("flush_every",), err)
    embedding = _section(settings, "embedding", ("model", "weight", "floor", "download"), err)
    site = _section(settings, "site", ("recent_days",), err)
    weight = number("embedding.weight", embedding.get("weight"), defaults.embedding_weight, kind=float, minimum=0)
    if weight > 1:
        err("embedding.weight", "a number in [0, 1]", weight)
    floor = number("embedding.floor", embedding.get("floor"), defaults.embedding_floor, kind=float, minimum=0)
    if floor > 1:
        err("embedding.floor", "a number in [0, 1]", floor)
    model = embedding.get("model", defaults.embedding_model)
    if model is False or model is None:  # YAML's `none`/`off` read as null/false: words only all the same
        model = "none"
    if not isinstance(model, str) or not re.match(r"^[\w.:/~+-]{1,300}$", model):
        err("embedding.model", "a model name: auto, wordllama, none, or model2vec:, fastembed: or "
            "sentence-transformers: and a folder or model name", model)
        model = defaults.embedding_model
    download = embedding.get("download", defaults.embedding_download)
    if not isinstance(download, bool):
        err("embedding.download", "true or false", download)
        download = defaults.embedding_download

    sync = _section(settings, "sync", ("publish", "attempts"), err)
    publish = sync.get("publish", defaults.sync_publish)
    if publish is False or publish is None:
        publish = ""
    if not isinstance(publish, str) or (publish and not re.fullmatch(r"[\w./-]*\{agent\}[\w./-]*", publish)):
        err("sync.publish", "a branch name holding {agent}, such as agent/{agent} (or false)", publish)
        publish = defaults.sync_publish

    segment_size = number("segment_size", settings.get("segment_size"), defaults.segment_size, kind=int, minimum=1)
    if segment_size > MAX_SEGMENT_SIZE:  # GitHub lists no more in a folder
        err("segment_size", f"a whole number from 1 to {MAX_SEGMENT_SIZE}", segment_size)
        segment_size = defaults.segment_size

    config = replace(
        defaults,
        content_dir=docs_dir.strip("/"),
        categories=categories,
        fallback_category=fallback,
        max_memory_bytes=number("max_memory_bytes", settings.get("max_memory_bytes"),
                                defaults.max_memory_bytes, kind=int, minimum=1),
        max_world_bytes=number("max_world_bytes", settings.get("max_world_bytes"),
                               defaults.max_world_bytes, kind=int, minimum=1),
        trim=trim,
        half_life_days=number("decay.half_life_days", decay.get("half_life_days"),
                              defaults.half_life_days, kind=float, minimum=0, exclusive=True),
        active_weight=number("decay.active_weight", decay.get("active_weight"),
                             defaults.active_weight, kind=float, minimum=0),
        auto_load_lines=number("auto_load_lines", settings.get("auto_load_lines"),
                               defaults.auto_load_lines, kind=int, minimum=1),
        dedupe=enabled,
        dedupe_threshold=threshold,
        flush_every=number("activity.flush_every", activity.get("flush_every"), defaults.flush_every,
                           kind=int, minimum=1),
        embedding_weight=weight,
        embedding_model=model,
        embedding_floor=floor,
        embedding_download=download,
        lock_timeout=number("lock_timeout", settings.get("lock_timeout"), defaults.lock_timeout, kind=float,
                            minimum=0, exclusive=True),
        sync_publish=publish,
        sync_attempts=number("sync.attempts", sync.get("attempts"), defaults.sync_attempts, kind=int, minimum=1),
        recent_days=number("site.recent_days", site.get("recent_days"), defaults.recent_days, kind=int, minimum=1),
        segment_size=segment_size,
    )
    if errors:
        raise ConfigError(f"{where}: {len(errors)} configuration problem(s):\n" + "\n".join(errors))
    return config


def _section(settings: dict[str, Any], name: str, keys: tuple[str, ...], err: Any) -> dict[str, Any]:
    """The mapping ``settings[name]`` (empty if absent), with unknown keys reported."""
    section = settings.get(name) or {}
    if not isinstance(section, dict):
        err(name, f"a mapping with {', '.join(keys)}", section)
        return {}
    for key in section:
        if key not in keys:
            err(f"{name}.{key}", " or ".join(keys), key)
    return section


def _parse_category(name: Any, spec: Any, err: Any) -> Category:
    key = f"categories.{name}"
    if not isinstance(name, str) or not re.match(r"^[a-z][a-z0-9_]{0,39}$", name):
        err(key, "a lowercase name of letters, digits and '_'", name)
        name = str(name)
    if not isinstance(spec, dict):
        err(key, "a mapping with description, folder, aliases, capacity", spec)
        return Category(name)
    for field_name in spec:
        if field_name not in ("description", "folder", "aliases", "capacity"):
            err(f"{key}.{field_name}", "one of description, folder, aliases, capacity", field_name)
    description = spec.get("description", "")
    if not isinstance(description, str):
        err(f"{key}.description", "text", description)
        description = ""
    folder = spec.get("folder", name)
    if not isinstance(folder, str) or not re.match(r"^[a-z0-9][a-z0-9_-]{0,39}$", folder):
        err(f"{key}.folder", "a folder name of lowercase letters, digits, '_' and '-'", folder)
        folder = name
    aliases = spec.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        err(f"{key}.aliases", "a list of names", aliases)
        aliases = []
    capacity = spec.get("capacity") or {}
    marks: dict[str, Watermark | None] = {"entries": None, "lines": None}
    if not isinstance(capacity, dict):
        err(f"{key}.capacity", "a mapping like {lines: {high: 500, low: 400}}", capacity)
        capacity = {}
    for unit, mark in capacity.items():
        where = f"{key}.capacity.{unit}"
        if unit not in marks:
            err(where, "entries or lines", unit)
            continue
        if not isinstance(mark, dict) or set(mark) != {"high", "low"}:
            err(where, "a mapping {high: N, low: M}", mark)
            continue
        high, low = mark["high"], mark["low"]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (high, low)) or not high > low:
            err(where, "whole numbers with high > low >= 0", mark)
            continue
        marks[unit] = Watermark(high=high, low=low)
    return Category(
        name=name,
        description=description,
        folder=folder,
        aliases=tuple(_normalize(a) for a in aliases),
        capacity=Capacity(**marks),
    )


def _safe_relative(path: str) -> bool:
    parts = Path(path).parts
    return bool(parts) and not Path(path).is_absolute() and ".." not in parts
