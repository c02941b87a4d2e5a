"""Memory files: YAML frontmatter + Markdown body, read strictly, written canonically.

Reading uses a restricted YAML loader: strings, integers, floats, ``true`` /
``false``, null, lists and maps. No anchors or aliases (an alias bomb of a few
hundred bytes expands to millions of items), no tags, no YAML 1.1 guessing
(``yes`` stays a string, a date stays a string, ``0777`` is not octal), no
duplicate keys, and a size cap.

Writing is canonical: fixed key order, one line per scalar field, a trailing
newline, so saving an unchanged memory gives the same bytes and a change
shows as a one-line diff. Strings that another YAML reader (MkDocs uses YAML
1.1) could take for something else are quoted, so every reader agrees.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import yaml
from frontmatter.default_handlers import YAMLHandler
from yaml.representer import SafeRepresenter

from .errors import FormatError
from .record import FIELD_ORDER, ID_RE, Memory, format_time, parse_time

MAX_FRONTMATTER_BYTES = 64 * 1024


_RESOLVED: dict[str, str] = {}


class _Restrictions:
    """What makes a loader restricted, checked as each node is constructed.

    Both the pure-Python parser and libyaml's build the same node graph, so
    one set of checks serves both: an alias is a node met a second time (the
    graph is small even for an alias bomb; its expansion would happen here),
    an explicit tag is a tag other than the one implicit resolution gives.
    """

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        # A plain scalar's type depends on its text alone, and the same texts
        # (keys, true, false, small numbers) recur in every file: remember them.
        if kind is yaml.ScalarNode and implicit[0]:
            tag = _RESOLVED.get(value)
            if tag is None:
                tag = super().resolve(kind, value, implicit)  # type: ignore[misc]  # a mixin: the loader has it
                if len(_RESOLVED) < 4096:
                    _RESOLVED[value] = tag
            return tag
        return super().resolve(kind, value, implicit)  # type: ignore[misc]  # a mixin: the loader has it

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        if node in self.constructed_objects:  # type: ignore[attr-defined]  # a mixin: the loader has it
            raise _YamlRefused("anchors and aliases (&name, *name) are not allowed", node.start_mark)
        if isinstance(node, yaml.ScalarNode):
            implicit = (False, True) if node.style else (True, False)  # plain: None (pure), "" (libyaml)
            expected = self.resolve(yaml.ScalarNode, node.value, implicit)
        elif isinstance(node, yaml.SequenceNode):
            expected = "tag:yaml.org,2002:seq"
        else:
            expected = "tag:yaml.org,2002:map"
        if node.tag != expected:
            raise _YamlRefused(f"YAML tags ({node.tag}) are not allowed", node.start_mark)
        return super().construct_object(node, deep)  # type: ignore[misc]  # a mixin: the loader has it

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            text_key = isinstance(key_node, yaml.ScalarNode) and (
                bool(key_node.style)
                or self.resolve(yaml.ScalarNode, key_node.value, (True, False)) == "tag:yaml.org,2002:str"
            )
            if not text_key:
                got = repr(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "a list or mapping"
                raise _YamlRefused(f"keys must be text, got {got}", key_node.start_mark)
            if key_node.value in seen:
                raise _YamlRefused(f"key {key_node.value!r} appears twice", key_node.start_mark)
            seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]  # a mixin: the loader has it


class _RestrictedLoader(_Restrictions, yaml.SafeLoader):
    """SafeLoader minus aliases, tags, duplicate keys and YAML 1.1 type guessing."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        # The pure parser resolves a bare '!' (the non-specific tag) as if it
        # were absent; libyaml does not. Refusing every explicit tag while
        # parsing keeps the two loaders in agreement.
        event = self.peek_event()
        if getattr(event, "tag", None) is not None:
            raise _YamlRefused(f"YAML tags ({event.tag}) are not allowed", event.start_mark)
        return super().compose_node(parent, index)


# libyaml parses much faster; the restrictions above apply to it alike.
_FastLoader: type[yaml.CSafeLoader] | None = None
if hasattr(yaml, "CSafeLoader"):

    class _FastLoader(_Restrictions, yaml.CSafeLoader):  # type: ignore[no-redef]  # None without libyaml
        """libyaml twin of _RestrictedLoader."""


class _YamlRefused(yaml.YAMLError):
    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


# Only these spellings resolve to non-strings; everything else is text. Each is
# a subset of what YAML 1.1 resolves, so whatever the dumper leaves unquoted
# (it quotes all YAML 1.1 look-alikes) reads back as a string here too.
_RestrictedLoader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    ("tag:yaml.org,2002:bool", r"^(?:true|false)$", "tf"),
    ("tag:yaml.org,2002:int", r"^-?(?:0|[1-9][0-9]*)$", "-0123456789"),
    ("tag:yaml.org,2002:float", r"^-?(?:0|[1-9][0-9]*)\.[0-9]+(?:[eE][-+][0-9]+)?$", "-0123456789"),
    ("tag:yaml.org,2002:null", r"^(?:~|null|)$", ["~", "n", ""]),
):
    _RestrictedLoader.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))
if _FastLoader is not None:
    _FastLoader.yaml_implicit_resolvers = _RestrictedLoader.yaml_implicit_resolvers


class _CanonicalDumper(yaml.SafeDumper):
    """SafeDumper with multi-line strings as literal blocks: the reference output."""


# libyaml's emitter writes the same bytes much faster, except that it escapes
# characters beyond U+FFFF (emoji) where the reference writes them as they
# are; it is used only for data without them (tests pin the outputs equal).
_FastDumper: type[yaml.CSafeDumper] | None = None
if hasattr(yaml, "CSafeDumper"):

    class _FastDumper(yaml.CSafeDumper):  # type: ignore[no-redef]  # None without libyaml
        """libyaml twin of _CanonicalDumper."""


_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")


_OTHER_BREAKS = re.compile("[\r\x85\u2028\u2029]")


def _represent_str(dumper: SafeRepresenter, value: str) -> yaml.ScalarNode:
    # YAML also breaks lines at \r, NEL, LS and PS: only double quotes (where
    # they are escaped) keep them; plain or block styles would fold them.
    if _OTHER_BREAKS.search(value):
        style: str | None = '"'
    else:
        style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _represent_dict(dumper: SafeRepresenter, value: dict[Any, Any]) -> yaml.MappingNode:
    # Mappings are always one key per line; only lists of plain values go inline.
    return dumper.represent_mapping("tag:yaml.org,2002:map", value, flow_style=False)


for _dumper in (_CanonicalDumper, _FastDumper):
    if _dumper is not None:
        _dumper.add_representer(str, _represent_str)
        _dumper.add_representer(dict, _represent_dict)


_LINE = re.compile(r"([A-Za-z0-9][A-Za-z0-9.+#_-]*): (.*)")
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")  # the restricted loader's own int pattern
_NOT_FAST = object()


def _fast_value(raw: str) -> Any:
    if raw in _WORDS:
        return _WORDS[raw]
    if _INT.fullmatch(raw):
        return int(raw)
    if len(raw) >= 2 and raw[0] == raw[-1] == "'" and "'" not in raw[1:-1]:
        return raw[1:-1]
    if len(raw) >= 2 and raw[0] == "[" and raw[-1] == "]":
        items = raw[1:-1].split(", ") if raw != "[]" else []
        return items if all(_plain(item, _PLAIN_IN_LIST) for item in items) else _NOT_FAST
    return raw if _plain(raw, _PLAIN) else _NOT_FAST


_WORDS: dict[str, Any] = {"null": None, "true": True, "false": False}


def _fast_load(text: str) -> dict[str, Any] | None:
    """Read frontmatter written by :func:`_fast_dump` (one plain 'key: value' a line); None otherwise.

    The mirror of the direct writer: every value form it accepts is one the
    restricted loader reads the same way (tests pin the two equal), and
    anything else is left to that loader.
    """
    data: dict[str, Any] = {}
    for line in text.split("\n"):
        if not line:
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            return None
        key, raw = match.groups()
        if key in data or not _plain_key(key):
            return None
        value = _fast_value(raw)
        if value is _NOT_FAST:
            return None
        data[key] = value
    return data


def load_yaml(text: str, where: str, *, pure: bool = False) -> Any:
    """Parse ``text`` with the restricted loader; FormatError names ``where``."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FRONTMATTER_BYTES:
        raise FormatError(
            f"{where}: frontmatter is larger than {MAX_FRONTMATTER_BYTES} bytes; move long text into the body"
        )
    if not pure and "\r" not in text:
        fast = _fast_load(text)
        if fast:
            return fast
    # YAML reads \r\n and \r as \n anyway; normalising first spares the two parsers' differences.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    # libyaml cannot tell a bare '!' tag from no tag: such text takes the reference loader,
    # and so does whatever libyaml refuses, so the reference decides every refusal.
    if not pure and _FastLoader is not None and "!" not in text:
        try:
            return yaml.load(text, Loader=_FastLoader)  # noqa: S506 (the restricted loader)
        except yaml.YAMLError:
            pass
    try:
        return yaml.load(text, Loader=_RestrictedLoader)  # noqa: S506 (the restricted loader)
    except _YamlRefused as exc:
        raise FormatError(f"{where}: line {exc.mark.line + 2}: {exc.message}; write plain values") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 2}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FormatError(f"{where}: {line}frontmatter is not valid YAML ({problem}); fix the syntax") from None


def _has_astral(value: Any) -> bool:
    if isinstance(value, str):
        return _ASTRAL.search(value) is not None
    if isinstance(value, dict):
        return any(_has_astral(k) or _has_astral(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_astral(v) for v in value)
    return False


# The common case, written directly: a value every YAML reader takes as the
# same text when written plain (ASCII, no indicator where YAML looks for one,
# and YAML 1.1's own resolver says 'text'), our timestamps, numbers, booleans,
# null, and lists of such words. Anything else goes to the emitter. Tests pin
# the output byte-equal to the emitter's.
_PLAIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9 .,;:()\[\]{}/+?!'\"#@&*%$=<>~^_-]*[A-Za-z0-9.)\]}!?'\"#_-])?")
_PLAIN_IN_LIST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+#_-]*")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_YAML11 = yaml.resolver.Resolver()


def _plain(value: str, pattern: re.Pattern[str]) -> bool:
    return (
        pattern.fullmatch(value) is not None
        and ": " not in value and " #" not in value and "  " not in value
        and _yaml11_text(value)
    )


def _yaml11_text(value: str) -> bool:
    """Whether YAML 1.1 (PyYAML's resolver, as MkDocs reads) takes ``value``, written plain, for text.

    ``Resolver.resolve`` for a plain scalar, without its generic steps: the
    resolvers registered for the first character (a plain Resolver has no
    wildcard ones and no path resolvers), the first that matches decides.
    """
    for tag, regexp in _YAML11.yaml_implicit_resolvers.get(value[:1], ()):
        if regexp.match(value):
            return tag == "tag:yaml.org,2002:str"
    return True


@functools.lru_cache(maxsize=256)  # the same dozen keys in every file
def _plain_key(key: str) -> bool:
    return _plain(key, _PLAIN_IN_LIST)


def _fast_scalar(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        if _TIMESTAMP.fullmatch(value) or not value:
            return f"'{value}'"
        return value if _plain(value, _PLAIN) else None
    if isinstance(value, list) and all(isinstance(v, str) and _plain(v, _PLAIN_IN_LIST) for v in value):
        return "[" + ", ".join(value) + "]"
    return None


def _fast_dump(data: dict[str, Any]) -> str | None:
    lines = []
    for key, value in data.items():
        text = _fast_scalar(value)
        if text is None or not _plain_key(key):
            return None
        lines.append(f"{key}: {text}\n")
    return "".join(lines)


def dump_yaml(data: dict[str, Any], *, pure: bool = False) -> str:
    """Dump a mapping canonically (insertion order kept, no line folding)."""
    if not pure:
        fast = _fast_dump(data)
        if fast is not None:
            return fast
    emitter = _FastDumper if _FastDumper is not None and not pure and not _has_astral(data) else _CanonicalDumper
    return yaml.dump(
        data,
        Dumper=emitter,
        sort_keys=False,
        default_flow_style=None,
        allow_unicode=True,
        width=1_000_000,
    )


class MemsiteYAMLHandler(YAMLHandler):
    """python-frontmatter handler using the restricted loader and canonical dumper."""

    def __init__(self, where: str = "<memory>") -> None:
        super().__init__()
        self.where = where

    def load(self, fm: str, **kwargs: object) -> Any:
        data = load_yaml(fm, self.where)
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise FormatError(
                f"{self.where}: frontmatter must be a mapping of fields, got a {type(data).__name__}; "
                "write 'key: value' lines between the --- markers"
            )
        return data

    def export(self, metadata: dict[str, object], **kwargs: object) -> str:
        return dump_yaml(metadata)


# --- memory files ----------------------------------------------------------


def split_frontmatter(text: str, where: str) -> tuple[dict[str, Any], str]:
    """Split a file into (frontmatter mapping, body); FormatError if it has none."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.startswith("---"):
        raise FormatError(f"{where}: no frontmatter; a memory file starts with a '---' line")
    handler = MemsiteYAMLHandler(where)
    try:
        fm, body = handler.split(text)
    except ValueError:
        raise FormatError(f"{where}: frontmatter is not closed; add a '---' line after the fields") from None
    return handler.load(fm), body.strip()


def decode(data: bytes, where: str) -> str:
    """The text of a file's bytes.

    Raises:
        FormatError: they are not UTF-8 (naming the file, the byte and the fix).
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{where}: not valid UTF-8 (byte {exc.start}); save the file as UTF-8") from None


def parse_memory(text: str, where: str, *, category: str | None = None) -> Memory:
    """Parse a memory file's text into a :class:`Memory`.

    Args:
        text: the whole file.
        where: the file's path, used in error messages.
        category: the category its folder routes to; a mismatch is an error.

    Raises:
        FormatError: naming the file, the field and the fix.
    """
    if "\x00" in text:
        raise FormatError(f"{where}: contains NUL bytes; memory files are text")
    meta, body = split_frontmatter(text, where)
    return memory_from_fields(meta, body, where, category=category)


def memory_from_fields(
    meta: dict[str, Any], body: str, where: str, *, category: str | None = None
) -> Memory:
    """Check frontmatter ``meta`` against the schema and build the Memory."""

    def problem(name: str, expected: str, fix: str) -> FormatError:
        got = meta.get(name, "<missing>")
        return FormatError(f"{where}: field '{name}': expected {expected}, got {got!r}; {fix}")

    def text_field(name: str) -> str:
        value = meta.get(name)
        if not isinstance(value, str) or not value.strip():
            raise problem(name, "non-empty text", "quote the value if it looks like a number or date")
        return value

    def optional_text_field(name: str) -> str | None:
        value = meta.get(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise problem(name, "non-empty text", "quote the value if it looks like a number or date")
        return value

    def time_field(name: str, *, required: bool = True) -> Any:
        value = meta.get(name)
        if value is None and not required:
            return None
        try:
            return parse_time(value)
        except ValueError:
            raise problem(name, "an ISO-8601 UTC time like 2026-11-20T14:03:00Z",
                          "write the time in that form") from None

    mid = text_field("id")
    if not ID_RE.match(mid):
        raise problem("id", "an id of 6-64 letters, digits, '-' or '_'", "keep the id memsite wrote; never edit it")
    cat = text_field("category")
    if category is not None and cat != category:
        raise problem("category", f"'{category}' (the folder it is in)", "move the file or correct the field")
    overview = meta.get("overview", "")
    if overview is None:
        overview = ""
    if not isinstance(overview, str):
        raise problem("overview", "text", "quote the value")
    tags = meta.get("tags", [])
    if tags is None:
        tags = []
    if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
        raise problem("tags", "a list of words like [python, style]", "write tags as a list of text")
    count = meta.get("active_count", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise problem("active_count", "a whole number >= 0", "write the number of recalls")
    pinned = meta.get("pinned", False)
    if not isinstance(pinned, bool):
        raise problem("pinned", "true or false", "write true or false")
    links: dict[str, str | None] = {}
    for name in ("supersedes", "superseded_by"):
        value = meta.get(name)
        if value is not None and (not isinstance(value, str) or not ID_RE.match(value) or value == mid):
            raise problem(name, "the id of another memory", "write the id memsite wrote, or remove the field")
        links[name] = value
    valid_until = time_field("valid_until", required=False)
    if links["superseded_by"] is not None and valid_until is None:
        raise problem("valid_until", "the time it stopped holding, as superseded_by is set",
                      "write the time it was replaced, like 2026-11-20T14:03:00Z")
    known = set(FIELD_ORDER)
    return Memory(
        id=mid,
        category=cat,
        abstract=text_field("abstract"),
        overview=overview,
        agent=text_field("agent"),
        created=time_field("created"),
        updated=time_field("updated"),
        source=optional_text_field("source"),
        tags=tuple(tags),
        active_count=count,
        last_recalled=time_field("last_recalled", required=False),
        pinned=pinned,
        valid_until=valid_until,
        content=body,
        supersedes=links["supersedes"],
        superseded_by=links["superseded_by"],
        extra={k: v for k, v in meta.items() if k not in known},
    )


def memory_fields(memory: Memory) -> dict[str, Any]:
    """The frontmatter mapping of ``memory`` in canonical key order."""
    data: dict[str, Any] = {
        "id": memory.id,
        "category": memory.category,
        "abstract": memory.abstract,
        "overview": memory.overview,
        "agent": memory.agent,
        "created": format_time(memory.created),
        "updated": format_time(memory.updated),
        "source": memory.source,
        "tags": list(memory.tags),
        "active_count": memory.active_count,
        "last_recalled": format_time(memory.last_recalled) if memory.last_recalled else None,
        "pinned": memory.pinned,
    }
    if data["last_recalled"] is None:
        del data["last_recalled"]
    for name, value in _chain(memory):
        data[name] = value
    for key in sorted(memory.extra):
        data[key] = memory.extra[key]
    return data


def format_memory(memory: Memory) -> str:
    """The canonical file text of ``memory``."""
    head = _fast_memory(memory)
    if head is None:
        head = dump_yaml(memory_fields(memory))
    return f"---\n{head}---\n\n{memory.content}\n"


def _fast_memory(memory: Memory) -> str | None:
    """:func:`_fast_dump` of :func:`memory_fields`, without building the mapping; None where that gives None.

    The values many memories share (category, agent, source, tags, times)
    are checked once each. Memories with extra fields take the general way.
    """
    if memory.extra:
        return None
    values = (
        _fast_scalar(memory.id), _recurring(memory.category), _fast_scalar(memory.abstract),
        _fast_scalar(memory.overview), _recurring(memory.agent), _recurring(format_time(memory.created)),
        _recurring(format_time(memory.updated)), _recurring(memory.source), _recurring_tags(tuple(memory.tags)),
        _fast_scalar(memory.active_count),
    )
    last = _recurring(format_time(memory.last_recalled)) if memory.last_recalled else None
    pinned = _fast_scalar(memory.pinned)
    if None in values or pinned is None or (memory.last_recalled and last is None):
        return None
    recalled = f"last_recalled: {last}\n" if memory.last_recalled else ""
    chain = ""
    for name, value in _chain(memory):
        written = _fast_scalar(value)
        if written is None:
            return None
        chain += f"{name}: {written}\n"
    return f"{_MEMORY_LINES % values}{recalled}pinned: {pinned}\n{chain}"


def _chain(memory: Memory) -> list[tuple[str, str]]:
    """The supersession fields that are set, in canonical order (a memory never replaced has none)."""
    if memory.supersedes is None and memory.superseded_by is None and memory.valid_until is None:
        return []
    values = (("supersedes", memory.supersedes), ("superseded_by", memory.superseded_by),
              ("valid_until", format_time(memory.valid_until) if memory.valid_until else None))
    return [(name, value) for name, value in values if value is not None]


_MEMORY_LINES = "".join(f"{key}: %s\n" for key in FIELD_ORDER[:10])  # then last_recalled, pinned, the chain


@functools.lru_cache(maxsize=1024)
def _recurring(value: str | None) -> str | None:
    return _fast_scalar(value)


@functools.lru_cache(maxsize=1024)
def _recurring_tags(tags: tuple[str, ...]) -> str | None:
    return _fast_scalar(list(tags))
