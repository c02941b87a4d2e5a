"""The memory record and the small value helpers it needs (ids, times, slugs).

Pure data: nothing here touches the disk or git.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Frontmatter keys in the order they are written. Keys a person adds by hand
# are kept and written after these, sorted, so re-saving never reorders a file.
FIELD_ORDER = (
    "id",
    "category",
    "abstract",
    "overview",
    "agent",
    "created",
    "updated",
    "source",
    "tags",
    "active_count",
    "last_recalled",
    "pinned",
    "supersedes",
    "superseded_by",
    "valid_until",
)
# The last three are written only when set: a memory that replaced another
# names it (``supersedes``); the one replaced names its successor and the
# time it stopped holding (``superseded_by``, ``valid_until``).

ABSTRACT_MAX = 200
_ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


@dataclass(frozen=True)
class Memory:
    """One memory: its frontmatter fields, its body, and where it lives.

    ``content`` is the full text (L2), ``overview`` a short paragraph (L1),
    ``abstract`` the one-line summary (L0). ``valid_until`` is when it
    stopped holding (None: it still does); ``superseded_by`` the memory
    that replaced it then, ``supersedes`` the one it replaced. ``path`` is the file in the
    working tree; ``commit`` the commit that last wrote it (None inside a
    transaction that has not committed yet).
    """

    id: str
    category: str
    abstract: str
    content: str
    agent: str
    created: datetime
    updated: datetime
    overview: str = ""
    source: str | None = None
    tags: tuple[str, ...] = ()
    active_count: int = 0
    last_recalled: datetime | None = None
    pinned: bool = False
    supersedes: str | None = None
    superseded_by: str | None = None
    valid_until: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    path: Path | None = field(default=None, compare=False)
    commit: str | None = field(default=None, compare=False)
    action: str | None = field(default=None, compare=False)

    def replace(self, **changes: Any) -> Memory:
        """Return a copy with ``changes`` applied.

        As ``dataclasses.replace``, without running ``__init__`` again (a
        write makes several copies of each memory; this is a fifth of the cost).
        """
        unknown = changes.keys() - _MEMORY_FIELDS
        if unknown:
            raise TypeError(f"Memory has no field {', '.join(sorted(unknown))}")
        copy = object.__new__(Memory)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changes)
        return copy

    def valid_at(self, when: datetime) -> bool:
        """Whether it still held at ``when``: no ``valid_until``, or one after ``when``."""
        return self.valid_until is None or self.valid_until > when

    @property
    def lines(self) -> int:
        """Lines of memory text, the unit of line-based capacity marks."""
        return self.content.count("\n") + 1


_MEMORY_FIELDS = frozenset(f.name for f in dataclasses.fields(Memory))


# --- ids -------------------------------------------------------------------

# Crockford's base 32, which ULIDs use, two characters (10 bits) at a time.
_CROCKFORD_PAIRS = [a + b for a in "0123456789ABCDEFGHJKMNPQRSTVWXYZ" for b in "0123456789ABCDEFGHJKMNPQRSTVWXYZ"]
_ulid_lock = threading.Lock()
_ulid_last = (0, 0)


def new_id() -> str:
    """Return a new ULID: 26 characters, sortable by creation time.

    Within one millisecond the random part is incremented, so ids made by one
    process are strictly increasing. Written here rather than imported: it is
    ten lines and a dependency for it is not worth its weight.
    """
    global _ulid_last
    with _ulid_lock:
        ms = time.time_ns() // 1_000_000
        last_ms, last_rand = _ulid_last
        if ms <= last_ms:
            ms, rand = last_ms, (last_rand + 1) & ((1 << 80) - 1)
        else:
            rand = int.from_bytes(os.urandom(10), "big")
        _ulid_last = (ms, rand)
    value = (ms << 80) | rand  # 128 bits, written as 26 characters of 5 bits (the top 2 bits are 0)
    return "".join([_CROCKFORD_PAIRS[(value >> shift) & 0x3FF] for shift in range(120, -10, -10)])


# New ids are ULIDs; files written by hand or imported may use any safe token.
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{5,63}$")
SHORT_ID = 6  # characters of an id's short form: the end of its random part, as its file name ends


def short_id(mid: str) -> str:
    """The short form of an id people type and read (``66y6ym``): its last six characters, in lower case.

    A ULID begins with the time, so memories written minutes apart share
    their first ten characters; they end in 80 random bits, which the file
    name ends in too. Every command and API call taking an id takes this.
    """
    return mid[-SHORT_ID:].lower()


# --- times -----------------------------------------------------------------


def utcnow() -> datetime:
    """Now, in UTC, to the second (the precision memory files keep)."""
    return datetime.now(UTC).replace(microsecond=0)


def format_time(value: datetime) -> str:
    """``2026-11-20T14:03:00Z``: ISO-8601 in UTC, as written to files."""
    return _format_utc(value.astimezone(UTC))


@functools.lru_cache(maxsize=256)  # a write formats each time several times; a transaction, one time for many memories
def _format_utc(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: object) -> datetime:
    """Parse a timestamp written by :func:`format_time`; ValueError otherwise."""
    if not isinstance(text, str) or not _ISO_RE.match(text):
        raise ValueError(text)
    return datetime.fromisoformat(text[:-1]).replace(tzinfo=UTC)  # the form is checked above


# --- text helpers ----------------------------------------------------------


def normalize_content(text: str) -> str:
    """The canonical body: LF line ends, no trailing spaces, no outer blank space."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def one_line(text: str) -> str:
    """Collapse runs of whitespace (newlines included) into single spaces."""
    return " ".join(text.split())


def derive_abstract(content: str) -> str:
    """A one-line summary from the first non-empty line of ``content``."""
    for line in content.split("\n"):
        line = line.strip().lstrip("#>*-+ ").strip()
        if line:
            return truncate(one_line(line), ABSTRACT_MAX)
    return ""


def derive_overview(content: str, abstract: str) -> str:
    """A short paragraph: the first one that says more than the abstract, or ''."""
    for paragraph in content.split("\n\n"):
        text = one_line(paragraph)
        if text and derive_abstract(text) != abstract:
            return truncate(text, 400)
    return ""


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters at a word boundary, marking the cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip() + "…"


_SLUG_WORD = re.compile(r"[a-z0-9]+")


def slugify(text: str, limit: int = 48) -> str:
    """A lowercase ASCII file-name slug (``user-prefers-tabs``); ``memory`` if empty."""
    ascii_text = text if text.isascii() else unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = _SLUG_WORD.findall(ascii_text.lower())
    slug = ""
    for word in words:
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > limit:
            break
        slug = candidate
    return slug or (words[0][:limit] if words else "memory")
