"""memsite settings: typed, declared once (:class:`Config`), validated all at once.

They live in the memory repository's ``mkdocs.yml`` as the options of the
``memsite`` plugin (``plugins: {memsite: {...}}``), beside the site settings,
so one file configures both. Repositories made before the plugin keep them
under ``extra.memsite``, which is still read.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
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
SYNC_INTEGRATION = ("auto", "push", "queue")  # who moves the shared branch: see Config.sync_integrate
MAX_SEGMENT_SIZE = 1000  # files GitHub's web view lists in a folder


class _Bad(ValueError):
    """A setting's value is not what it must be: ``expected`` says what it must be (or ``problems`` each)."""

    def __init__(self, expected: str = "", problems: list[tuple[str, str, Any]] | None = None) -> None:
        super().__init__(expected)
        self.expected, self.problems = expected, problems or []


def _number(low: float = 0, high: float | None = None, *, above: bool = False, whole: bool = False) -> Any:
    """A parser of a number (a whole number with ``whole``) >= ``low`` (> with ``above``) and <= ``high``."""
    name = "a whole number" if whole else "a number"
    if high is None:
        expected = f"{name} {'>' if above else '>='} {low}"
    else:
        expected = f"{name} from {low} to {high}" if whole else f"{name} in {'(' if above else '['}{low}, {high}]"

    def parse(value: Any) -> Any:
        if (not isinstance(value, int if whole else (int, float)) or isinstance(value, bool) or value < low
                or (above and value == low) or (high is not None and value > high)):
            raise _Bad(expected)
        return int(value) if whole else float(value)
    return parse


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Bad("true or false")
    return value


def _one_of(choices: tuple[str, ...]) -> Any:
    def parse(value: Any) -> str:
        if value not in choices:
            raise _Bad(" or ".join(choices))
        return value
    return parse


def _model(value: Any) -> str:
    if value is False or value is None:  # YAML's `none`/`off` read as null/false: words only all the same
        return "none"
    if not isinstance(value, str) or not re.match(r"^[\w.:/~+-]{1,300}$", value):
        raise _Bad("a model name: auto, minilm, wordllama, none, or model2vec:, fastembed: or sentence-transformers: "
                   "and a folder or model name")
    return value


def _branch(value: Any) -> str:
    if value is False or value is None:
        return ""
    if not isinstance(value, str) or (value and not re.fullmatch(r"[\w./-]*\{agent\}[\w./-]*", value)):
        raise _Bad("a branch name holding {agent}, such as agent/{agent} (or false)")
    return value


def _categories(value: Any) -> tuple[Category, ...]:
    if not isinstance(value, dict) or not value:
        raise _Bad("a mapping of category name to settings")
    problems: list[tuple[str, str, Any]] = []

    def err(key: str, expected: str, got: Any) -> None:
        problems.append((key, expected, got))

    categories = tuple(_parse_category(name, spec or {}, err) for name, spec in value.items())
    seen: dict[str, str] = {}
    for category in categories:
        for key in (category.name, *category.aliases):
            if key in seen and seen[key] != category.name:
                err(f"categories.{category.name}", f"a name or alias not already used by '{seen[key]}'", key)
            seen[key] = category.name
    folders = [c.folder for c in categories]
    for folder in {f for f in folders if folders.count(f) > 1}:
        err("categories", "a different folder for each category", folder)
    if problems:
        raise _Bad(problems=problems)
    return categories


ENGINES = ("mkdocs", "properdocs", "zensical")  # what may build the site (memsite.site.build)


def setting(default: Any, key: str, parse: Any, *, null: bool = False) -> Any:
    """A :class:`Config` field users set in ``mkdocs.yml``: its ``key`` there and the ``parse`` that checks it.

    ``parse`` takes the value as written and returns the value kept, or
    raises ``_Bad`` saying what it must be. A null value means the default,
    unless ``null`` (the setting gives null a meaning of its own).
    """
    return field(default=default, metadata={"key": key, "parse": parse, "null": null})


@dataclass(frozen=True)
class Config:
    """Every memsite setting: its default, where it is written in ``mkdocs.yml``, what it must be, what it does.

    This is the one declaration of the settings: :func:`parse_config` (the
    Python API) and the MkDocs plugin's options (``memsite.site.plugin``)
    are both made from these fields.
    """

    content_dir: str = "content"
    """MkDocs ``docs_dir``: the folder that holds memories, world state, sessions and notes."""
    categories: tuple[Category, ...] = setting(DEFAULT_CATEGORIES, "categories", _categories)
    """The categories memories are routed to (replaces the defaults when given)."""
    fallback_category: str | None = setting(None, "fallback_category", lambda value: value)
    """Category for unknown names; with none, an unknown category is an error (checked against categories)."""
    max_memory_bytes: int = setting(64 * 1024, "max_memory_bytes", _number(1, whole=True))
    """Largest memory text accepted."""
    max_world_bytes: int = setting(128 * 1024, "max_world_bytes", _number(1, whole=True))
    """Largest world_state.md a merge (store.world.merge or a task's world changes) may leave."""
    trim: str = setting("archive", "trim", _one_of(TRIM_POLICIES))
    """What trimming does with a memory: ``archive`` (moved to archive/) or ``delete`` (kept in history)."""
    half_life_days: float = setting(30.0, "decay.half_life_days", _number(0, above=True))
    """Decay half-life: a memory not recalled loses half its score in this many days."""
    active_weight: float = setting(0.1, "decay.active_weight", _number(0))
    """Weight of recalls in the score: boost = 1 + active_weight * ln(1 + active_count)."""
    auto_load_lines: int = setting(200, "auto_load_lines", _number(1, whole=True))
    """Most lines the core memory loaded at an agent's start may have."""
    dedupe: bool = setting(True, "dedupe.enabled", _flag)
    """Whether remember() skips exact duplicates and merges near-duplicates of its category."""
    dedupe_threshold: float = setting(0.8, "dedupe.threshold", _number(0, 1, above=True))
    """How alike (word pairs in common, Dice 0-1) a new memory must be to an existing one to merge."""
    flush_every: int = setting(500, "activity.flush_every", _number(1, whole=True))
    """Recalls recorded before their counts are committed in one batch."""
    embedding_weight: float = setting(0.5, "embedding.weight", _number(0, 1))
    """With an embedder: the weight of meaning in the fusion of meaning and words (see
    memsite/features/retrieval.py); the rest is the words'. 1 recalls by meaning alone, 0 by words alone.

    Chosen with ``bench/longterm.py --set validation``; its held-out questions never took part."""
    embedding_model: str = setting("auto", "embedding.model", _model, null=True)
    """The embedder recall uses: ``minilm``, ``wordllama``, ``none`` (words only), ``auto`` (minilm when
    onnxruntime is installed, else wordllama when it is, else none), or ``model2vec:``, ``fastembed:`` or
    ``sentence-transformers:`` followed by a folder or a model name."""
    embedding_floor: float = setting(0.95, "embedding.floor", _number(0, 1))
    """The share of off-topic background questions that must recall nothing: sets the meaning floor
    (see memsite/features/relevance.py); 0 turns the floor off (every query gets its closest memories)."""
    embedding_download: bool = setting(False, "embedding.download", _flag)
    """Whether a model named by ``model2vec:``, ``fastembed:`` or ``sentence-transformers:`` may be
    downloaded when it is not in the local cache (``MEMSITE_EMBEDDING_DOWNLOAD=1`` allows it too)."""
    lock_timeout: float = setting(10.0, "lock_timeout", _number(0, above=True))
    """Seconds a write waits for a git lock file held by someone else (a running ``git commit``) before failing."""
    sync_publish: str = setting("agent/{agent}", "sync.publish", _branch, null=True)
    """The branch ``memsite sync`` publishes an agent's commits to (``{agent}``: its name); empty: publish none."""
    sync_integrate: str = setting("auto", "sync.integrate", _one_of(SYNC_INTEGRATION))
    """Who moves the shared branch when agents publish: ``push`` (each sync pushes it too), ``queue`` (syncs
    only publish; ``memsite integrate`` merges) or ``auto``: queue while the merge queue is running (the
    shared branch's newest commit is its merge, under two minutes old), push otherwise.

    With fifty agents, syncs that push the shared branch keep moving it
    under the merge queue, whose pushes then lose the race over and over."""
    sync_attempts: int | None = setting(None, "sync.attempts", _number(1, whole=True))
    """How many times ``memsite sync`` tries to integrate into the shared branch before leaving it queued.

    Default: while the merge queue runs, once (a sync that lost the race is
    queued and ``memsite integrate`` merges it: a retry would only add to the
    contention); otherwise again and again, with exponential backoff and
    jitter, for up to a minute (nothing else would integrate the commits)."""
    engine: str = setting("mkdocs", "engine", _one_of(ENGINES))
    """What builds the site (``memsite build``): mkdocs, properdocs or zensical; the same mkdocs.yml serves each."""
    recent_days: int = setting(7, "site.recent_days", _number(1, whole=True))
    """Days the site's home page looks back over ("This week": what was learned, changed, forgotten)."""
    segment_size: int = setting(500, "segment_size", _number(1, MAX_SEGMENT_SIZE, whole=True))
    """Memory files a writer puts in a month's numbered folder before it opens the next (at most 1,000:
    GitHub lists no more in a folder).

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
        return f"{top}/{category.folder}/{created.astimezone(UTC):%Y-%m}"

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
            "(or add it under plugins.memsite.categories in mkdocs.yml)"
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
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_TolerantLoader)  # noqa: S506 (a SafeLoader that reads tags as null)
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


PLUGIN = "memsite"  # the name of memsite's MkDocs plugin in mkdocs.yml's plugins
LEGACY = "extra.memsite"  # where settings were before the plugin; still read, with a deprecation note
DEPRECATED = (f"memsite: settings under {LEGACY} are deprecated: move them under plugins: {PLUGIN}: in mkdocs.yml "
              "(and drop hooks/memsite_hooks.py from hooks); see Settings in docs/guides/site.md")


def settings_of(options: Any, legacy: Any, where: str = "mkdocs.yml") -> tuple[Any, str]:
    """Which memsite settings count, and where they were: the plugin's ``options`` or ``legacy`` (extra.memsite).

    ``options`` is None when mkdocs.yml does not name the plugin, ``legacy``
    when it has no ``extra.memsite``.

    Raises:
        ConfigError: there are none, or settings in both places.
    """
    if options and legacy is not None:
        raise ConfigError(f"{where}: memsite settings in both plugins.{PLUGIN} and {LEGACY}; keep those under "
                          f"plugins.{PLUGIN} and remove {LEGACY}")
    if options is None and legacy is None:
        raise ConfigError(f"{where}: names no memsite plugin (plugins: [{PLUGIN}]); run 'memsite init' or add it")
    return (legacy, LEGACY) if legacy is not None and not options else (options or {}, f"plugins.{PLUGIN}")


def plugin_options(plugins: Any) -> Any:
    """The options of the memsite plugin in mkdocs.yml's ``plugins`` (a list or a mapping); None if it is not named."""
    if isinstance(plugins, dict):
        entries = list(plugins.items())
    elif isinstance(plugins, list):
        entries = [next(iter(e.items())) if isinstance(e, dict) and len(e) == 1 else (e, {}) for e in plugins]
    else:
        entries = []
    for name, options in entries:
        if name == PLUGIN:
            return {} if options is None else options
    return None


def load_config(root: Path) -> Config:
    """Read and validate the memsite settings of ``root/mkdocs.yml`` (plugins.memsite, or extra.memsite before).

    Raises:
        ConfigError: listing every problem, one per line.
    """
    path = root / "mkdocs.yml"
    data = read_mkdocs_yml(path)
    extra = data.get("extra")
    settings, prefix = settings_of(plugin_options(data.get("plugins")),
                                   extra.get("memsite") if isinstance(extra, dict) else None, str(path))
    return parse_config(settings, docs_dir=data.get("docs_dir", "docs"), where=str(path), prefix=prefix)


def parse_config(settings: Any, *, docs_dir: Any = "content", where: str = "mkdocs.yml",
                 prefix: str = f"plugins.{PLUGIN}") -> Config:
    """Validate a settings mapping into a :class:`Config` (all problems at once).

    Raises:
        ConfigError: ``where``, then one line per problem naming the setting (under ``prefix``).
    """
    config, problems = check_settings(settings, docs_dir=docs_dir)
    if problems:
        lines = [f"Config value '{key if key == 'docs_dir' else '.'.join(filter(None, (prefix, key)))}': {message}"
                 for key, message in problems]
        if not isinstance(settings, dict):
            raise ConfigError(f"{where}: {lines[0]}")
        raise ConfigError(f"{where}: {len(lines)} configuration problem(s):\n" + "\n".join(lines))
    return config


def declared() -> dict[str, Any]:
    """Every setting by its key in mkdocs.yml (``decay.half_life_days``): the :class:`Config` field declaring it."""
    return {f.metadata["key"]: f for f in fields(Config) if "key" in f.metadata}


def top_level() -> dict[str, tuple[str, ...]]:
    """The names written directly under memsite's settings, each with the keys of its section (none: a value)."""
    names: dict[str, tuple[str, ...]] = {}
    for key in declared():
        name, _, sub = key.partition(".")
        names[name] = names.get(name, ()) + ((sub,) if sub else ())
    return names


def check_settings(settings: Any, *, docs_dir: Any = "content") -> tuple[Config, list[tuple[str, str]]]:
    """The :class:`Config` of ``settings`` and every problem as (key, 'expected ..., got ...').

    Keys are relative to memsite's settings (``decay.half_life_days``);
    ``docs_dir`` is MkDocs' own. A setting with a problem keeps its default.
    """
    problems: list[tuple[str, str]] = []

    def err(key: str, expected: str, got: Any) -> None:
        problems.append((key, f"expected {expected}, got {got!r}"))

    if not isinstance(settings, dict):
        err("", "a mapping", settings)
        return Config(), problems
    if not isinstance(docs_dir, str) or not _safe_relative(docs_dir):
        problems.append(("docs_dir", f"expected a folder inside the repository, got {docs_dir!r}"))
        docs_dir = Config.content_dir
    names, fields_by_key = top_level(), declared()
    for name in settings:
        if name not in names:
            err(name, f"one of {', '.join(sorted(names))}", name)
    written: dict[str, Any] = {}
    for name, keys in names.items():
        if not keys:
            if name in settings:
                written[name] = settings[name]
            continue
        section = settings.get(name) or {}
        if not isinstance(section, dict):
            err(name, f"a mapping with {', '.join(keys)}", section)
            continue
        for key, value in section.items():
            if key in keys:
                written[f"{name}.{key}"] = value
            else:
                err(f"{name}.{key}", " or ".join(keys), key)
    values: dict[str, Any] = {}
    for key, value in written.items():
        declaration = fields_by_key[key]
        if value is None and not declaration.metadata["null"]:
            continue
        try:
            values[declaration.name] = declaration.metadata["parse"](value)
        except _Bad as bad:
            for where, expected, got in bad.problems or [(key, bad.expected, value)]:
                err(where, expected, got)
    config = replace(Config(), content_dir=docs_dir.strip("/"), **values)
    names_of_categories = [c.name for c in config.categories]
    if config.fallback_category is not None and config.fallback_category not in names_of_categories:
        err("fallback_category", f"one of {', '.join(names_of_categories)}", config.fallback_category)
    return config, problems


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
