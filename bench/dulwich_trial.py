"""Trial: memsite's object store and refs beside dulwich's, doing the git part of a remember().

    python bench/dulwich_trial.py                    # 10,000 and 100,000 files, 200 writes each
    python bench/dulwich_trial.py --sizes 2000 --writes 50   # a small smoke run
    python bench/dulwich_trial.py --fsync-refs       # with core.fsync=reference in every copy

Needs dulwich (``pip install dulwich``, measured with 1.2.21).

For each size, a repository holding that many memory files
(``content/memories/<category>/<YYYY-MM>/<NNN>/<name>.md``: 7 categories over
24 months, numbered folders of at most 500 files), made by ``git fast-import``
and then ``git gc`` (every object in one pack with deltas, as git's
maintenance keeps a store that grew over two years), is copied three times.
Each write then does what a remember() does at the git level, on each copy
in turn (the order rotating), with the same file, path, author and time:

  * memsite: ``ObjectDatabase.batch()`` around ``write`` (the blob), ``apply``
    (the trees down the path) and ``write`` (the commit), so the seven objects
    go into one pack; ``Refs.update`` (compare-and-swap under git's
    ``<ref>.lock``, with the reflog); ``release``; ``maintenance.maintain`` (memsite merging
    its small packs, part of every write);
  * dulwich, loose: ``DiskObjectStore.add_object`` for the blob,
    ``dulwich.object_database.commit_tree_changes`` for the trees (it stores each
    with ``add_object``), ``add_object`` for the commit,
    ``DiskRefsContainer.set_if_equals`` for the ref;
  * dulwich, one pack: the same trees built by ``commit_tree_changes`` into a
    ``MemoryObjectStore`` laid over the disk store (``OverlayObjectStore``), then
    blob, trees and commit stored by one ``DiskObjectStore.add_objects`` call.

The three sides write the same bytes, so they must end on the same commit id;
the run checks that, then runs ``git fsck --strict`` on each copy. Prints a
Markdown table: p50/p95 ms per write, object bytes added per write (loose
files, packs and their indexes), packs left, and fsck's verdict.

dulwich flushes a ref file to disk at every update whatever the
configuration (its ``GitFile`` default); git and memsite do so only when
``core.fsync`` names references, which it does not by default. With
``--fsync-refs`` every copy gets ``core.fsync=reference``, so both sides flush
the ref (memsite its reflog too, as git does).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import report
from corpus import CATEGORIES, Corpus
from dulwich.object_database import MemoryObjectStore, OverlayObjectStore, commit_tree_changes
from dulwich.objects import Blob, Commit
from dulwich.repo import Repo as DulwichRepo

from memsite.git import Entry, Repository

FOLDER_FILES = 500  # files in one numbered folder
MONTHS = 24
REF = "refs/heads/main"
AUTHOR = "bench <bench@memsite.invalid>"
WARM_UP = 20
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "seed", "GIT_AUTHOR_EMAIL": "seed@memsite.invalid",
           "GIT_COMMITTER_NAME": "seed", "GIT_COMMITTER_EMAIL": "seed@memsite.invalid"}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def months() -> list[str]:
    """The last MONTHS months as ``YYYY-MM``, oldest first (the current month last)."""
    now = datetime.now(UTC)
    year, month = now.year, now.month
    out = []
    for _ in range(MONTHS):
        out.append(f"{year:04d}-{month:02d}")
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
    return out[::-1]


def memory_file(corpus: Corpus, number: int, category: str, month: str) -> bytes:
    """A memory file of the usual size: YAML frontmatter, then the text."""
    return (f"---\nid: m{number:07d}\ncategory: {category}\ncreated: {month}-15T12:00:00Z\nagent: bench\n"
            f"tags: [topic{number % 17}]\n---\n\n{corpus.text()}\n").encode()


class Layout:
    """Where the next memory of a category goes: the current month's last numbered folder, or a new one."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}  # (category, month) -> files

    def path(self, number: int, category: str, month: str) -> str:
        count = self.counts.get((category, month), 0)
        self.counts[(category, month)] = count + 1
        return f"content/memories/{category}/{month}/{count // FOLDER_FILES:03d}/m{number:07d}.md"


def seed(path: Path, count: int, corpus: Corpus, layout: Layout) -> None:
    """A repository of ``count`` memory files over MONTHS months, in one commit, packed by 'git gc'."""
    log(f"seeding {count:,} files in {path} ...")
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    all_months = months()
    chunks = [b"commit refs/heads/main\ncommitter seed <seed@memsite.invalid> 1700000000 +0000\ndata 5\nseed\n"]
    for i in range(count):
        category, month = CATEGORIES[i % len(CATEGORIES)], all_months[i * MONTHS // max(count, 1)]
        data = memory_file(corpus, i, category, month)
        chunks.append(b"M 100644 inline %s\ndata %d\n%s\n"
                      % (layout.path(i, category, month).encode(), len(data), data))
    subprocess.run(["git", "fast-import", "--quiet"], cwd=path, input=b"".join(chunks), check=True, env=GIT_ENV)
    subprocess.run(["git", "gc", "-q"], cwd=path, check=True, env=GIT_ENV)


def object_bytes(repo: Path) -> int:
    objects = repo / ".git" / "objects"
    folders = [folder for folder in objects.iterdir() if len(folder.name) == 2] + [objects / "pack"]
    return sum(f.stat().st_size for folder in folders for f in folder.iterdir())


def packs(repo: Path) -> int:
    return len(list((repo / ".git" / "objects" / "pack").glob("*.pack")))


def commit_bytes(tree: str, parent: str, when: int, message: str) -> bytes:
    """The commit object both sides write (dulwich serialises the same lines)."""
    ident = f"{AUTHOR} {when} +0000"
    return f"tree {tree}\nparent {parent}\nauthor {ident}\ncommitter {ident}\n\n{message}\n".encode()


class MemsiteSide:
    name = "memsite ObjectDatabase + Refs"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.repo = Repository(path)
        self.objects, self.refs = self.repo.objects, self.repo.refs
        self.parent = self.refs.read(REF)
        assert self.parent is not None
        self.root = self.repo.root_tree(self.parent)

    def write(self, rel: str, data: bytes, when: int, message: str) -> str:
        with self.objects.batch():
            blob = self.objects.write(b"blob", data)
            root = self.objects.apply(self.root, {rel: Entry(0o100644, blob)})
            assert root is not None
            commit = self.objects.write(b"commit", commit_bytes(root.hex(), self.parent, when, message)).hex()
        self.refs.update(REF, commit, self.parent, ident=f"{AUTHOR} {when} +0000", message=f"commit: {message}")
        self.objects.release()
        self.objects.maintenance.maintain()
        self.parent, self.root = commit, root
        return commit

    def close(self) -> None:
        self.repo.close()


class DulwichSide:
    """dulwich's object store and refs; ``pack``: the write's objects stored by one ``add_objects`` call."""

    def __init__(self, path: Path, *, pack: bool) -> None:
        self.path = path
        self.pack = pack
        self.name = "dulwich add_objects (one pack)" if pack else "dulwich add_object (loose)"
        self.repo = DulwichRepo(str(path))
        self.store, self.refs = self.repo.object_database, self.repo.refs
        self.parent = self.refs[REF.encode()]
        self.root = self.store[self.parent].tree

    def _commit(self, tree: bytes, when: int, message: str) -> Commit:
        commit = Commit()
        commit.tree = tree
        commit.parents = [self.parent]
        commit.author = commit.committer = AUTHOR.encode()
        commit.author_time = commit.commit_time = when
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = f"{message}\n".encode()
        return commit

    def write(self, rel: str, data: bytes, when: int, message: str) -> str:
        blob = Blob.from_string(data)
        change = [(rel.encode(), 0o100644, blob.id)]
        if self.pack:
            new = MemoryObjectStore()
            new.add_object(blob)
            root = commit_tree_changes(OverlayObjectStore([new, self.store], add_store=new), self.root, change)
            commit = self._commit(root, when, message)
            new.add_object(commit)
            self.store.add_objects([(new[sha], None) for sha in new])
        else:
            self.store.add_object(blob)
            root = commit_tree_changes(self.store, self.root, change)
            commit = self._commit(root, when, message)
            self.store.add_object(commit)
        if not self.refs.set_if_equals(REF.encode(), self.parent, commit.id, committer=AUTHOR.encode(),
                                       timestamp=when, timezone=0, message=f"commit: {message}".encode()):
            raise RuntimeError(f"{REF} moved under the dulwich side")
        self.parent, self.root = commit.id, root
        return commit.id.decode()

    def close(self) -> None:
        self.repo.close()


def fsck(path: Path) -> str:
    result = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=path, capture_output=True, text=True)
    problems = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    if result.returncode == 0 and not problems:
        return "clean"
    return f"exit {result.returncode}: {problems[0] if problems else ''}"[:80]


def trial(folder: Path, size: int, writes: int,
          fsync_refs: bool) -> list[tuple[int, str, float, float, float, int, str]]:
    corpus, layout = Corpus(), Layout()
    seeded = folder / f"seed-{size}"
    seed(seeded, size, corpus, layout)
    if fsync_refs:
        subprocess.run(["git", "config", "core.fsync", "reference"], cwd=seeded, check=True)
    copies = {kind: folder / f"{kind}-{size}" for kind in ("memsite", "loose", "pack")}
    for copy in copies.values():
        shutil.copytree(seeded, copy, symlinks=True)
    shutil.rmtree(seeded)
    sides = [MemsiteSide(copies["memsite"]), DulwichSide(copies["loose"], pack=False),
             DulwichSide(copies["pack"], pack=True)]
    month = months()[-1]
    inputs = []
    for i in range(WARM_UP + writes):
        category = CATEGORIES[i % len(CATEGORIES)]
        number = size + i
        inputs.append((layout.path(number, category, month), memory_file(corpus, number, category, month),
                       1_800_000_000 + i, f"Remember m{number:07d}"))
    times: list[list[float]] = [[] for _ in sides]
    before = [0] * len(sides)
    log(f"{WARM_UP} + {writes} writes on each side, interleaved ...")
    for i, (rel, data, when, message) in enumerate(inputs):
        if i == WARM_UP:
            before = [object_bytes(side.path) for side in sides]
        order = list(range(len(sides)))
        order = order[i % len(order):] + order[: i % len(order)]
        made = {}
        for k in order:
            start = time.perf_counter()
            made[k] = sides[k].write(rel, data, when, message)
            if i >= WARM_UP:
                times[k].append((time.perf_counter() - start) * 1000)
        if len(set(made.values())) != 1:
            raise SystemExit(f"write {i}: the sides made different commits: {made}")
    rows = []
    for k, side in enumerate(sides):
        side.close()
        added = (object_bytes(side.path) - before[k]) / writes
        rows.append((size, side.name, statistics.median(times[k]), percentile(times[k], 95), added,
                     packs(side.path), fsck(side.path)))
    for copy in copies.values():
        shutil.rmtree(copy)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--fsync-refs", action="store_true", help="core.fsync=reference in every copy")
    args = parser.parse_args()
    import dulwich

    rows = []
    with tempfile.TemporaryDirectory(prefix="dulwich-trial-") as tmp:
        for size in args.sizes:
            rows += trial(Path(tmp), size, args.writes, args.fsync_refs)
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.split()[-1]
    print(f"dulwich {'.'.join(map(str, dulwich.__version__))}, git {git_version}, "
          f"{args.writes} writes per side after {WARM_UP} unmeasured, interleaved"
          f"{', core.fsync=reference' if args.fsync_refs else ''}\n")
    print("| files | side | p50 ms | p95 ms | object bytes / write | packs left | git fsck --strict |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | --- |")
    for size, name, p50, p95, added, count, verdict in rows:
        print(f"| {size:,} | {name} | {p50:.2f} | {p95:.2f} | {added:,.0f} | {count} | {verdict} |")
    for size in args.sizes:
        ours = next(row for row in rows if row[0] == size and row[1].startswith("memsite"))
        for row in rows:
            if row[0] == size and row is not ours:
                print(f"\n{size:,} files: {row[1]} p50 is {row[2] / ours[2]:.2f}x memsite's", end="")
    print()
    report.publish("dulwich-trial", skip=min(args.sizes) < 10_000 or args.fsync_refs)  # (--fsync-refs: a variant)


if __name__ == "__main__":
    main()
