"""History written again without some files: git's own ``fast-export | fast-import``, filtered in between.

Every commit keeps its author, committer, dates and every other file's
blob; a commit that changed only dropped files stays, empty, so the
history's shape (and every other commit's place in it) is unchanged. The
rewritten commits go into refs under a prefix of the caller's: no ref of
the repository moves here, so a process killed meanwhile leaves it as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ..foundation.errors import RepositoryError
from .commands import Git

Redact = Callable[[str, bool], str]  # (a commit message, whether the commit changed a dropped file) -> its new text


def rewrite(root: Path, refs: Iterable[str], drop: Iterable[str], redact: Redact, into: str,
            blobs: Mapping[str, bytes] | None = None, marks: Path | None = None) -> dict[str, str]:
    """Write ``refs`` again without the files ``drop`` (paths from the root), messages through ``redact``.

    Args:
        into: the prefix of the refs the new commits go into (``refs/heads/main`` -> ``<into>heads/main``).
        blobs: file contents to write in place of others: {the old blob's id: the new content}
            (the same input always gives the same commits, so two clones rewriting one history agree).
        marks: a folder keeping which commits were written again as which: a second call with it writes
            only the commits the first did not (the refs moved on meanwhile), on the rewritten ones.

    Returns:
        {ref: its rewritten commit}.

    Raises:
        RepositoryError: git failed (the repository is unchanged but for objects no ref reaches).
    """
    refs = list(refs)
    if not refs:
        return {}
    git = Git(root)
    specs = [f"--refspec={r}:{into}{r.removeprefix('refs/')}" for r in refs]
    exporting, importing = [], []
    if marks is not None:  # (fast-export's mark N is an old commit, fast-import's the same N its new one)
        old, new = marks / "exported", marks / "imported"
        exporting = [*([f"--import-marks={old}"] if old.exists() else []), f"--export-marks={old}"]
        importing = [f"--import-marks-if-exists={new}", f"--export-marks={new}"]
    exported = git.run("fast-export", "--no-data", "--reencode=yes", "--signed-tags=strip",
                       "--tag-of-filtered-object=rewrite", "--use-done-feature", *exporting, *specs, *refs, text=False)
    if exported.returncode:
        raise RepositoryError(f"git fast-export failed in {root}: {exported.stderr.decode(errors='replace').strip()}")
    stream = _filtered(exported.stdout, set(drop), redact, {sha.encode(): data for sha, data in (blobs or {}).items()})
    imported = git.run("fast-import", "--quiet", "--force", "--done", *importing, input=stream, text=False)
    if imported.returncode:
        raise RepositoryError(f"git fast-import failed in {root}: {imported.stderr.decode(errors='replace').strip()}")
    out: dict[str, str] = {}
    for r in refs:
        sha = git.run("rev-parse", "--verify", "-q", f"{into}{r.removeprefix('refs/')}").stdout.strip()
        if sha:
            out[r] = sha
    return out


def _filtered(stream: bytes, drop: set[str], redact: Redact, blobs: Mapping[bytes, bytes]) -> bytes:
    """The fast-export ``stream`` without file commands on ``drop``, each commit message through ``redact``,
    and the files whose blob ``blobs`` replaces given that content instead."""
    dropped = {p.encode() for p in drop}
    out: list[bytes] = []
    pos, end = 0, len(stream)
    in_commit = touched = False
    pending: list[bytes] = []  # a commit's lines up to its message, which is written once its files are read
    message_at: int | None = None
    while pos < end:
        nl = stream.find(b"\n", pos)
        nl = end if nl < 0 else nl
        line = stream[pos:nl]
        pos = nl + 1
        if line.startswith(b"data "):
            size = int(line[5:])
            data = stream[pos:pos + size]
            pos += size
            if pos < end and stream[pos:pos + 1] == b"\n":
                pos += 1
            if in_commit:
                message_at = len(pending)
                pending.append(data)
            else:
                out += [line, data]
            continue
        if line.startswith(b"commit "):
            in_commit, touched, pending, message_at = True, False, [line], None
            continue
        if in_commit:
            if line.startswith((b"M ", b"D ")):
                path = line.split(b" ", 3)[-1] if line.startswith(b"M ") else line[2:]
                if path.strip(b'"') in dropped:
                    touched = True
                    continue
                if line.startswith(b"M "):
                    mode, sha, named = line[2:].split(b" ", 2)
                    if sha in blobs:  # (given inline: fast-import packs it, with deltas, like the rest)
                        pending += [b"M %s inline %s" % (mode, named), b"data %d" % len(blobs[sha]), blobs[sha]]
                        continue
            if line == b"":
                out += _commit_lines(pending, message_at, touched, redact)
                out.append(b"")
                in_commit = False
                continue
            pending.append(line)
            continue
        out.append(line)
    if in_commit:
        out += _commit_lines(pending, message_at, touched, redact)
    return b"\n".join(out) + b"\n"


def _commit_lines(pending: list[bytes], message_at: int | None, touched: bool, redact: Redact) -> list[bytes]:
    lines = list(pending)
    if message_at is not None:
        message = redact(lines[message_at].decode("utf-8", "surrogateescape"), touched)
        data = message.encode("utf-8", "surrogateescape")
        lines[message_at] = b"data %d\n" % len(data) + data
    return lines
