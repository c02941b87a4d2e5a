"""A benchmark's results into its own section of docs/benchmarks.md, at the end of each run.

A bench script imports this module and ends its ``main`` with
``report.publish("recall", skip=args.quick)``. What the script printed to
standard output since the import (its tables and their captions; progress
goes to standard error) replaces the text between the section's markers::

    <!-- bench:recall -->
    ...
    <!-- /bench:recall -->

so the figures in the documentation are always the last full run's, with the
date, the command, the commit and the machine's load beside them. A section
that is not there yet is added at the end of the page. Smoke runs
(``skip=True``) print their tables and leave the page alone.

Printed Markdown tables are kept as they are; other lines become paragraphs,
and column-aligned plain text a text block.

:func:`timed` is the timing loop the scripts share: milliseconds per call.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "benchmarks.md"
_NAME = re.compile(r"[a-z][a-z0-9-]*\Z")
_SEPARATOR = re.compile(r"\|(\s*:?-+:?\s*\|)+\s*\Z")


class _Tee(io.TextIOBase):
    """Standard output that also keeps what was written, for :func:`publish`."""

    def __init__(self, stream: io.TextIOBase) -> None:
        self.stream = stream
        self.kept = io.StringIO()

    def write(self, text: str) -> int:
        self.kept.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str):  # encoding, fileno, isatty... of the real stream
        return getattr(self.stream, name)


if not isinstance(sys.stdout, _Tee):
    sys.stdout = _Tee(sys.stdout)


def timed(calls: list[Callable[[], Any]]) -> list[float]:
    """Milliseconds each of ``calls`` took, in order."""
    times = []
    for call in calls:
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return times


def markers(name: str) -> tuple[str, str]:
    """The lines that open and close benchmark ``name``'s section of the page."""
    return f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"


def to_markdown(printed: str) -> str:
    """A run's printed output as Markdown: tables as printed, prose as paragraphs, aligned text as a block.

    Table rows printed on their own (progress before the final table) are left
    out: the final table repeats them.
    """
    runs: list[tuple[bool, list[str]]] = []
    for line in printed.splitlines():
        line = line.rstrip()
        if not line:
            runs.append((False, []))
            continue
        is_row = line.startswith("|")
        if not runs or runs[-1][0] != is_row or (not is_row and not runs[-1][1]):
            runs.append((is_row, []))
        runs[-1][1].append(line)
    parts = []
    for is_row, lines in runs:
        if not lines:
            continue
        if is_row:
            if len(lines) > 1 and _SEPARATOR.match(lines[1]):
                parts.append("\n".join(lines))
        elif any("  " in line.strip() for line in lines):
            parts.append("```text\n" + "\n".join(lines) + "\n```")
        else:
            parts += lines
    return "\n\n".join(parts)


def section(name: str, printed: str, *, when: datetime | None = None, argv: list[str] | None = None) -> str:
    """The text between benchmark ``name``'s markers for a run that printed ``printed``."""
    when = when or datetime.now(UTC)
    argv = sys.argv if argv is None else argv
    script = Path(argv[0])
    command = shlex.join(["python", f"bench/{script.name}", *argv[1:]])
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "unknown"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"*Last run {when:%Y-%m-%d %H:%M} UTC: `{command}` at commit `{head}`, "
            f"{os.cpu_count()} cores, load average {load} at the end.*\n\n{to_markdown(printed).strip()}")


def replace_section(page: str, name: str, body: str) -> str:
    """``page`` with benchmark ``name``'s section holding ``body`` (added at the end if it has none)."""
    if not _NAME.match(name):
        raise ValueError(f"benchmark section name {name!r}: lower-case letters, digits and dashes")
    start, end = markers(name)
    block = f"{start}\n{body.strip()}\n{end}"
    found = re.search(re.escape(start) + r".*?" + re.escape(end), page, re.S)
    if found:
        return page[:found.start()] + block + page[found.end():]
    return page.rstrip("\n") + f"\n\n## {name}\n\n{block}\n"


def publish(name: str, *, skip: bool = False, page: Path = PAGE) -> None:
    """Write what this run printed into benchmark ``name``'s section of ``page`` (docs/benchmarks.md).

    Args:
        name: the section, usually the script's name (``recall``, ``commit``...).
        skip: print the tables only (a smoke run, whose figures are not the benchmark's).
        page: the Markdown page holding the sections.
    """
    if skip:
        print(f"\n(not written to {page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}: a smoke run)",
              file=sys.stderr)
        return
    printed = sys.stdout.kept.getvalue() if isinstance(sys.stdout, _Tee) else ""
    text = page.read_text() if page.exists() else "# Benchmarks\n"
    page.write_text(replace_section(text, name, section(name, printed)))
    print(f"\nResults written to {page} (section {name}).", file=sys.stderr)
