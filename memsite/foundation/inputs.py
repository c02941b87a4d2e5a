"""Checks on what callers ask memsite to write. Each failure is one clear line.

Everything here runs before the repository lock is taken, so bad input never
costs a writer's time and never writes anything.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from typing import BinaryIO

from . import secrets
from .errors import InvalidInput, SecretFound
from .record import slugify

# Agent names become folders (notes/<agent>/) and branch names (agent/<name>, review/<name>).
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_NAME_CHARS = re.compile(r"^[A-Za-z0-9_.-]*$")  # a name's characters: given so, it is meant as a name
# Tags are words: letters and digits first, then word characters and . + # -
_TAG_RE = re.compile(r"^[^\W_][\w.+#-]{0,49}$")


def text(value: object, what: str, *, max_bytes: int | None = None, allow_empty: bool = False,
         setting: str | None = None, fix: str = "shorten it") -> str:
    """Return ``value`` as checked text: UTF-8, no NUL bytes, within ``max_bytes``.

    ``setting`` names the memsite setting (``plugins.memsite.<setting>``) that sets ``max_bytes``
    (None: a fixed limit), so the message says which cap was hit.
    """
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{what}: not valid UTF-8 (byte {exc.start}); send UTF-8 text") from None
    if not isinstance(value, str):
        raise InvalidInput(f"{what}: expected text, got {type(value).__name__}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(_not_text(what, value, exc.start)) from None
    if "\x00" in value:
        line = value.count("\n", 0, value.index("\x00")) + 1
        raise InvalidInput(f"{what}: contains a NUL byte (line {line}); memories are text")
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{what}: is empty; write what should be remembered")
    if max_bytes is not None and size > max_bytes:
        raise InvalidInput(f"{what}: is {size} bytes, over {_cap(max_bytes, setting)}; {fix}")
    return value


def _not_text(what: str, value: str, start: int) -> str:
    """What to say of text holding a character UTF-8 cannot write: a byte of input that was not UTF-8 (kept as
    a surrogate escape: binary data, most likely), or a lone surrogate a program passed."""
    char = value[start]
    line = value.count("\n", 0, start) + 1
    if "\udc80" <= char <= "\udcff":
        offset = len(value[:start].encode("utf-8", "surrogateescape"))
        return (f"{what}: not UTF-8 text (byte 0x{ord(char) - 0xDC00:02x} at byte {offset}, line {line}): binary "
                "data (an image, an archive?) cannot be remembered; send UTF-8 text")
    return (f"{what}: not valid text (a lone surrogate, U+{ord(char):04X}, at character {start}, line {line}); "
            "send UTF-8 text")


def read_capped(stream: BinaryIO, what: str, *, max_bytes: int, setting: str | None = None,
                fix: str = "shorten it") -> bytes:
    """Read ``stream`` to its end, but never more than ``max_bytes`` + 1 bytes: what is longer is refused unread.

    Raises:
        InvalidInput: the stream holds more than ``max_bytes``, naming the cap
            (and its memsite setting).
    """
    data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InvalidInput(f"{what}: more than {max_bytes} bytes, over {_cap(max_bytes, setting)}; {fix}")
    return data


def _cap(max_bytes: int, setting: str | None) -> str:
    return f"the {max_bytes}-byte cap (plugins.memsite.{setting})" if setting else f"the {max_bytes}-byte limit"


def name(value: object, what: str = "agent") -> str:
    """A name safe as a folder and a branch component (no '/', no '..')."""
    if not isinstance(value, str) or not _NAME_RE.match(value) or ".." in value or value.endswith((".", ".lock")):
        raise InvalidInput(
            f"{what} {value!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return value


def agent(value: object) -> str:
    """An agent's name as memsite writes it: a :func:`name` as given; a person's name (spaces, accents) as its
    slug, the way git's ``user.name`` becomes one ('Team Lead' -> ``team-lead``).

    Raises:
        InvalidInput: not a name and no person's name either: a path ('/' or
            '\\'), a name's characters in a shape git or a folder refuses
            ('.hidden', 'x.lock', '..'), no letter or digit, over 64 characters.
    """
    if (isinstance(value, str) and len(value) <= 64 and not _NAME_CHARS.match(value) and "/" not in value
            and "\\" not in value and any(c.isascii() and c.isalnum() for c in unicodedata.normalize("NFKD", value))):
        return name(slugify(value, limit=64))
    return name(value)


def branch(value: object) -> str:
    """The ref of a branch name (``main`` or ``refs/heads/main`` -> ``refs/heads/main``): slash-separated names.

    Raises:
        InvalidInput: not a name git would take for a branch.
    """
    short = value.removeprefix("refs/heads/") if isinstance(value, str) else value
    if not isinstance(short, str) or not short.split("/")[0]:
        raise InvalidInput(f"branch {value!r}: expected a branch name such as 'main' or 'agent/planner'")
    for part in short.split("/"):
        name(part, "branch part")
    return f"refs/heads/{short}"


def tags(values: Iterable[object] | str | None) -> tuple[str, ...]:
    """Checked tags, duplicates dropped, order kept."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    result: list[str] = []
    for tag in values:
        if not isinstance(tag, str) or not _TAG_RE.match(tag) or ".." in tag:
            raise InvalidInput(
                f"tag {tag!r}: use a word of up to 50 letters, digits, '_', '.', '+', '#' or '-' "
                "(no '/', spaces or '..')"
            )
        if tag not in result:
            result.append(tag)
    return tuple(result)


def no_secrets(fields: dict[str, str | None], *, excerpts: Iterable[str] = ()) -> None:
    """Refuse text that looks like a credential, naming field, line and rule.

    ``excerpts`` names fields cut from the ``content`` field (an abstract or
    overview derived from it): when no rule can match in the content, none
    can in them (see :func:`secrets.rules_for`), so they are not scanned again.
    """
    skip: set[str] = set()
    for field, value in fields.items():
        if not value or field in skip:
            continue
        rules = secrets.rules_for(value)
        if not rules:
            if field == "content":
                skip.update(excerpts)
            continue
        findings = secrets.matches(value, rules)
        if findings:
            first = findings[0]
            more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
            raise SecretFound(
                f"{field} line {first.line}: looks like {first.description} (rule {first.rule}){more}; "
                "nothing was written: remove the secret and store where it is kept instead"
            )


# --- moments in time (recall's since / until, as of) ----------------------------------

_AGO_RE = re.compile(r"^(\d+(?:\.\d+)?)[\s.]*(second|minute|hour|day|week|month|year)s?[\s.]*ago$")
_UNIT_DAYS = {"second": 1 / 86400, "minute": 1 / 1440, "hour": 1 / 24, "day": 1, "week": 7, "month": 30.4375,
              "year": 365.25}
MOMENT_FORMS = "2026-03-01, 2026-03-01T09:30Z, '2 weeks ago', 'yesterday', 'today' or 'now'"


def moment(value: object, what: str, now: datetime, *, end_of_day: bool = False) -> datetime | None:
    """``value`` as a moment in UTC, read as git reads ``--since`` and ``--until``; None stays None.

    A datetime (naive ones are UTC), an ISO date or date and time, ``N units ago`` (``2.weeks.ago``
    too), ``yesterday``, ``today`` or ``now``. A date alone is the start of that day, or its end
    with ``end_of_day`` (so ``--until 2026-03-01`` takes in the 1st of March).
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return _day(value, end_of_day)
    if not isinstance(value, str):
        raise InvalidInput(f"{what}: expected a date or a time, got {type(value).__name__}")
    spoken = " ".join(value.lower().split())
    if spoken == "now":
        return now
    if spoken in ("today", "yesterday"):
        return _day(now.date() - timedelta(days=spoken == "yesterday"), end_of_day)
    ago = _AGO_RE.match(spoken)
    if ago:
        return now - timedelta(days=float(ago.group(1)) * _UNIT_DAYS[ago.group(2)])
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
            return _day(date.fromisoformat(value.strip()), end_of_day)
        return moment(datetime.fromisoformat(value.strip().replace("Z", "+00:00")), what, now)
    except ValueError:
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise InvalidInput(f"{what}: {shown!r} is not a date or a time; use {MOMENT_FORMS}") from None


def _day(day: date, end: bool) -> datetime:
    return datetime.combine(day, time.max if end else time.min, tzinfo=UTC)
