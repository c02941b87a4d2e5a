"""Untrusted text on its way to a terminal: control characters and bidi overrides made visible.

Agents write memories from text they did not choose, so a memory may hold an
escape sequence (``ESC ] 0 ; title BEL`` retitles the terminal, others move
the cursor, rewrite the screen or set the clipboard) or a bidirectional
override (U+202E shows ``exe.txt`` as ``txt.exe``). Refusing them at write time
would lose text an agent meant to keep, so they are stored as given and
escaped where they are shown, the way git quotes an odd file name:
``\\x1b]0;pwned\\x07``, ``\\u202e``. A backslash itself is left alone: the
escaping is for reading, not to be decoded.

``json_text`` does the same for JSON output, which stays valid JSON that
decodes to exactly the stored text: ``json.dumps`` escapes C0 controls but,
with ``ensure_ascii=False``, passes DEL, C1 controls and bidi overrides raw.
"""

from __future__ import annotations

import json
import re
from typing import Any

# C0 controls (tab and newline kept where lines are allowed), DEL, C1 controls,
# bidi embeddings, overrides and isolates, the Arabic letter mark, the line and
# paragraph separators (some terminals break lines at them).
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_MULTILINE = re.compile(f"[{_UNSAFE}]")
_ONE_LINE = re.compile(f"[\t\n{_UNSAFE}]")
_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: object, *, multiline: bool = True) -> str:
    """``text`` with every control character and bidi control shown as an escape.

    Args:
        multiline: keep newlines and tabs (a memory's body); False escapes
            them too (a field shown on one line of a table).
    """
    value = "" if text is None else str(text)
    return (_MULTILINE if multiline else _ONE_LINE).sub(_escape, value)


def json_text(data: Any, **kwargs: Any) -> str:
    """``json.dumps(data, ensure_ascii=False, ...)`` with DEL, C1 and bidi controls escaped as ``\\uXXXX``."""
    return json_safe(json.dumps(data, ensure_ascii=False, **kwargs))


def json_safe(text: str) -> str:
    """JSON text (as ``json.dumps`` wrote it) with DEL, C1 and bidi controls escaped as ``\\uXXXX``."""
    return _JSON.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
