"""Benchmark: a team of agents sharing one memory through one remote, beside plain git.

    python bench/team.py                  # every scenario below (about 20 minutes)
    python bench/team.py --quick          # a small smoke run
    python bench/team.py --only paced stress

Every clone is a process of its own, on this disk, with one bare remote:

* ``paced``: 50 clones, each writing one memory every 2-8 s (uniform) for 3
  minutes and syncing after every write (``store.sync()``), while an
  integrator (``memsite integrate`` in a loop, as the CI workflow runs it on
  every push to an agent branch) runs in a clone of its own;
* ``cli``: the same with 12 clones writing every 2-6 s, each sync a
  ``memsite sync`` process of its own;
* ``bare``: 12 clones writing every 2-6 s, each sync a ``memsite sync``
  process, on a plain ``git init --bare`` remote (its HEAD names ``master``)
  with no merge queue running: the simplest team set-up (``--recall``: each
  agent also recalls after each write, so its clone embeds the memories and
  its syncs publish their vectors);
* ``world``: 12 clones setting the same five world keys every 2-6 s for 2
  minutes, each sync a ``memsite sync`` process, on the same plain remote
  with no merge queue: reports the keys merges found set two ways and
  whether each merge commit lists them;
* ``purge``: 12 clones writing every 2-6 s and syncing after each write
  (``store.sync()``) on a plain bare remote, while a clone of its own purges
  (``MemoryStore.purge``) the oldest memory of one agent a third of the way
  in: reports how long the purge took, the syncs that failed after it, the
  acknowledged memories lost (the purged one aside), and every place in the
  remote (after the host's gc) and in the clones (after their last sync) that
  still holds its text;
* ``clone``: a new machine joining a 10,000-memory memory: ``memsite clone``
  (git clone, the index, the vectors) beside a plain ``git clone``;
* ``stress``: 50 clones x 20 memories back to back, syncing after every write;
* ``during``: remember() in a clone while a sync of the same clone runs
  (another clone keeps pushing, so each sync fetches and merges), beside
  remember() with no sync running.

The remote stands in for a hosting service (``--remote hosted``, the
default): it keeps each push as the pack it came in (``receive.unpackLimit
1``) and folds those packs together every few seconds (``git repack -d
--geometric=2``), as GitHub describes its maintenance ("Scaling monorepo
maintenance", 2021); a fetch then sends the deltas a push brought rather than
searching them again from loose objects. ``--remote plain`` is a bare
repository with git's defaults (pushes of under 100 objects stored loose,
``git gc --auto`` after 6,700), which charges a fetch that search each time.

Then every clone syncs once more. Plain git carries the same load beside the
paced and stress runs, in clones of its own: ``git add`` + ``git commit`` per
memory, then ``git pull --rebase && git push``, tried up to 8 times (a team's
script).

Reported: memories acknowledged and lost (acknowledged but not on the shared
branch at the end), failed syncs, sync p50/p95/max, how long after its sync
each acknowledged memory was on the shared branch (the remote is polled every
0.25 s), and ``git fsck --strict`` of every clone and of the remote.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import report

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "baseline", "GIT_AUTHOR_EMAIL": "baseline@example.com",
           "GIT_COMMITTER_NAME": "baseline", "GIT_COMMITTER_EMAIL": "baseline@example.com"}
GIT_ATTEMPTS = 8


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=GIT_ENV)
    if check and result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {result.stderr.strip()}")
    return result


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


# --- the processes -----------------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> None:
    """One agent in its own clone: write, sync after every write; one JSON line per event."""
    from corpus import Corpus

    rng = random.Random(args.seed)
    corpus = Corpus(seed=args.seed)
    clone, name = Path(args.clone), args.name

    def say(**event: object) -> None:
        print(json.dumps(event), flush=True)

    if args.kind == "git":
        write, sync = _git_agent(clone, name)
    else:
        from memsite import MemoryStore, MemsiteError

        store = MemoryStore(clone, agent=name)
        store.list()  # the catalog is built before the clock starts

        def write(text: str) -> tuple[str, str]:
            if args.kind == "world":  # one of five keys every clone sets
                commit = store.world.merge({f"team.key{rng.randrange(5)}": f"{name}: {text[:60]}"})
                assert commit is not None
                return commit, commit
            memory = store.remember(text, category="entities", dedupe=False)
            return memory.id, memory.path.name

        def sync() -> str:
            try:
                if args.kind in ("cli", "world"):
                    result = subprocess.run([sys.executable, "-m", "memsite", "-C", str(clone), "--agent", name,
                                             "sync", "--json"], capture_output=True, text=True)
                    if result.returncode != 0:
                        return "failed: " + (result.stderr.strip().splitlines() or ["?"])[-1]
                    return json.loads(result.stdout)["status"]
                return store.sync().status
            except MemsiteError as exc:
                return f"failed: {exc}"

    while time.time() < args.start:
        time.sleep(0.01)
    written = 0
    while (written < args.count) if args.count else (time.time() < args.start + args.duration):
        if args.pace:
            lo, hi = args.pace
            time.sleep(rng.uniform(lo, hi))
        text = corpus.text()
        ident, filename = write(text)
        written += 1
        say(ack=ident, file=filename)
        if args.recall and args.kind != "git":  # (recall by meaning embeds the new memory: a sync publishes it)
            store.recall(" ".join(text.split()[:8]))
        started = time.time()
        status = sync()
        say(sync=time.time() - started, status=status, file=filename, at=time.time())
    for _ in range(20):  # the final sync: until it goes through
        status = sync()
        if not status.startswith("failed"):
            break
        time.sleep(random.uniform(0.2, 1.0))
    say(final=status, cpu=cpu_seconds())


def _git_agent(clone: Path, name: str):  # type: ignore[no-untyped-def]
    """Plain git doing what memsite does: a file per memory, a commit, then pull --rebase && push."""
    counter = iter(range(10**9))
    folder = clone / "content" / "memories" / "entities" / "plain"
    folder.mkdir(parents=True, exist_ok=True)
    env = {**GIT_ENV, "GIT_AUTHOR_NAME": name, "GIT_COMMITTER_NAME": name}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=clone, capture_output=True, text=True, env=env)

    def write(text: str) -> tuple[str, str]:
        filename = f"{name}-{next(counter)}.md"
        (folder / filename).write_text(f"---\nagent: {name}\n---\n{text}\n")
        run("add", str(folder / filename))
        if run("commit", "-q", "-m", f"Remember {filename}").returncode != 0:
            raise RuntimeError("git commit failed")
        return filename, filename

    def sync() -> str:
        for _ in range(GIT_ATTEMPTS):
            if run("pull", "--rebase", "-q").returncode == 0 and run("push", "-q").returncode == 0:
                return "integrated"
            run("rebase", "--abort")
        return f"failed: the push was rejected {GIT_ATTEMPTS} times"

    return write, sync


def integrator(args: argparse.Namespace) -> None:
    """'memsite integrate' in a loop, as the CI workflow runs it on each push to an agent branch."""
    from memsite import MemoryStore, MemsiteError

    store = MemoryStore(args.clone, agent="integrator")
    stop = Path(args.stop)
    while not stop.exists():
        started = time.time()
        try:
            result = store.integrate()
            print(json.dumps({"integrate": time.time() - started, "merged": len(result.merged)}), flush=True)
        except MemsiteError as exc:
            print(json.dumps({"integrate": time.time() - started, "error": str(exc)}), flush=True)
        time.sleep(args.interval)
    print(json.dumps({"cpu": cpu_seconds()}), flush=True)


def purger(args: argparse.Namespace) -> None:
    """At ``--start``, purge the oldest memory ``agent00`` wrote, as a person answering an erasure request."""
    from memsite import MemoryStore, MemsiteError

    store = MemoryStore(args.clone, agent="purger")
    while time.time() < args.start:
        time.sleep(0.05)
    store.sync()
    target = store.list(agent="agent00")[0]  # (oldest first)
    print(json.dumps({"target": target.id, "text": target.content, "file": target.path.name,
                      "age": (store.now() - target.created).total_seconds()}), flush=True)
    started = time.time()
    for attempt in range(1, 4):
        try:
            result = store.purge(target.id, reason="erasure request (benchmark)")
            print(json.dumps({"purged": time.time() - started, "at": time.time(), "attempts": attempt,
                              "tombstone": result.tombstone}), flush=True)
            return
        except MemsiteError as exc:
            print(json.dumps({"purge_error": str(exc)}), flush=True)
    print(json.dumps({"purged": None, "at": time.time()}), flush=True)


def holds(repo: Path, text: str) -> list[str]:
    """Where the repository at ``repo`` still holds ``text``: its history and reflogs, any object, any file."""
    found = []
    log = subprocess.run(["git", "log", "--all", "-p", "--reflog"], cwd=repo, capture_output=True, text=True,
                         errors="replace").stdout
    if text in log:
        found.append("git log --all -p --reflog")
    listed = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").stdout
    objects = subprocess.run(["git", "cat-file", "--batch"], cwd=repo, input=listed.encode(),
                             capture_output=True).stdout
    if text.encode() in objects:
        found.append("an object")
    grep = subprocess.run(["grep", "-r", "-l", "-a", "-F", text, "."], cwd=repo, capture_output=True, text=True)
    return found + [f"file {line}" for line in grep.stdout.split()]


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds of this process, and of the processes it started and waited for (git, and git's own)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy since it started (/proc/stat)."""
    with open("/proc/stat") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


# --- a run -------------------------------------------------------------------------------------------


@dataclass
class Run:
    name: str
    acked: dict[str, str] = field(default_factory=dict)  # file name -> clone
    syncs: list[float] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    queued: int = 0
    synced_at: dict[str, float] = field(default_factory=dict)  # file name -> when its sync returned
    seen_at: dict[str, float] = field(default_factory=dict)  # file name -> first seen on the remote's main
    lost: int = 0
    fsck: str = ""
    final_failed: int = 0
    elapsed: float = 0.0
    integrations: int = 0
    rounds: list[float] = field(default_factory=list)  # seconds each 'memsite integrate' took
    round_errors: int = 0  # integrate runs that ended in an error (kept moving: the next run takes over)
    settled: float | None = None  # seconds after the last worker ended until every acknowledged memory was on main
    cpu: dict[str, float] = field(default_factory=dict)  # where the machine's CPU went during the run
    conflicts: int = 0  # world keys set two ways that merges settled (the world run)
    unlisted: int = 0  # of those, how many no merge commit lists
    purge: dict[str, object] = field(default_factory=dict)  # the purge run: what, how long, where its text is left
    published: tuple[int, int] | None = None  # vectors the syncs published on main, and the commits that did

    def delays(self) -> list[float]:
        return [max(0.0, self.seen_at[f] - self.synced_at[f]) for f in self.synced_at if f in self.seen_at]


HOST_REPACK_SECONDS = 5.0  # how often the hosted remote folds the packs pushes left


def make_remote(root: Path, hosted: bool, bare: bool = False) -> Path:
    """A bare remote holding a fresh memory repository; ``hosted``: each push is kept as its pack; ``bare``:
    made by a plain ``git init --bare`` (HEAD names git's default branch, not ``main``)."""
    from memsite import MemoryStore

    remote = root / "remote.git"
    git(root, "init", "-q", "--bare", *([] if bare else ["-b", "main"]), str(remote))
    if hosted:
        git(remote, "config", "receive.unpackLimit", "1")
    seed = root / "seed"
    MemoryStore.init(seed, agent="seed").close()
    git(seed, "remote", "add", "origin", str(remote))
    git(seed, "push", "-q", "origin", "main")
    return remote


def host_maintenance(remote: Path, stop: threading.Event) -> None:
    """The hosted remote's own maintenance: fold the packs pushes left, geometrically, every few seconds."""
    while not stop.wait(HOST_REPACK_SECONDS):
        git(remote, "repack", "-d", "-q", "--geometric=2", check=False)


def watch(remote: Path, run: Run, stop: threading.Event) -> None:
    """Record when each memory file first appears on the remote's main."""
    while not stop.is_set():
        listed = git(remote, "ls-tree", "-r", "--name-only", "main", "--", "content/memories", check=False).stdout
        now = time.time()
        for line in listed.splitlines():
            run.seen_at.setdefault(line.rpartition("/")[2], now)
        stop.wait(0.25)


def scenario(name: str, kind: str, clones: int, *, pace: tuple[float, float] | None, duration: float,
             count: int, integrate: bool, keep: bool, hosted: bool, bare: bool = False,
             purge_at: float | None = None, recall: bool = False) -> Run:
    run = Run(name)
    root = Path(tempfile.mkdtemp(prefix=f"memsite-team-{kind}-"))
    try:
        remote = make_remote(root, hosted, bare)
        paths = []
        for i in range(clones):
            path = root / f"clone{i:02d}"
            git(root, "clone", "-q", "--branch", "main", str(remote), str(path))
            paths.append(path)
        start = time.time() + 5 + clones * 0.6  # every worker has opened its store by then
        procs = []
        for i, path in enumerate(paths):
            command = [sys.executable, __file__, "_worker", "--kind", kind, "--clone", str(path), "--name",
                       f"agent{i:02d}", "--seed", str(1000 + i), "--start", str(start), "--duration", str(duration),
                       "--count", str(count)]
            if pace:
                command += ["--pace", str(pace[0]), str(pace[1])]
            if recall:
                command.append("--recall")
            procs.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          cwd=HERE.parent))
        stop_file = root / "stop-integrator"
        integrator_proc = None
        if integrate:
            path = root / "integrator"
            git(root, "clone", "-q", str(remote), str(path))
            integrator_proc = subprocess.Popen([sys.executable, __file__, "_integrator", "--clone", str(path),
                                                "--stop", str(stop_file), "--interval", "1"],
                                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        purger_proc = None
        if purge_at is not None:
            path = root / "purger"
            git(root, "clone", "-q", "--branch", "main", str(remote), str(path))
            purger_proc = subprocess.Popen([sys.executable, __file__, "_purger", "--clone", str(path), "--start",
                                            str(start + purge_at)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True, cwd=HERE.parent)
        stop = threading.Event()
        watchers = [threading.Thread(target=watch, args=(remote, run, stop), daemon=True)]
        if hosted:
            watchers.append(threading.Thread(target=host_maintenance, args=(remote, stop), daemon=True))
        for watcher in watchers:
            watcher.start()
        busy = machine_busy()
        outputs = [proc.communicate() for proc in procs]
        run.elapsed = time.time() - start
        ended = time.time()
        acked = {json.loads(line)["file"] for out, _ in outputs for line in out.splitlines() if '"ack"' in line}
        while integrator_proc is not None and time.time() - ended < 120 and not acked <= set(run.seen_at):
            time.sleep(0.25)  # the queue's last rounds
        if acked <= set(run.seen_at):
            run.settled = time.time() - ended
        stop_file.touch()
        run.cpu["machine"] = machine_busy() - busy
        if integrator_proc is not None:
            out, _ = integrator_proc.communicate(timeout=120)
            events = [json.loads(line) for line in out.splitlines() if line]
            run.integrations = sum(event.get("merged", 0) > 0 for event in events)
            run.rounds = [event["integrate"] for event in events if "integrate" in event]
            run.round_errors = sum("error" in event for event in events)
            run.cpu["integrator"] = sum(next(e["cpu"] for e in events if "cpu" in e))
        stop.set()
        for watcher in watchers:
            watcher.join()
        for (out, err), proc in zip(outputs, procs):
            if proc.returncode != 0:
                run.failed.append(f"worker exited {proc.returncode}: {err.strip().splitlines()[-1:]}")
            for line in out.splitlines():
                event = json.loads(line)
                if "ack" in event:
                    run.acked[event["file"]] = event["ack"]
                elif "sync" in event:
                    run.syncs.append(event["sync"])
                    if event["status"].startswith("failed"):
                        run.failed.append(event["status"])
                    else:
                        run.queued += event["status"] == "queued"
                        run.synced_at[event["file"]] = event["at"]
                elif "final" in event:
                    run.final_failed += event["final"].startswith("failed")
                    run.cpu["agents"] = run.cpu.get("agents", 0.0) + event["cpu"][0]
                    run.cpu["their git"] = run.cpu.get("their git", 0.0) + event["cpu"][1]
        if purger_proc is not None:
            out, err = purger_proc.communicate(timeout=600)
            for line in out.splitlines():
                run.purge.update(json.loads(line))
            if "text" not in run.purge:
                run.purge["error"] = (err.strip().splitlines() or ["?"])[-1]
            purged_at = run.purge.get("at") or float("inf")
            run.purge["failed after"] = sum(1 for out, _ in outputs for line in out.splitlines()
                                            if '"sync"' in line and json.loads(line)["status"].startswith("failed")
                                            and json.loads(line)["at"] > purged_at)
            run.acked.pop(str(run.purge.get("file")), None)  # (erased on purpose)
            text = str(run.purge.get("text", ""))[:60]
            git(remote, "reflog", "expire", "--expire=now", "--all")  # what the host's gc does after a force push
            git(remote, "gc", "--prune=now", "--quiet")
            run.purge["left"] = [f"{p.name}: {where}" for p in [remote, *paths, root / "purger"]
                                 for where in (holds(p, text) if text else [])]
        if kind == "world":  # each acknowledged commit is on main; each key a merge found set two ways is listed
            on_main = set(git(remote, "rev-list", "main").stdout.split())
            run.conflicts, run.unlisted = world_conflicts_listed(remote)
        else:
            on_main = {line.rpartition("/")[2] for line in
                       git(remote, "ls-tree", "-r", "--name-only", "main", "--",
                           "content/memories").stdout.splitlines()}
        run.lost = len(set(run.acked) - on_main)
        if recall:  # how many memories' vectors the syncs published, in how many commits
            from memsite.storage.vectors import decode

            files = git(remote, "ls-tree", "-r", "--name-only", "main", "--", "vectors").stdout.split()
            data = [subprocess.run(["git", "show", f"main:{f}"], cwd=remote, capture_output=True).stdout for f in files]
            model = next((d.split(b" ", 3)[3].split(b"\n")[0].decode() for d in data if d), "")
            run.published = (sum(len(decode(d, model)) for d in data),
                             len(git(remote, "log", "--format=%H", "main", "--", "vectors").stdout.split()))
        bad = [str(p.name) for p in [remote, *paths]
               if git(p, "fsck", "--strict", "--no-progress", check=False).returncode]
        run.fsck = "clean" if not bad else "FAILED: " + ", ".join(bad)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    return run


def world_conflicts_listed(remote: Path) -> tuple[int, int]:
    """(world keys the merges on main found set two ways, those of them no World-Conflict trailer lists)."""
    from memsite.features import world

    path = "content/world_state.md"

    def text(commit: str) -> str:
        return git(remote, "show", f"{commit}:{path}", check=False).stdout

    found = unlisted = 0
    for line in git(remote, "rev-list", "--merges", "--parents", "main").stdout.splitlines():
        merge, *parents = line.split()
        listed = git(remote, "log", "-1", "--format=%(trailers:key=World-Conflict,valueonly)", merge).stdout
        current = parents[0]
        for other in parents[1:]:  # (the merge queue's commit has more parents; merged one after another)
            base = git(remote, "merge-base", current, other).stdout.strip()
            keys = world.conflict_keys(text(base), text(current), text(other)) if base else []
            found += len(keys)
            unlisted += sum(f"{key}: kept " not in listed for key in keys)
    return found, unlisted


def clone_run(count: int, keep: bool) -> list[tuple[str, float]]:
    """Seconds for a new machine to join a memory of ``count`` memories: git clone alone, then memsite clone
    by words only and with the default embedder (recall by meaning ready: every memory embedded)."""
    from corpus import Corpus

    from memsite import MemoryStore

    root = Path(tempfile.mkdtemp(prefix="memsite-team-clone-"))
    try:
        remote = root / "remote.git"
        git(root, "init", "-q", "--bare", str(remote))  # HEAD names master, as 'git init --bare' makes it
        seed = root / "seed"
        corpus = Corpus(seed=5)
        with MemoryStore.init(seed, agent="seed", exist_ok=True) as store:
            for start in range(0, count, 5000):
                with store.transaction(f"Seed memories {start}") as tx:
                    for _ in range(start, min(count, start + 5000)):
                        tx.remember(corpus.text(), category=corpus.category(), dedupe=False)
        git(seed, "push", "-q", str(remote), "main")
        rows = []
        for label, command, extra in (
                ("git clone (baseline)", ["git", "clone", "-q", "--branch", "main"], {}),
                ("memsite clone, recall by words", [sys.executable, "-m", "memsite", "--agent", "b", "clone"],
                 {"MEMSITE_EMBEDDING": "none"}),
                ("memsite clone, recall by meaning (default embedder)",
                 [sys.executable, "-m", "memsite", "--agent", "c", "clone"], {})):
            target = root / f"joined-{len(rows)}"
            started = time.perf_counter()
            subprocess.run([*command, str(remote), str(target)], check=True, capture_output=True,
                           env={**os.environ, **extra}, cwd=HERE.parent)
            rows.append((label, time.perf_counter() - started))
            print(f"  {label}: {rows[-1][1]:.1f} s", file=sys.stderr, flush=True)  # (progress)
        return rows
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def during_sync(rounds: int, keep: bool, hosted: bool) -> tuple[list[float], list[float]]:
    """remember() latencies while a sync of the same clone runs, and with none running (same clone, same run)."""
    from corpus import Corpus

    from memsite import MemoryStore

    root = Path(tempfile.mkdtemp(prefix="memsite-team-during-"))
    try:
        remote = make_remote(root, hosted)
        mine, feeder = root / "mine", root / "feeder"
        for path in (mine, feeder):
            git(root, "clone", "-q", str(remote), str(path))
        stop = root / "stop"
        feed = subprocess.Popen([sys.executable, __file__, "_worker", "--kind", "memsite", "--clone", str(feeder),
                                 "--name", "feeder", "--seed", "7", "--start", "0", "--duration", "100000",
                                 "--count", str(rounds * 4)], stdout=subprocess.DEVNULL, cwd=HERE.parent)
        corpus = Corpus(seed=3)
        during: list[float] = []
        idle: list[float] = []
        syncing = threading.Event()
        done = threading.Event()
        if hosted:
            threading.Thread(target=host_maintenance, args=(remote, done), daemon=True).start()
        with MemoryStore(mine, agent="mine") as store:
            store.list()

            def keep_syncing() -> None:
                while not done.is_set():
                    syncing.set()
                    try:
                        store.sync()
                    finally:
                        syncing.clear()
                    time.sleep(0.05)

            for _ in range(rounds):  # no sync running: the baseline
                started = time.perf_counter()
                store.remember(corpus.text(), category="entities", dedupe=False)
                idle.append(time.perf_counter() - started)
                time.sleep(0.02)
            thread = threading.Thread(target=keep_syncing, daemon=True)
            thread.start()
            while len(during) < rounds:
                if not syncing.is_set():
                    time.sleep(0.001)
                    continue
                started = time.perf_counter()
                store.remember(corpus.text(), category="entities", dedupe=False)
                elapsed = time.perf_counter() - started
                if syncing.is_set():
                    during.append(elapsed)
                time.sleep(random.uniform(0.005, 0.03))
            done.set()
            thread.join()
        stop.touch()
        feed.kill()
        feed.wait()
        return during, idle
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


# --- the report --------------------------------------------------------------------------------------


def cpu_line(run: Run) -> str:
    """Where the machine's CPU went: the agents' processes, the git they ran, the integrator, everything else."""
    accounted = run.cpu.get("agents", 0) + run.cpu.get("their git", 0) + run.cpu.get("integrator", 0)
    parts = [f"{name} {seconds:.0f} s" for name, seconds in run.cpu.items() if name != "machine"]
    other = run.cpu.get("machine", 0) - accounted
    queue = (f"; integrate ran {len(run.rounds)} times, {run.integrations} merged something, "
             f"{run.round_errors} errors, p50 / p95 {percentile(run.rounds, 50):.2f} / "
             f"{percentile(run.rounds, 95):.2f} s" if run.rounds else "")
    return (f"  CPU of {run.name}: {run.cpu.get('machine', 0):.0f} s over {run.elapsed:.0f} s of run "
            f"({', '.join(parts)}, other {other:.0f} s: background gc, the remote's, the watcher){queue}")


def purge_line(run: Run) -> str:
    """The purge of a run: what it erased, how long it took, the syncs that failed after it, where its text is."""
    p = run.purge
    if "error" in p or p.get("purged") is None:
        return f"  purge FAILED: {p.get('error') or p.get('purge_error')}"
    left = p.get("left") or []
    return (f"  purge of {p['target']} (written {float(p['age']):.0f} s before): {float(p['purged']):.1f} s, "  # type: ignore[arg-type]
            f"{p['attempts']} attempt(s); failed syncs after it: {p['failed after']}; its text found in: "
            f"{', '.join(left) if left else 'nothing (the remote after its gc, every clone after its last sync)'}")


def failures(run: Run) -> str:
    """The distinct reasons syncs failed, with how many each (what to look at when the column is not 0)."""
    counted: dict[str, int] = {}
    for reason in run.failed:
        counted[reason] = counted.get(reason, 0) + 1
    return "".join(f"\n  {count} x {reason}" for reason, count in sorted(counted.items(), key=lambda x: -x[1])[:5])


def row(run: Run) -> str:
    delays = run.delays()
    synced = len(run.synced_at)
    waited = (f"{percentile(delays, 50):.1f} / {percentile(delays, 95):.1f} / {max(delays):.1f} s "
              f"({len(delays)} of {synced})" if delays else "-")
    settled = "-" if run.settled is None else f"{run.settled:.1f} s"
    return (f"| {run.name} | {len(run.acked)} | {run.lost} | {len(run.failed)} (+{run.final_failed} final) "
            f"| {run.queued} | {percentile(run.syncs, 50):.2f} / {percentile(run.syncs, 95):.2f} / "
            f"{max(run.syncs, default=float('nan')):.2f} s | {waited} | {settled} | {run.fsck} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a small smoke run (minutes)")
    parser.add_argument("--only", nargs="*", choices=["paced", "cli", "bare", "world", "purge", "clone", "stress",
                                                     "during"])
    parser.add_argument("--keep", action="store_true", help="keep the repositories (printed) for a look")
    parser.add_argument("--clones", type=int, help="clones of the paced run (default 50)")
    parser.add_argument("--seconds", type=int, help="length of the paced runs (default 180)")
    parser.add_argument("--no-baseline", action="store_true", help="memsite alone (while tuning; quote runs with it)")
    parser.add_argument("--recall", action="store_true",
                        help="agents recall after each write (with the default model: syncs publish vectors)")
    parser.add_argument("--remote", choices=["hosted", "plain"], default="hosted",
                        help="a remote that keeps pushes as packs, as a hosting service (default), or git's defaults")
    args = parser.parse_args()
    chosen = args.only or ["paced", "cli", "bare", "world", "purge", "clone", "stress", "during"]
    q = args.quick
    hosted = args.remote == "hosted"
    print(f"memsite team benchmark: {os.cpu_count()} cores, git {git(HERE, '--version').stdout.split()[-1]}, "
          + ("a hosted remote (pushes kept as packs, repacked geometrically every "
             f"{HOST_REPACK_SECONDS:.0f} s)" if hosted else "a plain bare remote (git's defaults)"))
    runs: list[Run] = []
    if "paced" in chosen:
        n, d = (8, 30) if q else (50, 180)
        n, d = args.clones or n, args.seconds or d
        for kind in ("memsite",) if args.no_baseline else ("memsite", "git"):
            runs.append(scenario(f"paced, {n} clones x {d} s, {kind}", kind, n, pace=(2, 8), duration=d, count=0,
                                 integrate=kind == "memsite", keep=args.keep, hosted=hosted))
            # (progress)
            print(row(runs[-1]) + "\n" + cpu_line(runs[-1]) + failures(runs[-1]), file=sys.stderr, flush=True)
    if "cli" in chosen:
        n, d = (4, 20) if q else (12, 180)
        runs.append(scenario(f"paced CLI ('memsite sync' processes), {n} clones x {d} s", "cli", n, pace=(2, 6),
                             duration=d, count=0, integrate=True, keep=args.keep, hosted=hosted))
        print(row(runs[-1]) + "\n" + cpu_line(runs[-1]) + failures(runs[-1]), file=sys.stderr, flush=True)  # (progress)
    if "bare" in chosen:
        n, d = (4, 20) if q else (12, args.seconds or 180)
        recalling = ", a recall after each write" if args.recall else ""
        runs.append(scenario(f"paced CLI on a plain 'git init --bare' remote, no merge queue, {n} clones x {d} s"
                             f"{recalling}", "cli", n, pace=(2, 6), duration=d, count=0, integrate=False,
                             keep=args.keep, hosted=False, bare=True, recall=args.recall))
        print(row(runs[-1]) + "\n" + cpu_line(runs[-1]) + failures(runs[-1]), file=sys.stderr, flush=True)  # (progress)
    if "world" in chosen:
        n, d = (4, 20) if q else (12, args.seconds or 120)
        runs.append(scenario(f"world keys: {n} clones setting the same 5 keys x {d} s, 'memsite sync' after each, "
                             "plain bare remote, no merge queue", "world", n, pace=(2, 6), duration=d, count=0,
                             integrate=False, keep=args.keep, hosted=False, bare=True))
        print(row(runs[-1]) + "\n" + cpu_line(runs[-1]) + failures(runs[-1]), file=sys.stderr, flush=True)  # (progress)
        print(f"  world keys set two ways and settled: {runs[-1].conflicts}, not listed: {runs[-1].unlisted}",
              file=sys.stderr, flush=True)
    if "purge" in chosen:
        n, d = (4, 30) if q else (12, args.seconds or 180)
        runs.append(scenario(f"a purge while {n} clones write every 2-6 s x {d} s, store.sync() after each, "
                             "plain bare remote", "memsite", n, pace=(2, 6), duration=d, count=0, integrate=False,
                             keep=args.keep, hosted=False, bare=True, purge_at=d / 3))
        print(row(runs[-1]) + "\n" + purge_line(runs[-1]) + failures(runs[-1]), file=sys.stderr, flush=True)
    if "stress" in chosen:
        n, w = (8, 5) if q else (50, 20)
        for kind in ("memsite",) if args.no_baseline else ("memsite", "git"):
            runs.append(scenario(f"stress, {n} clones x {w} back to back, {kind}", kind, n, pace=None, duration=0,
                                 count=w, integrate=kind == "memsite", keep=args.keep, hosted=hosted))
            # (progress)
            print(row(runs[-1]) + "\n" + cpu_line(runs[-1]) + failures(runs[-1]), file=sys.stderr, flush=True)
    print()
    print("| run | acknowledged | lost | failed syncs | queued | sync p50 / p95 / max | on the shared branch after "
          "its sync, p50 / p95 / max | all on it, after the last write | fsck --strict |")
    print("|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        print(row(run))
    for run in runs:
        print(cpu_line(run) + failures(run))
        if run.name.startswith("world"):
            print(f"  {run.name}: world keys set two ways and settled {run.conflicts}, not listed {run.unlisted}")
        if run.purge:
            print(purge_line(run))
        if run.published is not None:
            print(f"  {run.name}: syncs published the vectors of {run.published[0]} memories in "
                  f"{run.published[1]} commits")
    if "clone" in chosen:
        count = 1000 if q else 10_000
        print()
        print(f"| joining a memory of {count:,} memories (one run) | seconds |")
        print("|---|---|")
        for label, seconds in clone_run(count, args.keep):
            print(f"| {label} | {seconds:.1f} |")
    if "during" in chosen:
        during, idle = during_sync(30 if q else 200, args.keep, hosted)
        print()
        print("| remember() | p50 | p95 | max | writes |")
        print("|---|---|---|---|---|")
        for label, values in (("while a sync of the same clone runs", during), ("no sync running (baseline)", idle)):
            print(f"| {label} | {percentile(values, 50) * 1000:.1f} ms | {percentile(values, 95) * 1000:.1f} ms | "
                  f"{max(values) * 1000:.1f} ms | {len(values)} |")
    report.publish("team-purge" if chosen == ["purge"] else "team", skip=args.quick)


def _subcommand() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role")
    parser.add_argument("--kind", default="memsite")
    parser.add_argument("--clone")
    parser.add_argument("--name")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=float, default=0)
    parser.add_argument("--duration", type=float, default=0)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--pace", type=float, nargs=2)
    parser.add_argument("--stop")
    parser.add_argument("--interval", type=float, default=1)
    parser.add_argument("--recall", action="store_true")
    args = parser.parse_args()
    {"_worker": worker, "_integrator": integrator, "_purger": purger}[args.role](args)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        _subcommand()
    else:
        main()
