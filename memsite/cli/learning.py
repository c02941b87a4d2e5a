"""Commands that learn from conversations: ingest (resumable) and skill drafts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .. import Extractor
from ..api import MemoryStore
from ..foundation.errors import MemsiteError
from .common import COUNT, Context, echo, main, pass_context


class _IngestProgress:
    """Shows extraction, then a bar over the candidates being stored."""

    def __init__(self) -> None:
        self._bar: Any = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage == "extracting":
            echo("Extracting memories from the conversation...", err=True)
            return
        if self._bar is None:
            self._bar = click.progressbar(length=max(total, 1), label="Storing memories", file=sys.stderr)
            self._bar.__enter__()
        self._bar.update(done - self._bar.pos)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


def _extractor(store: MemoryStore) -> Extractor | None:
    llm = store.language_model()
    return None if llm is None else Extractor(llm, config=store.config)


def _required(extractor: Extractor | None) -> Extractor:
    if extractor is None:
        raise MemsiteError("no LLM configured to extract memories with: set MEMSITE_LLM_BASE_URL and "
                           "MEMSITE_LLM_MODEL (and MEMSITE_LLM_API_KEY if the endpoint needs one)")
    return extractor


def _echo_stats(key: str, stats: dict[str, int]) -> None:
    echo(f"{key}: {stats['created']} created, {stats['merged']} merged, {stats['skipped']} skipped"
         + (f", {stats['refused']} refused" if stats.get("refused") else ""))


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--session-key", help="Names the checkpoint (default: derived from the conversation).")
@pass_context
def ingest(ctx: Context, file: str, session_key: str | None) -> None:
    """Turn a conversation into memories through an LLM, resumably.

    FILE is JSON: a list of {"role", "content"} messages, or an object with
    them under "messages" ('-' reads stdin); at most 16 MiB. The LLM is the
    OpenAI-compatible endpoint in MEMSITE_LLM_BASE_URL / MEMSITE_LLM_MODEL /
    MEMSITE_LLM_API_KEY.
    If interrupted, 'memsite resume' finishes the work without asking the
    LLM again; running the same command again does the same.

    \b
    Example:
        memsite ingest chat.json --session-key run-42
    """
    messages = _read_conversation(file)
    with ctx.store() as store:
        progress = _IngestProgress()
        try:
            stats = store.ingest(messages, _required(_extractor(store)), session_key, progress=progress)
        except KeyboardInterrupt:
            progress.close()
            echo("Interrupted: nothing is lost; 'memsite resume --all' finishes the ingest.", err=True)
            raise
        finally:
            progress.close()
    _echo_stats(session_key or "ingest", stats)


def _read_conversation(file: str) -> Any:
    from ..features.ingest import MAX_CONVERSATION_BYTES
    from ..foundation.inputs import read_capped

    what = "standard input" if file == "-" else file

    def read(stream: Any) -> bytes:
        return read_capped(stream, what, max_bytes=MAX_CONVERSATION_BYTES, fix="ingest it in parts")

    try:
        if file == "-":
            data = read(sys.stdin.buffer)
        else:
            with open(file, "rb") as stream:
                data = read(stream)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MemsiteError(f"{what}: cannot read it ({exc})") from None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MemsiteError(f"{file}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if isinstance(parsed, dict):
        parsed = parsed.get("messages")
    if not isinstance(parsed, list):
        raise MemsiteError(f"{file}: expected a list of messages or an object with a 'messages' list")
    return parsed


@main.command()
@click.argument("key", required=False)
@click.option("--all", "resume_all", is_flag=True, help="Resume every unfinished ingest.")
@pass_context
def resume(ctx: Context, key: str | None, resume_all: bool) -> None:
    """Finish interrupted ingests (without KEY or --all: list them).

    \b
    Examples:
        memsite resume
        memsite resume run-42
        memsite resume --all
    """
    with ctx.store() as store:
        keys = store.incomplete_ingests() if resume_all or key is None else [key]
        if key is None and not resume_all:
            for waiting in keys:
                echo(waiting)
            if not keys:
                echo("No unfinished ingests.", err=True)
            return
        extractor = _extractor(store)
        for waiting in keys:
            progress = _IngestProgress()
            try:
                stats = store.resume(waiting, extractor, progress=progress)
            finally:
                progress.close()
            _echo_stats(waiting, stats)


@main.command()
@click.option("--threshold", default=5, show_default=True, type=COUNT,
              help="Patterns recalled at least this many times.")
@click.option("--write", "folder", type=click.Path(file_okay=False, path_type=Path),
              help="Write each draft to FOLDER/<name>/SKILL.md (never over one a person edited).")
@click.option("--llm/--no-llm", "use_llm", default=True, show_default=True,
              help="Analyse patterns with the LLM in MEMSITE_LLM_* when one is configured.")
@pass_context
def skills(ctx: Context, threshold: int, folder: Path | None, use_llm: bool) -> None:
    """List patterns used often enough to become agent skills, or draft them.

    \b
    Examples:
        memsite skills
        memsite skills --threshold 3 --write skills/
    """
    with ctx.store() as store:
        llm = store.language_model() if use_llm else None
        if folder is None:
            found = store.skill_candidates(threshold=threshold, llm=llm)
        else:
            drafted = store.draft_skills(folder, threshold=threshold, llm=llm)
            found = [candidate for candidate, _, _ in drafted]
    if folder is None:
        for c in found:
            echo(f"{c.name}  {c.confidence:.0%}  recalled {c.recalls}x  from {c.source_pattern_id}  "
                 f"{c.description}")
    else:
        for _, path, status in drafted:
            echo(f"{status:<9} {path}" + ("  (edited by a person: left alone)" if status == "kept" else ""))
    if not found:
        echo(f"No pattern has been recalled {threshold} times yet.", err=True)
