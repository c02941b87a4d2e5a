"""Faults injected into real memory repositories, and what must hold after each; shared by
tests/test_faults.py (which asserts it) and bench/faults.py (which counts it).

    python -m tests.faults task REPO AGENT COUNT    closes COUNT tasks, printing ``ACK <session> <commit>``

Each kill round starts a real process (a writer, a task loop, ``memsite build``,
``memsite migrate``), SIGKILLs it (writers and task loops at a random moment,
builds and migrations at each named point of their work: tests/site_build_process.py,
tests/migrate_process.py), counts whether the kill landed mid-work, recovers as an operator
would (the next write through the CLI; an open task of the victim abandoned)
and then checks: every acknowledged memory and session reads back, ``git
status`` is clean, ``git fsck --strict`` is clean, no lock file blocks git, no
traceback was printed.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from memsite import MemoryStore, MemsiteError, ProtocolError
from memsite.cli import main as cli
from memsite.foundation.fileformat import format_memory
from memsite.foundation.record import Memory, new_id, short_id

ROOT = Path(__file__).resolve().parent.parent
MARKER = "HOST-SECRET-7f3a9c"


@dataclass
class Tally:
    """What a series of faults did."""

    injected: int = 0
    mid_work: int = 0  # kills that found the process still working (not already finished)
    survived: int = 0
    acknowledged: int = 0
    lost: int = 0
    tracebacks: int = 0
    wedged: int = 0
    failures: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        for name in ("injected", "mid_work", "survived", "acknowledged", "lost", "tracebacks", "wedged"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures += other.failures


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env())


def acks_of(output: str) -> dict[str, str]:
    return {line.split()[1]: line.split()[2] for line in output.splitlines() if line.startswith("ACK ")}


def new_repository(path: Path) -> Path:
    MemoryStore.init(path, agent="seed").close()
    git(path, "config", "gc.autoDetach", "false")
    return path


# --- what must hold after a fault ------------------------------------------------------------


def recover_and_verify(repo: Path, memories: set[str], sessions: set[str], stderr: str = "") -> list[str]:
    """Recover as an operator would, then every check; returns what failed (empty: it survived)."""
    failures = []
    if "Traceback" in stderr:
        failures.append(f"traceback: {stderr.strip().splitlines()[-1]}")
    for agent in sorted({line.split()[0] for line in _task_owners(repo)}):  # an open task of a killed process
        with MemoryStore(repo, agent=agent) as store:
            try:
                store.task().abandon("its process was killed")
            except ProtocolError:
                pass
    result = CliRunner().invoke(cli, ["-C", str(repo), "--agent", "survivor", "remember",
                                      f"survivor {new_id()}", "-c", "events"])
    if result.exit_code != 0:
        failures.append(f"wedged: the next write failed: {result.output.strip()}")
    if "Traceback" in result.output or (result.exc_info and result.exc_info[0] not in (SystemExit,)):
        failures.append(f"traceback in the next write: {result.exc_info}")
    with MemoryStore(repo, agent="checker") as store:
        ids = {m.id for m in store.list()}
    lost = memories - ids
    if lost:
        failures.append(f"lost: {len(lost)} acknowledged memories, e.g. {sorted(lost)[0]}")
    recorded = {p.stem for p in (repo / "content" / "sessions").glob("*.md")}
    if sessions - recorded:
        failures.append(f"lost: session records {sorted(sessions - recorded)}")
    while (repo / ".git" / "gc.pid").exists():  # a gc the killed process started
        time.sleep(0.05)
    status = git(repo, "status", "--porcelain", "--untracked-files=all").stdout
    if status:
        failures.append(f"git status not clean: {status.strip()}")
    fsck = git(repo, "fsck", "--strict", "--no-progress")
    if fsck.returncode != 0 or "error" in fsck.stderr:
        failures.append(f"git fsck: {fsck.stderr.strip()}")
    locks = [str(p.relative_to(repo)) for p in (repo / ".git").rglob("*.lock") if "objects" not in p.parts]
    if locks:
        failures.append(f"lock files left: {locks}")
    return failures


def _task_owners(repo: Path) -> list[str]:
    notes = repo / "content" / "notes"
    return [f"{p.parent.name} task" for p in notes.glob("*/task_process.md")] if notes.is_dir() else []


def _tally(tally: Tally, failures: list[str], acked: int, lost: int = 0, killed: bool = False) -> None:
    tally.injected += 1
    tally.mid_work += killed
    tally.acknowledged += acked
    if failures:
        tally.failures += failures
        tally.lost += lost or sum("lost:" in f for f in failures)
        tally.tracebacks += sum("traceback" in f for f in failures)
        tally.wedged += sum(f.startswith("wedged") for f in failures)
    else:
        tally.survived += 1


# --- kills -------------------------------------------------------------------------------------


def working(proc: subprocess.Popen[str]) -> str:
    """The first line a loop prints once it has written (its start, imports included, takes seconds on a
    loaded machine: a kill timed from the start could land before any write)."""
    return proc.stdout.readline()  # type: ignore[union-attr]  # started with stdout=PIPE


def kill_writers(repo: Path, rounds: int, rng: random.Random, *, batch: int = 1) -> Tally:
    """SIGKILL ``remember`` (batch 1) or transaction (batch > 1) loops at random moments (loops longer than any
    wait, so that every kill lands mid-work)."""
    tally, acks = Tally(), {}
    for n in range(rounds):
        proc = start("-m", "tests.writer_process", str(repo), f"victim{n}", "100000", "--batch", str(batch))
        first = working(proc)
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
        new = acks_of(first + out)
        acks.update(new)
        _tally(tally, recover_and_verify(repo, set(acks), set(), err), len(new),
               killed=proc.returncode == -signal.SIGKILL)
    return tally


def kill_tasks(repo: Path, rounds: int, rng: random.Random) -> Tally:
    """SIGKILL a process closing tasks in a loop (each close: session, knowledge, world, working memory)."""
    tally, sessions = Tally(), set()
    for n in range(rounds):
        proc = start("-m", "tests.faults", "task", str(repo), f"worker{n}", "100000")
        first = working(proc)
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
        new = acks_of(first + out)
        sessions.update(new)
        _tally(tally, recover_and_verify(repo, set(), sessions, err), len(new),
               killed=proc.returncode == -signal.SIGKILL)
    return tally


def _stopped_at(module: str, n: int, repo: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m module REPO POINT ARGS``, the n-th of its KILL_POINTS (in turn), until it stops."""
    points = list(importlib.import_module(module).KILL_POINTS)
    return subprocess.run([sys.executable, "-m", module, repo, points[n % len(points)], *args], capture_output=True,
                          text=True, env=env(), cwd=ROOT, timeout=300)


def kill_builds(repo: Path, rounds: int) -> Tally:
    """SIGKILL ``memsite build`` at its named points in turn (tests/site_build_process.py), a site built before
    (to be replaced); the next build must work."""
    tally = Tally()
    with MemoryStore(repo, agent="seed") as store:
        memories = {m.id for m in store.list()}
    subprocess.run([sys.executable, "-m", "memsite", "-C", str(repo), "build"], capture_output=True, env=env(),
                   cwd=ROOT, check=True)
    for n in range(rounds):
        stopped = _stopped_at("tests.site_build_process", n, str(repo), "kill")
        _tally(tally, recover_and_verify(repo, memories, set(), stopped.stderr), len(memories) if n == 0 else 0,
               killed=stopped.returncode == -signal.SIGKILL)
    built = subprocess.run([sys.executable, "-m", "memsite", "-C", str(repo), "build"], capture_output=True,
                           text=True, env=env(), cwd=ROOT)
    if built.returncode != 0:
        tally.failures.append(f"wedged: the build after the kills failed: {built.stderr.strip()}")
        tally.wedged += 1
    return tally


def flat_repository(path: Path, count: int) -> set[str]:
    """A repository in the flat layout (memsite before month folders) with ``count`` memories; their ids."""
    new_repository(path)
    folder = path / "content" / "memories" / "events"
    folder.mkdir(parents=True, exist_ok=True)
    ids = set()
    with MemoryStore(path, agent="seed") as store:
        base = store.now()
    for i in range(count):
        memory = Memory(id=new_id(), category="events", abstract=f"Flat memory {i}", overview="", agent="seed",
                        created=base, updated=base, content=f"Flat memory {i}: written before month folders")
        (folder / f"flat-memory-{i}.md").write_text(format_memory(memory))
        ids.add(memory.id)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "memories in the flat layout")
    return ids


def kill_migrations(template: Path, work: Path, ids: set[str], rounds: int) -> Tally:
    """SIGKILL ``memsite migrate`` at its named points in turn (tests/migrate_process.py), each on a fresh copy of
    a flat-layout repository."""
    tally = Tally()
    for n in range(rounds):
        repo = work / f"migrate{n}"
        shutil.copytree(template, repo, symlinks=True)
        stopped = _stopped_at("tests.migrate_process", n, str(repo))
        _tally(tally, recover_and_verify(repo, ids, set(), stopped.stderr), len(ids) if n == 0 else 0,
               killed=stopped.returncode == -signal.SIGKILL)
        shutil.rmtree(repo)
    return tally


# --- damaged derived files -----------------------------------------------------------------------


class WordVectors:
    """A toy embedder (hashed words), so vectors.sqlite3 is made and read."""

    model = "fault-suite-words-16"

    def __call__(self, text: str) -> list[float]:
        vector = [0.0] * 16
        for word in text.lower().split():
            vector[hashlib.sha1(word.encode()).digest()[0] % 16] += 1.0
        vector[0] += 0.5
        return vector


def damaged_template(path: Path) -> set[str]:
    """A repository whose .memsite/ files (with -wal and -shm) were left by a process that did not close them."""
    new_repository(path)
    script = (
        "import os, sys\n"
        "from memsite import MemoryStore\n"
        "from memsite.api import storage_of\n"
        "from tests.faults import WordVectors\n"
        "store = MemoryStore(sys.argv[1], agent='seed', embedder=WordVectors())\n"
        "with store.transaction('seed') as tx:\n"
        "    made = [tx.remember(f'Service {i} listens on port {8000 + i} behind the gateway', dedupe=False)"
        " for i in range(200)]\n"
        "store.recall('gateway port'); store.recall('service')\n"
        "for db in (storage_of(store).catalog.db, storage_of(store).activity.db, storage_of(store).vectors.db):\n"
        "    db.execute('PRAGMA wal_checkpoint')\n"  # most pages in the files, the latest in the -wal
        "made.append(store.remember('Service 900 listens on port 9900 behind the gateway'))\n"
        "store.recall('gateway port 9900')\n"
        "print(' '.join(m.id for m in made), flush=True)\n"
        "os._exit(0)\n"  # no close: the -wal and -shm files stay, as after a kill
    )
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env(),
                          cwd=ROOT, check=True)
    return set(done.stdout.split())


DERIVED_FILES = [f"{name}{suffix}" for name in ("catalog.sqlite3", "activity.sqlite3", "vectors.sqlite3")
                 for suffix in ("", "-wal", "-shm")]


DAMAGE = ("truncated", "garbage", "header")


def damage(path: Path, how: str, rng: random.Random) -> None:
    """Truncate ``path`` to a third, fill it with garbage, or keep its 100-byte header and fill the rest."""
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 3])
    elif how == "header":  # SQLite's header still says "a database": the damage shows only in what follows
        path.write_bytes(data[:100] + rng.randbytes(max(len(data), 4096) - 100))
    else:
        path.write_bytes(rng.randbytes(len(data) or 4096))


def damaged_file_round(template: Path, work: Path, name: str, how: str, ids: set[str],
                       rng: random.Random) -> tuple[list[str], list[str]]:
    """Damage one file of a copy of ``template``, then use it; returns (failures, warnings logged)."""
    import logging

    repo = work / f"{name}-{how}"
    shutil.copytree(template, repo, symlinks=True)
    target = repo / ".memsite" / name
    failures: list[str] = []
    if not target.exists():
        return [f"{name}: not there to damage"], []
    damage(target, how, rng)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("memsite")
    logger.addHandler(handler)
    try:
        with MemoryStore(repo, agent="after", embedder=WordVectors()) as store:
            listed = {m.id for m in store.list()}
            if ids - listed:
                failures.append(f"lost: {len(ids - listed)} memories not listed")
            if not store.recall("gateway port"):
                failures.append("recall found nothing")
            store.remember("Written after the damage", category="events")
        rebuilt = CliRunner().invoke(cli, ["-C", str(repo), "index", "rebuild"])
        if rebuilt.exit_code != 0:
            failures.append(f"wedged: index rebuild: {rebuilt.output.strip()}")
    except MemsiteError as exc:
        failures.append(f"wedged: {type(exc).__name__}: {exc}")
    except Exception as exc:  # counted, not hidden
        failures.append(f"traceback: {type(exc).__name__}: {exc}")
    finally:
        logger.removeHandler(handler)
    warnings = [r.getMessage() for r in records if r.levelname == "WARNING"]
    failures += recover_and_verify(repo, ids, set())
    shutil.rmtree(repo)
    return failures, warnings


# --- a full disk ---------------------------------------------------------------------------------


def mount_small_disk(mount: Path) -> Path:
    """A 3 MB tmpfs mounted at ``mount``: a full disk in seconds (root only); :func:`unmount` it after.

    Raises:
        OSError: it could not be mounted (the message says why).
    """
    mount.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True,
                            text=True)
    if result.returncode != 0:
        raise OSError(f"cannot mount a 3 MB tmpfs to fill: {result.stderr.strip() or 'mount failed'}")
    return mount


def unmount(mount: Path) -> None:
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(folder: Path) -> Path:
    filler = folder / "filler"
    try:  # closing the file may fail too, flushing what did not fit
        with open(filler, "wb") as handle:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
    except OSError:
        pass
    for size in (4096, 512, 1):  # the last few bytes too
        try:
            with open(folder / f"filler-{size}", "ab") as handle:
                while True:
                    handle.write(b"\0" * size)
                    handle.flush()
        except OSError:
            pass
    return filler


def full_disk_round(disk: Path, site: Path) -> Tally:
    """Reads through the CLI on a full disk (its cache and temporary folders on it too), then a write.

    The catalog is deleted first, so it has to be made again where there is
    no room. Each read must work; the write must be refused in one line,
    nothing committed; once there is room, the operator's checks.
    """
    tally = Tally()
    repo = disk / "memory"
    with MemoryStore.init(repo, agent="seed") as store:
        memories = {store.remember(f"Service {i} listens on port {8000 + i}", category="events").id for i in range(5)}
    git(repo, "config", "gc.autoDetach", "false")
    (repo / ".memsite" / "catalog.sqlite3").unlink()
    (disk / "tmp").mkdir()
    environment = {**env(), "XDG_CACHE_HOME": str(disk / "cache"), "TMPDIR": str(disk / "tmp")}
    before = git(repo, "rev-parse", "HEAD").stdout
    fill(disk)

    def memsite(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memsite", "-C", str(repo), *args], capture_output=True,
                              text=True, env=environment, cwd=ROOT)

    failures = []
    some = sorted(memories)[0]
    shown = {short_id(m) for m in memories}  # (lists show ids in their short form)
    for args, wanted in ((["list"], shown), (["show", some], {some}), (["recall", "port"], {short_id(some)}),
                         (["core"], set()), (["build", "--site-dir", str(site)], set())):
        result = memsite(*args)
        if result.returncode != 0 or "Traceback" in result.stderr or not all(m in result.stdout for m in wanted):
            failures.append(f"wedged: {args[0]} on a full disk: {result.stderr.strip() or result.stdout.strip()}")
    refused = memsite("remember", "Not while the disk is full")
    if refused.returncode != 1 or not refused.stderr.startswith("Error: disk full at ") or \
            refused.stderr.count("\n") != 1:
        failures.append(f"a write on a full disk was not one DiskFull line: {refused.stderr.strip()}")
    if git(repo, "rev-parse", "HEAD").stdout != before:
        failures.append("a write on a full disk committed")
    for path in disk.glob("filler*"):
        path.unlink()
    failures += recover_and_verify(repo, memories, set())
    _tally(tally, failures, len(memories))
    return tally


# --- hostile values ------------------------------------------------------------------------------


def hostile_inputs() -> list[tuple[str, Callable[[MemoryStore], Any]]]:
    """Inputs an API caller may pass that must each be refused with a MemsiteError, nothing written."""
    def task_closed_twice(store: MemoryStore) -> None:
        task = store.task("debug", ["twice"])
        task.problem("p")
        task.solution("s")
        task.finish()
        task.finish()

    return [
        ("world value with a conflict marker", lambda s: s.world.merge({"k": "a\n<<<<<<< HEAD\nb"})),
        ("world value with a separator marker", lambda s: s.world.merge({"k": "a\n=======\nb"})),
        ("world input that is not a mapping", lambda s: s.world.merge("a=b")),
        ("world value over max_world_bytes", lambda s: s.world.merge({"big": "x" * 2_000_000})),
        ("task closed twice", task_closed_twice),
        ("memory over max_memory_bytes", lambda s: s.remember("y" * 2_000_000)),
        ("empty memory", lambda s: s.remember("   ")),
        ("NUL byte in a memory", lambda s: s.remember("a\x00b")),
        ("lone surrogate in a memory", lambda s: s.remember("a\udc80b")),
        ("memory that is not UTF-8", lambda s: s.remember(b"\xff\xfe not text")),
        ("memory that is not text", lambda s: s.remember(12345)),
        ("credential in a memory", lambda s: s.remember("key AKIAIOSFODNN7EXAMPLE secret")),
        ("unknown category", lambda s: s.remember("x", category="../../etc")),
        ("tag escaping the repository", lambda s: s.remember("x", tags=["../../x"])),
        ("negative recall limit", lambda s: s.recall("x", limit=-1)),
        ("recall limit that is not a number", lambda s: s.recall("x", limit="many")),
        ("update of an unknown field", lambda s: s.update(s.list()[0].id, id="X")),
        ("forget of an unknown id", lambda s: s.forget("01NOPE0000000000000000000")),
        ("agent name with a path", lambda s: MemoryStore(s.root, agent="../evil")),
    ]


def try_hostile(repo: Path) -> Tally:
    """Each hostile input: refused with a MemsiteError, nothing committed; the store still works."""
    tally = Tally()
    with MemoryStore(repo, agent="target") as store:
        store.remember("A memory to update", category="general")
        for name, attempt in hostile_inputs():
            before = git(repo, "rev-parse", "HEAD").stdout
            tally.injected += 1
            try:
                attempt(store)
            except MemsiteError:
                after = git(repo, "rev-parse", "HEAD").stdout
                if after == before or name == "task closed twice":  # its first close commits, as it should
                    tally.survived += 1
                else:
                    tally.failures.append(f"{name}: refused but committed")
            except Exception as exc:  # counted, not hidden
                tally.tracebacks += 1
                tally.failures.append(f"{name}: {type(exc).__name__} is not a MemsiteError: {exc}")
            else:
                tally.failures.append(f"{name}: accepted")
    tally.failures += recover_and_verify(repo, set(), set())
    return tally


# --- the host in the site ------------------------------------------------------------------------


def host_bytes_in_site(repo: Path, host: Path) -> int:
    """Build with symlinks to a host file and folder holding MARKER; the marker bytes found in the sites built.

    With the folder links, the build stops before MkDocs walks them (into
    ``host/refused``); with the file link alone, it builds ``host/site``.
    """
    (host / "private").mkdir(parents=True, exist_ok=True)
    (host / "private" / "shadow").write_text(f"root:{MARKER}:19000::::::\n")
    (host / "notes.txt").write_text(f"{MARKER}\n")
    os.symlink(host / "notes.txt", repo / "content" / "leak.txt")
    found = 0
    for site, folders in ((host / "refused", ("hostdir", "etc")), (host / "site", ())):
        for link, target in (("hostdir", host / "private"), ("etc", Path("/etc"))):
            if link in folders:
                os.symlink(target, repo / "content" / link)
        subprocess.run([sys.executable, "-m", "memsite", "-C", str(repo), "build", "--site-dir", str(site)],
                       capture_output=True, text=True, env=env(), cwd=ROOT)
        for path in site.rglob("*") if site.is_dir() else []:
            if path.is_file():
                found += path.read_bytes().count(MARKER.encode()) * len(MARKER)
        for link in folders:
            (repo / "content" / link).unlink()
    (repo / "content" / "leak.txt").unlink()
    return found


# --- the task loop a kill round runs ---------------------------------------------------------------


def _task_loop(repo: str, agent: str, count: int) -> None:
    store = MemoryStore(repo, agent=agent)
    for i in range(count):
        with store.task("debug", [agent, f"round {i}"]) as task:
            task.plan(["look", "fix"])
            task.check("look", note=f"round {i}")
            task.problem(f"problem {i} seen by {agent}")
            task.solution(f"solution {i}")
            task.learn(f"lesson {i}")
            task.world({f"{agent}.round": str(i)})
        print(f"ACK {task.session} {task.commit}", flush=True)
    store.close()


if __name__ == "__main__":
    if sys.argv[1] == "task":
        _task_loop(sys.argv[2], sys.argv[3], int(sys.argv[4]))
