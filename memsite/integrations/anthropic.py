"""Claude's memory tool on a memsite repository (the ``memsite[anthropic]`` extra).

    import anthropic
    from memsite import MemoryStore
    from memsite.integrations.anthropic import MemsiteMemoryTool

    memory = MemsiteMemoryTool(MemoryStore("agent-memory", agent="claude"))
    runner = anthropic.Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-4-5", max_tokens=2048, tools=[memory],
        messages=[{"role": "user", "content": "Remember that I deploy on Fridays"}])

Claude keeps its memory as files under ``/memories`` and sends ``view``,
``create``, ``str_replace``, ``insert``, ``delete`` and ``rename`` commands
(the ``memory_20250818`` tool); :class:`MemsiteMemoryTool` (and its async twin
:class:`MemsiteAsyncMemoryTool`) carries them out on the repository, as the
SDK's ``BetaLocalFilesystemMemoryTool`` does on a plain folder.

The mapping: every file under ``/memories`` is one memory. Its body is what
Claude wrote (memsite's canonical Markdown: line ends LF, no blank space at
line ends or around the text), so recall, the site, ``memsite diff`` and
review read it as any other memory. Its frontmatter says where Claude keeps
it, ``file: /memories/projects/acme.md``, and holds what the canonical body
left out (``file_newlines``: the newlines that ended the text; ``file_text``:
the whole text, for one with carriage returns or blank space at line ends),
so Claude reads back the bytes it wrote, and never the frontmatter. A file
in a first folder named for a category (``/memories/preferences/...``, an
alias too) is a memory of that category; any other, of the tool's
``category`` (``general``). Folders are not stored: a folder is there while
a file is in it.

Each command that changes something is one commit by the store's agent,
named for the command and the path (``Memory tool: create /memories/x.md``);
a folder's delete or rename is one commit for all its files. Commands run
under the repository's lock against the branch tip, so two tools (two
processes) writing to one repository at once see each other's files and lose
nothing. What a command cannot do is a ``ToolError`` of one line for Claude,
and nothing is written: paths outside ``/memories``, ``..``, percent-encoded
characters, backslashes, NUL and control characters, credentials (as
:meth:`memsite.MemoryStore.remember` refuses them), text over
``max_memory_bytes``, empty files.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..api import storage_of
from ..foundation import inputs
from ..foundation.errors import InvalidInput, MemsiteError
from ..foundation.fileformat import MAX_FRONTMATTER_BYTES, dump_yaml
from ..foundation.record import derive_abstract, normalize_content
from . import unusable

try:
    from anthropic.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
    from anyio.to_thread import run_sync
except ImportError as exc:
    raise ImportError(unusable("memsite's memory tool for Claude", "anthropic", "2.10 or later", "anthropic",
                               exc)) from exc

if TYPE_CHECKING:
    from ..api import MemoryStore
    from ..foundation.record import Memory
    from ..storage import Transaction

ROOT = "/memories"
SOURCE = "memory-tool"
VIEW_CHARS = 16_000  # the most characters a folder's listing shows; view_range pages through the rest
MAX_PATH_BYTES = 1024
MAX_NAME_BYTES = 255
LINE_NUMBER_WIDTH = 6  # the SDK's: line numbers right-aligned to six places, then a tab
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PLAIN_PATH = re.compile(r"/memories(?:/[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99})+")  # (no '.', '..' or hidden names)


@dataclass(frozen=True)
class _File:
    """A file under /memories: the memory that holds it and the size of its text in bytes."""

    id: str
    size: int


class MemoryFiles:
    """The files under ``/memories`` in a memory repository: what both tools run their commands on.

    Args:
        store: the memory repository, opened as the agent that writes.
        category: the category of files outside a category's folder (``general``).

    Raises:
        InvalidInput: an unknown ``category``.
    """

    def __init__(self, store: MemoryStore, *, category: str = "general") -> None:
        self.store = store
        self.category = store.config.route(category).name
        self._files: dict[str, _File] = {}  # path under /memories ("projects/acme.md") -> file
        self._tip: str | None = ""  # the commit _files reflects ("": none yet)
        self._lock = threading.Lock()

    # --- the commands ------------------------------------------------------------------

    def view(self, path: object, view_range: object = None) -> str:
        """A file's lines, numbered; a folder's files and folders two levels deep, with sizes."""
        where = _relative(path)
        with self._lock:
            self._catch_up()
            if where in self._files:
                return _numbered(f"Here's the content of {path} with line numbers:", self._text(where), view_range)
            if where and not self._is_folder(where):
                raise ToolError(f"The path {path} does not exist. Please provide a valid path.")
            return self._listing(str(path), where, view_range)

    def create(self, path: object, file_text: object) -> str:
        """A new file; refused if the path is taken (a file or a folder)."""
        where = _relative(path)
        text = self._checked_text(file_text, "file_text", path)
        inputs.no_secrets({"path": where})

        def write(tx: Transaction) -> None:
            if not where or where in self._files or self._is_folder(where):
                raise ToolError(f"File {path} already exists")
            self._refuse_file_above(where, path)
            self._add(tx, where, text)

        self._write(write, f"create {path}")
        return f"File created successfully at: {path}"

    def str_replace(self, path: object, old_str: object, new_str: object) -> str:
        """Replace the one place ``old_str`` is in the file; refused for none or several, naming their lines."""
        where = _relative(path)
        old = _string(old_str, "old_str")
        new = _string("" if new_str is None else new_str, "new_str")
        if not old:
            raise ToolError("No replacement was performed: old_str is empty; give the exact text to replace")
        snippet: list[str] = []

        def write(tx: Transaction) -> None:
            text = self._file_text(where, path)
            count = text.count(old)
            if count == 0:
                raise ToolError(f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}.")
            if count > 1:
                lines = [text[:pos].count("\n") + 1 for pos in _positions(text, old)]
                raise ToolError(f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines: "
                                f"{', '.join(map(str, lines))}. Please ensure it is unique")
            at = text.find(old)
            changed = text.replace(old, new)
            self._change(tx, where, self._checked_text(changed, "the new text", path))
            line = text[:at].count("\n")
            numbered = changed.split("\n")
            snippet[:] = [f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{numbered[n - 1]}"  # (a write may run twice)
                          for n in range(max(0, line - 2) + 1, min(len(numbered), line + 3) + 1)]

        self._write(write, f"str_replace {path}")
        return ("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
                + "\n".join(snippet))

    def insert(self, path: object, insert_line: object, insert_text: object) -> str:
        """Insert ``insert_text`` after line ``insert_line`` (0: at the top)."""
        where = _relative(path)
        added = _string(insert_text, "insert_text")
        if isinstance(insert_line, bool) or not isinstance(insert_line, int):
            raise ToolError(f"Invalid `insert_line` parameter: {insert_line!r}. It should be a whole number.")

        def write(tx: Transaction) -> None:
            lines = self._file_text(where, path).split("\n")
            if lines[-1] == "":
                lines.pop()
            if insert_line < 0 or insert_line > len(lines):
                raise ToolError(f"Invalid `insert_line` parameter: {insert_line}. "
                                f"It should be within the range [0, {len(lines)}].")
            lines.insert(insert_line, added.rstrip("\n"))
            self._change(tx, where, self._checked_text("\n".join(lines) + "\n", "the new text", path))

        self._write(write, f"insert {path}")
        return f"The file {path} has been edited."

    def delete(self, path: object) -> str:
        """Delete a file, or a folder with every file in it."""
        where = _relative(path)
        if not where:
            raise ToolError("Cannot delete the /memories directory itself")

        def write(tx: Transaction) -> None:
            doomed = self._under(where)
            if not doomed:
                raise ToolError(f"The path {path} does not exist")
            for name in doomed:
                tx.forget(self._files[name].id, reason=f"memory tool: delete {path}")
                del self._files[name]

        self._write(write, f"delete {path}")
        return f"Successfully deleted {path}"

    def rename(self, old_path: object, new_path: object) -> str:
        """Move a file or a folder; refused onto an existing path. A move between category folders recategorises."""
        old, new = _relative(old_path), _relative(new_path)
        inputs.no_secrets({"new_path": new})
        if not old:
            raise ToolError("Cannot rename the /memories directory itself")

        def write(tx: Transaction) -> None:
            if not new or new in self._files or self._is_folder(new):
                raise ToolError(f"The destination {new_path} already exists")
            moving = self._under(old)
            if not moving:
                raise ToolError(f"The path {old_path} does not exist")
            if new.startswith(old + "/"):
                raise ToolError(f"Cannot move {old_path} into itself ({new_path})")
            self._refuse_file_above(new, new_path)
            for name in moving:
                target = new + name[len(old):]
                file = self._files.pop(name)
                memory = tx.get(file.id)
                tx.update(file.id, category=self._category_of(target),
                          extra={**memory.extra, "file": f"{ROOT}/{target}"})
                self._files[target] = file

        self._write(write, f"rename {old_path} -> {new_path}")
        return f"Successfully renamed {old_path} to {new_path}"

    def clear_all(self) -> str:
        """Delete every file under /memories, in one commit."""
        def write(tx: Transaction) -> None:
            for name in list(self._files):
                tx.forget(self._files.pop(name).id, reason="memory tool: clear all memory")

        self._write(write, "clear all memory")
        return "All memory cleared"

    # --- reading ------------------------------------------------------------------------

    def _catch_up(self) -> None:
        """Read the files again when the branch moved by another hand (another tool, a person, a pull)."""
        tip = self.store.tip()
        if tip == self._tip:
            return
        self.store.fresh()
        files: dict[str, _File] = {}
        fields = storage_of(self.store).catalog.with_field("file", "file_newlines", "file_text")
        for mid, size, path, newlines, exact in fields:
            where = _file_of(path)
            if where is not None:
                size = len(exact.encode("utf-8")) if isinstance(exact, str) else size + _newlines(newlines)
                files[where] = _File(mid, size)
        self._files, self._tip = files, tip

    def _text(self, where: str) -> str:
        return _text_of(self.store.get(self._files[where].id))

    def _file_text(self, where: str, path: object) -> str:
        if where not in self._files:
            if not where or self._is_folder(where):
                raise ToolError(f"The path {path} is not a file.")
            raise ToolError(f"The path {path} does not exist. Please provide a valid path.")
        return self._text(where)

    def _is_folder(self, where: str) -> bool:
        prefix = where + "/"
        return any(name.startswith(prefix) for name in self._files)

    def _under(self, where: str) -> list[str]:
        """The file ``where``, or the files in the folder ``where``."""
        if where in self._files:
            return [where]
        prefix = where + "/"
        return sorted(name for name in self._files if name.startswith(prefix))

    def _refuse_file_above(self, where: str, path: object) -> None:
        parts = where.split("/")
        for i in range(1, len(parts)):
            above = "/".join(parts[:i])
            if above in self._files:
                raise ToolError(f"Cannot create {path}: {ROOT}/{above} is a file, not a directory")

    def _category_of(self, where: str) -> str:
        """The category of the folder a file is in, when its first folder is named for one; else the tool's."""
        first, _, rest = where.partition("/")
        if rest:
            for category in self.store.config.categories:
                if first == category.name or first in category.aliases:
                    return category.name
        return self.category

    def _listing(self, path: str, where: str, view_range: object) -> str:
        """The SDK's listing (two levels, hidden items left out, sorted by name), paged when it is long."""
        tree: dict[str, Any] = {}
        total = 0
        prefix = where + "/" if where else ""
        for name, file in self._files.items():
            if prefix and not name.startswith(prefix):
                continue
            size = file.size
            total += size
            parts = name[len(prefix):].split("/", 2)
            if parts[0][0] == "." or (len(parts) > 1 and parts[1][0] == "."):
                continue
            if len(parts) == 1:
                tree[parts[0]] = size
                continue
            node = tree.setdefault(parts[0], [0, {}])
            node[0] += size
            if len(parts) == 2:
                node[1][parts[1]] = size
            else:
                child = node[1].setdefault(parts[1], [0, {}])
                child[0] += size
        entries: list[tuple[int, str]] = []  # (size, path under the folder viewed), formatted only when shown
        for name in sorted(tree):
            node = tree[name]
            if isinstance(node, int):
                entries.append((node, name))
                continue
            entries.append((node[0], f"{name}/"))
            for child in sorted(node[1]):
                value = node[1][child]
                entries.append((value[0], f"{name}/{child}/") if isinstance(value, list)
                               else (value, f"{name}/{child}"))
        head = (f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:\n"
                f"{_size(total)}\t{path}")
        first, last = _entry_range(view_range, len(entries))
        shown: list[str] = []
        budget = VIEW_CHARS - len(head) - 200  # room for the line that says how to see the rest
        for size, name in entries[first - 1:last]:
            entry = f"{_size(size)}\t{path}/{name}"
            budget -= len(entry) + 1
            if budget < 0:
                break
            shown.append(entry)
        if len(shown) == len(entries):
            return "\n".join([head, *shown])
        if not shown:
            return f"{head}\n({path} has {len(entries)} entries; view_range [{first}, ...] is past them)"
        end = first + len(shown) - 1
        more = f"(entries {first}-{end} of {len(entries)} are shown"
        if end < len(entries):
            more += f"; view {path} with view_range [{end + 1}, {end + len(shown)}] for the next ones, or view a folder"
        return "\n".join([head, *shown, more + ")"])

    # --- writing ------------------------------------------------------------------------

    def _write(self, body: Callable[[Transaction], None], what: str) -> None:
        """Run ``body`` in one commit against the branch tip, under the repository's lock.

        A refusal raised in it (or by memsite) commits nothing and leaves the files as they were.
        """
        with self._lock:
            before = (self._files, self._tip)

            def attempt(tx: Transaction) -> None:
                self._catch_up()
                self._files = dict(self._files)  # (the copy is dropped if the commit is not made)
                body(tx)
                tx.trailers.append(("Memory-Tool", what))  # (the subject is cut at 72 characters; this is not)

            try:
                tx, _ = self.store.write(attempt, f"Memory tool: {what}")
            except BaseException:
                self._files, self._tip = before
                raise
            if tx.commit is not None:
                self._tip = tx.commit

    def _add(self, tx: Transaction, where: str, text: str) -> None:
        body, fields = _stored(text)
        memory = tx.remember(body, category=self._category_of(where), abstract=_abstract(body, where),
                             source=SOURCE, dedupe=False, extra={"file": f"{ROOT}/{where}", **fields})
        self._files[where] = _File(memory.id, len(text.encode("utf-8")))

    def _change(self, tx: Transaction, where: str, text: str) -> None:
        file = self._files[where]
        body, fields = _stored(text)
        kept = {k: v for k, v in tx.get(file.id).extra.items() if k not in ("file_newlines", "file_text")}
        tx.update(file.id, content=body, abstract=_abstract(body, where), overview=None, extra={**kept, **fields})
        self._files[where] = _File(file.id, len(text.encode("utf-8")))

    def _checked_text(self, value: object, what: str, path: object) -> str:
        text = _string(value, what)
        cap = self.store.config.max_memory_bytes
        size = len(text.encode("utf-8"))
        if size > cap:
            raise ToolError(f"{path}: {what} is {size} bytes, over the {cap}-byte cap "
                            "(plugins.memsite.max_memory_bytes); split it into smaller files")
        if not normalize_content(text):
            raise ToolError(f"{path}: {what} is empty; write what should be remembered, or delete the file")
        return text


# --- the tools Claude calls -----------------------------------------------------------------


def _refusals(method: Callable[..., str]) -> Callable[..., str]:
    """memsite's refusals (a credential, a damaged file, a read-only repository) as ToolErrors of one line."""
    def run(*args: Any) -> str:
        try:
            return method(*args)
        except MemsiteError as exc:
            raise ToolError(_for_claude(str(exc), args)) from None

    return run


class MemsiteMemoryTool(BetaAbstractMemoryTool):
    """Claude's memory tool (``memory_20250818``) whose ``/memories`` are memories in a memsite repository.

    Args:
        store: the memory repository, opened as the agent that writes (the commits' author).
        category: the category of files outside a category's folder (``general``).
        cache_control: as for the SDK's tool.

    Raises:
        InvalidInput: an unknown ``category``.
    """

    def __init__(self, store: MemoryStore, *, category: str = "general", cache_control: Any = None) -> None:
        super().__init__(cache_control=cache_control)
        self.files = MemoryFiles(store, category=category)

    def view(self, command: Any) -> str:
        return _refusals(self.files.view)(_arg(command, "path"), getattr(command, "view_range", None))

    def create(self, command: Any) -> str:
        return _refusals(self.files.create)(_arg(command, "path"), _arg(command, "file_text"))

    def str_replace(self, command: Any) -> str:
        return _refusals(self.files.str_replace)(_arg(command, "path"), _arg(command, "old_str"),
                                                 getattr(command, "new_str", ""))

    def insert(self, command: Any) -> str:
        return _refusals(self.files.insert)(_arg(command, "path"), _arg(command, "insert_line"),
                                            _arg(command, "insert_text"))

    def delete(self, command: Any) -> str:
        return _refusals(self.files.delete)(_arg(command, "path"))

    def rename(self, command: Any) -> str:
        return _refusals(self.files.rename)(_arg(command, "old_path"), _arg(command, "new_path"))

    def clear_all_memory(self) -> str:
        return _refusals(self.files.clear_all)()


class MemsiteAsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """:class:`MemsiteMemoryTool` for the SDK's async client: each command runs in a worker thread.

    Args:
        store: the memory repository, opened as the agent that writes.
        category: the category of files outside a category's folder (``general``).
        cache_control: as for the SDK's tool.
    """

    def __init__(self, store: MemoryStore, *, category: str = "general", cache_control: Any = None) -> None:
        super().__init__(cache_control=cache_control)
        self.files = MemoryFiles(store, category=category)

    async def view(self, command: Any) -> str:
        return await _in_thread(self.files.view, _arg(command, "path"), getattr(command, "view_range", None))

    async def create(self, command: Any) -> str:
        return await _in_thread(self.files.create, _arg(command, "path"), _arg(command, "file_text"))

    async def str_replace(self, command: Any) -> str:
        return await _in_thread(self.files.str_replace, _arg(command, "path"), _arg(command, "old_str"),
                                getattr(command, "new_str", ""))

    async def insert(self, command: Any) -> str:
        return await _in_thread(self.files.insert, _arg(command, "path"), _arg(command, "insert_line"),
                                _arg(command, "insert_text"))

    async def delete(self, command: Any) -> str:
        return await _in_thread(self.files.delete, _arg(command, "path"))

    async def rename(self, command: Any) -> str:
        return await _in_thread(self.files.rename, _arg(command, "old_path"), _arg(command, "new_path"))

    async def clear_all_memory(self) -> str:
        return await _in_thread(self.files.clear_all)


async def _in_thread(method: Callable[..., str], *args: Any) -> str:
    return await run_sync(lambda: _refusals(method)(*args))


def _arg(command: Any, name: str) -> Any:
    """A field of the command (the SDK builds commands without checking them)."""
    value = getattr(command, name, None)
    if value is None:
        raise ToolError(f"The {getattr(command, 'command', 'memory')} command needs `{name}`")
    return value


def _for_claude(message: str, args: Iterable[Any]) -> str:
    """memsite's message, naming the file Claude knows where it names the field memsite checked ("content")."""
    path = next((a for a in args if isinstance(a, str) and a.startswith(ROOT)), None)
    return path + message[len("content"):] if path is not None and message.startswith("content") else message


# --- paths and texts ---------------------------------------------------------------------


def _relative(path: object) -> str:
    """The path under /memories of a path Claude gives ("" for /memories itself); ToolError for any other."""
    if not isinstance(path, str):
        raise ToolError(f"Path must be text starting with /memories, got: {path!r}")
    if "\x00" in path:
        raise ToolError(f"Path {path!r} contains a NUL byte; paths are text")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise ToolError(f"Path must start with /memories, got: {path}")
    if escaped := _ESCAPE.search(path):
        raise ToolError(f"Path {path} has percent-encoded characters ({escaped.group()}); "
                        "write the path as plain text")
    if "\\" in path:
        raise ToolError(f"Path {path} has a backslash; separate folders with /")
    if _CONTROL.search(path):
        raise ToolError(f"Path {path!r} has a control character; use letters, digits and punctuation")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise ToolError(f"Path {path[:60]}... is longer than {MAX_PATH_BYTES} bytes; use a shorter path")
    parts = [part for part in path[len(ROOT):].split("/") if part not in ("", ".")]
    if ".." in parts:
        depth = 0
        for part in parts:
            depth += -1 if part == ".." else 1
            if depth < 0:
                raise ToolError(f"Path {path} would escape /memories directory")
        raise ToolError(f"Path {path} has '..'; name the file by its own path under /memories")
    for part in parts:
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise ToolError(f"Path {path[:60]}...: a name is longer than {MAX_NAME_BYTES} bytes; use a shorter one")
        if part != part.strip():
            raise ToolError(f"Path {path!r}: a name starts or ends with blank space; remove it")
    return "/".join(parts)


def _string(value: object, what: str) -> str:
    """``value`` as text (UTF-8 bytes are taken); InvalidInput for anything else, lone surrogates and NUL."""
    return inputs.text(value, what, allow_empty=True)


def _stored(text: str) -> tuple[str, dict[str, Any]]:
    """The memory body of a file's text, and the fields that give the text back exactly."""
    body = normalize_content(text)
    if text == body:
        return body, {}
    tail = text[len(body):]
    if text.startswith(body) and tail == "\n" * len(tail):
        return body, {"file_newlines": len(tail)}
    if len(dump_yaml({"file_text": text}).encode("utf-8")) > MAX_FRONTMATTER_BYTES // 2:
        raise InvalidInput(f"content: has carriage returns or blank space at line ends, which memsite keeps "
                           f"exactly only in files up to {MAX_FRONTMATTER_BYTES // 2} bytes; remove them")
    return body, {"file_text": text}


def _abstract(body: str, where: str) -> str:
    """The body's first line, or the file's path when no line says anything (a body of '---')."""
    return derive_abstract(body) or f"{ROOT}/{where}"


def _text_of(memory: Memory) -> str:
    """The text Claude wrote: the body, with what the canonical form left out."""
    exact = memory.extra.get("file_text")
    if isinstance(exact, str) and normalize_content(exact) == memory.content:  # (not when a person edited the body)
        return exact
    return memory.content + "\n" * _newlines(memory.extra.get("file_newlines"))


def _newlines(value: object) -> int:
    """The ``file_newlines`` field as a count (0 for anything a hand edit made of it)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1_000_000 else 0


def _file_of(path: object) -> str | None:
    """The path under /memories of a memory's ``file`` field; None for none and for a path the tool refuses."""
    if not isinstance(path, str):
        return None
    if _PLAIN_PATH.fullmatch(path):  # (what the tool writes: checked once, quickly; the rest in full)
        return path[len(ROOT) + 1:]
    try:
        where = _relative(path)
    except ToolError:
        return None
    return where or None


def _positions(text: str, part: str) -> list[int]:
    found, at = [], text.find(part)
    while at != -1:
        found.append(at)
        at = text.find(part, at + 1)
    return found


def _numbered(head: str, text: str, view_range: object) -> str:
    """The SDK's file view: every line (or ``view_range`` [start, end], end -1 for the last) after its number."""
    lines = text.split("\n")
    start = 1
    if view_range is not None:
        if (not isinstance(view_range, (list, tuple)) or len(view_range) != 2
                or not all(isinstance(n, int) and not isinstance(n, bool) for n in view_range)):
            raise ToolError(f"Invalid `view_range` parameter: {view_range!r}. It should be [start, end], "
                            "end -1 for the last line.")
        start = max(1, view_range[0])
        lines = lines[start - 1:len(lines) if view_range[1] == -1 else view_range[1]]
    return head + "\n" + "\n".join(f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{line}" for n, line in enumerate(lines, start))


def _entry_range(view_range: object, count: int) -> tuple[int, int]:
    """The entries of a listing to show: ``view_range`` [first, last] (last -1: to the end), 1-based."""
    if view_range is None:
        return 1, count
    if (not isinstance(view_range, (list, tuple)) or len(view_range) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in view_range)):
        raise ToolError(f"Invalid `view_range` parameter: {view_range!r}. It should be [first, last] entries, "
                        "last -1 for the end.")
    first = max(1, view_range[0])
    return first, count if view_range[1] == -1 else min(count, view_range[1])


def _size(size: int) -> str:
    """A size as the SDK's tool prints it: 0B, 512B, 1.5K, 4.0K is 4K."""
    if size == 0:
        return "0B"
    unit = min((size.bit_length() - 1) // 10, 3)
    value = size / 1024**unit
    return f"{int(value)}{'BKMG'[unit]}" if value == int(value) else f"{value:.1f}{'BKMG'[unit]}"

