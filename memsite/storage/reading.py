"""Memory files as the store reads them, and what is wrong with those it cannot read.

Files are the truth, and people edit them too: a frontmatter broken by hand,
a file moved to another category's folder with ``git mv``, a note added
without frontmatter, a memory copied so that two files claim one id. Each is
one problem, about one file: the store reads everything else, records the
problem (the catalog keeps them, so they are known without reading again) and
refuses to change that file until someone fixes it. ``memsite check`` and
``memsite doctor`` name every one with its fix.
"""

from __future__ import annotations

import re

from ..foundation.config import Category, Config, place_of
from ..foundation.errors import FormatError
from ..foundation.fileformat import decode, parse_memory
from ..foundation.record import ID_RE, Memory

_ID_LINE = re.compile(r"""^id:[ \t]*["']?([A-Za-z0-9][A-Za-z0-9_-]{5,63})["']?[ \t]*$""", re.MULTILINE)


def read_memory(config: Config, path: str, rel: str, data: bytes) -> Memory | None:
    """The memory in the file ``path`` (``rel`` under memories/); None for a file that is not a memory file.

    Every layout is read: ``<category>/<YYYY-MM>/<NNN>/<name>.md``, and
    ``<category>/<YYYY-MM>/<name>.md`` and the flat ``<category>/<name>.md`` of
    repositories not migrated yet.

    Raises:
        FormatError: naming the file, the line or field, and the fix.
    """
    place = place_of(rel)
    if place is None:
        return None
    category = config.by_folder(place.folder)
    if category is None:
        raise FormatError(
            f"{path}: folder '{place.folder}' is not a configured category; "
            "add it under plugins.memsite.categories in mkdocs.yml or move the file"
        )
    text = decode(data, path)
    try:
        return parse_memory(text, path, category=category.name)
    except FormatError as exc:
        message = str(exc)
        if "field 'category'" in message:
            message = other_category(config, path, text, category) or message
        elif "no frontmatter" in message:
            top = path.removesuffix(f"/{rel}") if path.endswith(f"/{rel}") else config.memories_dir  # (or archive/)
            message += f", or move it out of {top}/ if it is not a memory"
        raise FormatError(message) from None


def other_category(config: Config, path: str, text: str, folder: Category) -> str | None:
    """For a memory in another category's folder: the problem, naming both ways to fix it.

    Which one is right, the folder or the field, only the person who moved or
    edited the file knows, so it is not decided for them.
    """
    try:
        memory = parse_memory(text, path)
    except FormatError:
        return None  # broken in some other way: its own message says how
    try:
        home = config.memory_folder(config.category(memory.category), memory.created)
    except KeyError:
        home = f"{config.memories_dir}/<category>/{memory.created:%Y-%m}"
    return (f"{path}: field 'category': '{memory.category}', but the file is in the folder of '{folder.name}'; "
            f"move it to a numbered folder of {home}/ (git mv) or set 'category: {folder.name}'")


def claimed_id(data: bytes) -> str | None:
    """The id a file that cannot be read says it has, when a plain ``id:`` line tells it."""
    text = data[:65536].decode("utf-8", "replace")
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    found = _ID_LINE.search(text[: end if end > 0 else len(text)])
    return found.group(1) if found and ID_RE.match(found.group(1)) else None


def duplicate_message(path: str, mid: str, kept: str) -> str:
    return (f"{path}: field 'id': {mid} is also the id of {kept}; give one of them a new id "
            "(or git rm the copy)")
