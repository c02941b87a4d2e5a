"""Checkpointed ingest: a conversation becomes memories, exactly once, even when interrupted.

An ingest runs in stages, each recorded in ``.memsite/checkpoints/<key>.json``
(written atomically) before the work that follows it:

``extracting``
    the conversation is saved, the extractor has not answered yet. Resuming
    calls the extractor again.
``storing``
    the candidates are saved; ``processed`` of them are committed. Resuming
    never calls the extractor again.

Candidates are committed in batches, one commit each (one for most ingests),
with the trailer ``Ingest-Batch: <key> <start>-<end>``. A process killed after
a batch's commit but before the checkpoint recorded it finds that commit on
resume and moves on, so each candidate is stored exactly once. A finished
ingest removes its checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..foundation.errors import InvalidInput, MemsiteError, NotFound
from ..foundation.record import format_time
from ..git.worktree import atomic_write
from .extract import Candidate, message_texts

if TYPE_CHECKING:
    from ..storage import Storage
    from .extract import Extractor

log = logging.getLogger("memsite.features.ingest")

KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
BATCH_SIZE = 200
# Largest conversation file 'memsite ingest' reads: the extractor shows the model
# only the latest part of one (Extractor.max_chars), and a file is read whole.
MAX_CONVERSATION_BYTES = 16 * 1024 * 1024
STATS = ("created", "merged", "skipped", "refused")

Progress = Callable[[str, int, int], None]  # (stage, candidates done, candidates in all)


def session_key(key: object, messages: list[dict[str, str]]) -> str:
    """``key`` checked, or one derived from the conversation (the same conversation, the same key)."""
    if key is None:
        digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
        return f"conversation-{digest[:16]}"
    if not isinstance(key, str) or not KEY_RE.match(key):
        raise InvalidInput(f"session key {key!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a "
                           "letter or digit")
    return key


class Checkpoints:
    """The checkpoint files of unfinished ingests in one repository."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def load(self, key: str) -> dict[str, Any] | None:
        try:
            text = self.path(key).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
            if data.get("stage") not in ("extracting", "storing") or data.get("session_key") != key:
                raise ValueError("unknown stage or key")
            if not isinstance(data.get("batch_size"), int) or data["batch_size"] < 1:
                raise ValueError("no batch size")
        except (ValueError, AttributeError) as exc:
            raise MemsiteError(f"{self.path(key)}: not a memsite checkpoint ({exc}); remove it to start the "
                               "ingest over") from None
        return data

    def save(self, data: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n"
        atomic_write(self.path(data["session_key"]), text.encode(), fsync=True)

    def clear(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    def keys(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(p.stem for p in self.folder.glob("*.json") if KEY_RE.match(p.stem))


def ingest(store: Storage, messages: Iterable[Mapping[str, Any]], extractor: Extractor | None,
           key: str | None, *, batch_size: int = BATCH_SIZE, progress: Progress | None = None) -> dict[str, int]:
    """See :meth:`MemoryStore.ingest`."""

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInput(f"batch_size: expected a positive whole number, got {batch_size!r}")
    conversation = [{"role": role, "content": text} for role, text in message_texts(messages)]
    key = session_key(key, conversation)
    checkpoints = Checkpoints(store.repo.state_dir / "checkpoints")
    state = checkpoints.load(key)
    if state is not None:
        log.info("ingest %s: resuming from its checkpoint (%s)", key, state["stage"])
    else:
        state = {"session_key": key, "stage": "extracting", "messages": conversation, "candidates": [],
                 "processed": 0, "stats": dict.fromkeys(STATS, 0), "base": _tip(store), "agent": store.agent,
                 "batch_size": batch_size, "time": format_time(store.now())}
        checkpoints.save(state)
    return _run(store, checkpoints, state, extractor, progress)


def resume(store: Storage, key: str, extractor: Extractor | None, *,
           progress: Progress | None = None) -> dict[str, int]:
    """See :meth:`MemoryStore.resume`."""
    checkpoints = Checkpoints(store.repo.state_dir / "checkpoints")
    state = checkpoints.load(session_key(key, []))
    if state is None:
        raise NotFound(f"no unfinished ingest {key!r}; 'memsite resume --all' lists and resumes them all")
    return _run(store, checkpoints, state, extractor, progress)


def _run(store: Storage, checkpoints: Checkpoints, state: dict[str, Any], extractor: Extractor | None,
         progress: Progress | None) -> dict[str, int]:
    key = state["session_key"]
    batch_size = state["batch_size"]  # a resumed ingest keeps its batches: their trailers name them
    if state["stage"] == "extracting":
        if extractor is None:
            raise MemsiteError(f"ingest {key!r} stopped before its conversation was extracted; resume it with an "
                               "extractor (set MEMSITE_LLM_BASE_URL and MEMSITE_LLM_MODEL for the CLI)")
        if progress:
            progress("extracting", 0, 0)
        candidates = extractor.extract(state["messages"])
        state.update(stage="storing", candidates=[c.to_dict() for c in candidates], messages=[],
                     time=format_time(store.now()))
        checkpoints.save(state)
    candidates = [Candidate.from_dict(c) for c in state["candidates"]]
    total = len(candidates)
    if progress:
        progress("storing", state["processed"], total)
    while state["processed"] < total:
        start = state["processed"]
        end = min(total, start + batch_size)
        batch = f"{key} {start}-{end}"
        stats = _committed_batch(store, batch, state["base"])
        if stats is None:
            stats = _store_batch(store, key, batch, candidates[start:end], total)
        for name in STATS:
            state["stats"][name] += stats.get(name, 0)
        state.update(processed=end, time=format_time(store.now()))
        checkpoints.save(state)
        if progress:
            progress("storing", end, total)
    checkpoints.clear(key)
    return dict(state["stats"])


def _store_batch(store: Storage, key: str, batch: str, candidates: list[Candidate],
                 total: int) -> dict[str, int]:
    def body(tx: Any) -> dict[str, int]:  # run again if the branch moved under the transaction
        refused = 0
        for number, c in enumerate(candidates, start=1):
            try:
                tx.remember(c.content, category=c.category, abstract=c.abstract, overview=c.overview,
                            tags=c.tags, source=f"ingest/{key}")
            except InvalidInput as exc:  # a secret, an oversized text: that candidate only
                refused += 1
                log.warning("ingest %s: candidate %d refused: %s", key, number, exc)
        stats = {**tx.stats, "refused": refused}
        tx.trailers += [("Ingest-Batch", batch)] + [(f"Ingest-{n.title()}", str(stats[n])) for n in STATS]
        return stats

    count = len(candidates)
    part = "" if count == total else f" (candidates {batch.rsplit(' ', 1)[1]} of {total})"
    tx, stats = store.write(body, f"Ingest {key}: {count} candidate{'s' * (count != 1)}{part}")
    if tx.commit is None:  # every candidate skipped or refused: nothing to commit, nothing to find later
        log.info("ingest %s: batch %s changed nothing", key, batch)
    return stats


def _committed_batch(store: Storage, batch: str, base: str | None) -> dict[str, int] | None:
    """The stats of a batch already committed (by a process that died before saying so), or None."""
    message = store.repo.message_with_trailer("Ingest-Batch", batch, since=base, tip=store.tip() or "HEAD")
    if message is None:
        return None
    found = dict(re.findall(r"^Ingest-(\w+): (\d+)$", message, re.MULTILINE))
    return {name: int(found.get(name.title(), 0)) for name in STATS}


def _tip(store: Storage) -> str | None:
    return store.tip()


def incomplete(store: Storage) -> list[str]:
    """See :meth:`MemoryStore.incomplete_ingests`."""
    return Checkpoints(store.repo.state_dir / "checkpoints").keys()
