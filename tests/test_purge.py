"""Erasure: a purged memory's text is in no commit, object, reflog, pack or cache of the clone, the remote
and the other clones after their sync; everything else stays byte for byte."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import InvalidInput, MemoryStore, NotFound, RepositoryError
from memsite.cli import main
from memsite.storage.activity import pending_counts
from memsite.storage.vectors import decode, published_folder
from tests.conftest import Clock, assert_clean, git
from tests.purge_process import FOLLOW_POINTS, KILL_POINTS
from tests.sites import ROOT, memsite
from tests.test_published_vectors import Counting

SECRET = "Customer Jane Roe lives at 12 Elm Street, card 4111-1111"
ABSTRACT = "Jane Roe address for the refund case"


def holds_text(repo: Path, text: str = "Jane Roe") -> list[str]:
    """Where the repository at ``repo`` (a clone or a bare remote) still holds ``text``: every way to look."""
    found = []
    log = subprocess.run(["git", "log", "--all", "-p", "--reflog"], cwd=repo, capture_output=True, text=True,
                         errors="replace", check=True).stdout  # (published vectors are bytes)
    if text in log:
        found.append("git log --all -p")
    listed = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()
    batch = subprocess.run(["git", "cat-file", "--batch"], cwd=repo, input="\n".join(listed) + "\n",
                           capture_output=True, text=True, errors="replace", check=False).stdout
    if text in batch:
        found.append("git cat-file --batch-all-objects")
    unreachable = git(repo, "fsck", "--unreachable", "--no-reflogs", "--no-progress").split()
    for sha in unreachable:
        if len(sha) == 40 and text in subprocess.run(["git", "cat-file", "-p", sha], cwd=repo, capture_output=True,
                                                     text=True, errors="replace", check=False).stdout:
            found.append(f"unreachable {sha}")
    grep = subprocess.run(["grep", "-r", "-l", "-a", text, "."], cwd=repo, capture_output=True, text=True,
                          check=False).stdout
    # (packs are compressed: what grep finds there is a file in the clear, e.g. a cache)
    found += [f"grep: {line}" for line in grep.split()]
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=repo, capture_output=True, text=True,
                          check=False)
    assert fsck.returncode == 0, fsck.stderr
    return found


def files_at(repo: Path, rev: str = "main") -> dict[str, str]:
    """Every file on ``rev`` other than the purged one, by path: its blob id."""
    return {line.split("\t")[1]: line.split()[2] for line in git(repo, "ls-tree", "-r", rev).splitlines()}


@pytest.fixture
def remote(tmp_path: Path, store: MemoryStore) -> Path:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(store.root, "remote", "add", "origin", str(bare))
    return bare


def write_history(store: MemoryStore, vectors: Counting | None = None) -> tuple[str, list[str]]:
    """A memory holding personal data, updated and forgotten among others; (its id, the other ids).

    With ``vectors``, an embedder: the vectors of every version are published on the way, as a sync does.
    """
    keep = [store.remember("The build server is orion", category="entities").id]
    store.world.merge({"deploy.target": "staging"})
    secret = store.remember(SECRET, category="cases", abstract=ABSTRACT)
    keep.append(store.remember("Deploys happen on Tuesdays", category="events").id)
    publish(store, vectors)
    store.update(secret.id, content=SECRET + " (confirmed by Jane Roe)")
    keep.append(store.remember("Use ruff for linting", category="preferences").id)
    publish(store, vectors)
    store.forget(secret.id, reason="asked to be removed")
    return secret.id, keep


def publish(store: MemoryStore, embedder: Counting | None) -> None:
    if embedder is not None:
        with MemoryStore(store.root, agent=store.agent, embedder=embedder) as hybrid:
            assert hybrid.publish_vectors()[0]


def secret_keys(embedder: Counting) -> set[bytes]:
    """The text keys of the secret's vectors (every version embedded)."""
    return {hashlib.sha1(text.encode()).digest() for text in embedder.texts if "Jane Roe" in text}


def holds_vectors(repo: Path, keys: set[bytes]) -> list[str]:
    """Where the repository at ``repo`` still holds one of the vectors ``keys``: in an object, or a file."""
    listed = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()
    batch = subprocess.run(["git", "cat-file", "--batch"], cwd=repo, input=("\n".join(listed) + "\n").encode(),
                           capture_output=True, check=False).stdout
    found = ["git cat-file --batch-all-objects"] if any(key in batch for key in keys) else []
    for path in sorted(p for p in repo.rglob("*") if p.is_file() and "objects" not in p.parts):
        if any(key in path.read_bytes() for key in keys):
            found.append(str(path.relative_to(repo)))
    return found


def test_a_purge_leaves_the_text_nowhere_and_everything_else_as_it_was(store: MemoryStore, remote: Path) -> None:
    secret, keep = write_history(store)
    store.sync()
    before = files_at(store.root)
    authors = git(store.root, "log", "--format=%an %ae %ad %cn %cd", "--date=raw", "main")
    assert holds_text(store.root)

    result = store.purge(secret, reason="GDPR erasure request 2026-118")

    assert holds_text(store.root) == []
    assert holds_text(remote) == [] or _after_hosting_gc(remote) == []
    after = files_at(store.root)
    assert after.pop("content/purged.md")  # the page listing purges: when, who, why
    assert after == before  # every other memory, world state, session and note, byte for byte
    lines = git(store.root, "log", "--format=%an %ae %ad %cn %cd", "--date=raw", "main").splitlines()
    assert lines[1:] == authors.splitlines()  # authors and dates kept; the tombstone on top
    assert {m.id for m in store.list()} == set(keep)
    message = git(store.root, "log", "-1", "--format=%B", "main")
    assert message.startswith("Purge a memory: GDPR erasure request 2026-118")
    assert "Purged-By: planner" in message and "Action: purged" in message
    assert "main" in result.pushed and git(remote, "rev-parse", "main").strip() == result.tombstone
    assert store.recall("Jane Roe") == []
    assert_clean(store.root)


def _after_hosting_gc(remote: Path) -> list[str]:
    """What a hosting service does after a force push (the docs ask it to): expire, prune."""
    git(remote, "reflog", "expire", "--expire=now", "--all")
    git(remote, "gc", "--prune=now", "--quiet")
    return holds_text(remote)


def test_a_dry_run_lists_commits_files_and_messages_and_changes_nothing(store: MemoryStore) -> None:
    secret, _ = write_history(store)
    tip = git(store.root, "rev-parse", "main")
    result = store.purge(secret, reason="erasure", remote=None, dry_run=True)
    assert result.tombstone is None
    assert len(result.plan.paths) == 1 and result.plan.paths[0].startswith("content/memories/cases/")
    assert len(result.plan.commits) >= 3 and set(result.plan.messages) <= set(result.plan.commits)
    assert git(store.root, "rev-parse", "main") == tip
    assert holds_text(store.root)


def test_bad_input_says_one_line_and_changes_nothing(store: MemoryStore, remote: Path) -> None:
    secret, _ = write_history(store)
    store.sync()
    tip = git(store.root, "rev-parse", "main")
    with pytest.raises(NotFound, match="no memory, current or past, has the id 01ZZZZZZZZZZZZZZZZZZZZZZZZ"):
        store.purge("01ZZZZZZZZZZZZZZZZZZZZZZZZ", reason="erasure")
    with pytest.raises(NotFound, match="no memory, current or past, holds 'nobody wrote this'"):
        store.purge(reason="erasure", matching="nobody wrote this")
    git(store.root, "checkout", "-q", "--detach")
    with pytest.raises(RepositoryError, match="HEAD is detached"):
        store.purge(secret, reason="erasure")
    git(store.root, "checkout", "-q", "main")
    (store.root / ".git" / "rebase-merge").mkdir()
    with pytest.raises(RepositoryError, match="rebase is in progress"):
        store.purge(secret, reason="erasure")
    (store.root / ".git" / "rebase-merge").rmdir()
    with pytest.raises(InvalidInput, match="--reason is required"):
        store.purge(secret, reason=" ")
    assert git(store.root, "rev-parse", "main") == tip and holds_text(store.root)


def test_a_protected_remote_branch_refuses_and_nothing_changes(store: MemoryStore, remote: Path) -> None:
    secret, _ = write_history(store)
    store.sync()
    stash_draft(store.root)
    stashed = git(store.root, "stash", "list", "--format=%H %gs")
    git(remote, "config", "receive.denyNonFastForwards", "true")
    tip = git(store.root, "rev-parse", "main")
    with pytest.raises(RepositoryError, match="refused to rewrite main.*protected branch"):
        store.purge(secret, reason="erasure")
    assert git(store.root, "rev-parse", "main") == tip and git(remote, "rev-parse", "main") == tip
    assert store.get(keep_one(store)).abstract
    assert git(store.root, "for-each-ref", "refs/memsite/") == ""  # nothing of the purge's own either
    assert git(store.root, "stash", "list", "--format=%H %gs") == stashed


def keep_one(store: MemoryStore) -> str:
    return store.list()[0].id


def test_what_others_push_while_the_purge_runs_is_purged_too_and_kept(store: MemoryStore, remote: Path,
                                                                       tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    secret, _ = write_history(store)
    store.sync()
    other = MemoryStore(_clone(remote, tmp_path / "b"), agent="coder")
    from memsite.features import purge as purging
    real = purging.rewrite_refs
    written = []

    def rewrite_while_another_clone_pushes(*args: object, **kwargs: object) -> dict[str, str]:
        if len(written) < 2:  # (a busy team: twice the remote moves before the purge can publish)
            written.append(other.remember(f"Written while the purge ran ({len(written)})", category="events"))
            other.sync()
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(purging, "rewrite_refs", rewrite_while_another_clone_pushes)
    store.purge(secret, reason="erasure")
    assert holds_text(store.root) == [] and _after_hosting_gc(remote) == []
    assert [store.get(m.id).content for m in written] == [m.content for m in written]  # on the remote, purged
    assert git(remote, "rev-parse", "main") == git(store.root, "rev-parse", "main")
    other.sync()
    assert holds_text(other.root) == [] and {m.id for m in written} <= {m.id for m in other.list()}
    other.close()


def test_a_purge_that_cannot_publish_while_others_push_gives_up_and_changes_nothing(
        store: MemoryStore, remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret, _ = write_history(store)
    store.sync()
    other = MemoryStore(_clone(remote, tmp_path / "b"), agent="coder")
    import memsite.features.purge as purging
    real = purging.rewrite_refs

    def rewrite_while_another_clone_pushes(*args: object, **kwargs: object) -> dict[str, str]:
        other.remember("Written while the purge ran", category="events", dedupe=False)
        other.sync()
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(purging, "rewrite_refs", rewrite_while_another_clone_pushes)
    monkeypatch.setattr(purging, "RACE_SECONDS", 0.0)
    tip = git(store.root, "rev-parse", "main")
    with pytest.raises(RepositoryError, match="origin moved since the purge fetched it.*run the purge again"):
        store.purge(secret, reason="erasure")
    assert git(store.root, "rev-parse", "main") == tip and holds_text(store.root)
    other.close()


def _clone(remote: Path, where: Path) -> Path:
    git(remote.parent, "clone", "-q", str(remote), str(where))
    return where


def test_another_clone_follows_the_purge_on_its_next_sync_and_keeps_its_own_commit(
        store: MemoryStore, remote: Path, tmp_path: Path) -> None:
    secret, keep = write_history(store)
    store.sync()
    other = MemoryStore(_clone(remote, tmp_path / "b"), agent="coder")
    assert holds_text(other.root)
    own = other.remember("The staging database is on port 5433", category="entities")
    store.purge(secret, reason="erasure")

    result = other.sync()

    assert result.status == "integrated"
    assert holds_text(other.root) == []
    assert _after_hosting_gc(remote) == []
    mine = other.get(own.id)  # its own unpublished commit survived, moved onto the purged history
    assert mine.content.startswith("The staging database")
    assert {m.id for m in other.list()} == {*keep, own.id}
    subject = git(other.root, "log", "--format=%s %an", "main", "--", str(mine.path.relative_to(other.root)))
    assert subject.startswith("Remember entities: The staging database") and "coder" in subject
    assert git(other.root, "merge-base", "--is-ancestor", git(store.root, "rev-parse", "main").strip(),
               "main", check=False) == ""
    store.sync()
    assert holds_text(store.root) == [] and store.get(own.id)
    assert_clean(other.root)
    other.close()


def test_the_cli_purges_by_id_and_by_pattern_asking_for_yes_above_a_few(store: MemoryStore) -> None:
    secret, _ = write_history(store)
    for text in ("Jane Roe prefers email contact over phone calls", "Refund for Jane Roe approved on Monday",
                 "The hinge in Jane Roe's order arrived broken", "A courier lost the parcel sent to Jane Roe"):
        store.remember(text, category="events")
    store.world.merge({"support.contact": "Jane Roe"})  # not a memory: the purge keeps it, and says so
    runner = CliRunner()
    base = ["--repo", str(store.root)]
    dry = runner.invoke(main, [*base, "purge", secret, "--reason", "erasure", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "content/memories/cases/" in dry.output and "commits" in dry.output
    many = runner.invoke(main, [*base, "purge", "--matching", "Jane Roe", "--reason", "erasure"])
    assert many.exit_code != 0 and "5 memories hold 'Jane Roe'" in many.output and "--yes" in many.output
    done = runner.invoke(main, [*base, "purge", "--matching", "Jane Roe", "--reason", "erasure", "--yes"])
    assert done.exit_code == 0, done.output
    assert "purged 5 memories" in done.output
    assert "'Jane Roe' is also in files a purge keeps" in done.output and "  content/world_state.md" in done.output
    store.fresh()
    assert store.world.read()["support.contact"] == "Jane Roe"  # kept as it was
    assert holds_text(store.root, "prefers email contact") == [] and holds_text(store.root, ABSTRACT) == []


@pytest.mark.slow  # a site build
def test_the_next_site_build_holds_the_text_nowhere_and_lists_the_purge(store: MemoryStore, tmp_path: Path) -> None:
    secret, _ = write_history(store)
    live = store.remember("Jane Roe's second address is 9 Oak Lane", category="cases").id  # a page of its own
    store.close()
    memsite("-C", str(store.root), "build", home=tmp_path)  # the site as it was (its unchanged pages are kept)
    site = store.root / "site"
    assert "Jane Roe" in (site / "m" / live / "index.html").read_text()
    with MemoryStore(store.root, agent="planner") as again:
        again.purge(secret, live, reason="erasure request 118", remote=None)
    memsite("-C", str(store.root), "build", home=tmp_path)
    grep = subprocess.run(["grep", "-r", "-l", "-a", "Jane Roe", str(site)], capture_output=True, text=True,
                          check=False)
    assert grep.stdout == ""  # pages, history, week pages, search index
    for _ in range(300):  # (the site it replaced is removed by a process the build does not wait for)
        if not list(store.root.glob(".site.old-*")):
            break
        time.sleep(0.1)
    assert holds_text(store.root) == []  # nor a cache of the build
    home = (site / "index.html").read_text()
    latest = home[home.index("Latest changes"):]
    assert "purged: erasure request 118" in latest
    assert "erasure request 118" in (site / "purged" / "index.html").read_text()


@pytest.mark.parametrize("point", [  # (one point mid-purge in the quick suite; every point in the full one)
    pytest.param(point, marks=() if point == "published" else pytest.mark.slow) for point in sorted(KILL_POINTS)])
def test_a_killed_purge_leaves_the_clone_as_it_was_or_purged_and_a_second_run_finishes_it(
        store: MemoryStore, remote: Path, point: str) -> None:
    embedder = Counting()
    secret, _ = write_history(store, embedder)
    store.sync()
    stash_draft(store.root)  # on a commit that held the memory: its message names it
    before = git(store.root, "rev-parse", "main").strip()
    store.close()
    killed = subprocess.run([sys.executable, "-m", "tests.purge_process", str(store.root), secret, "--kill-at", point],
                            cwd=ROOT, capture_output=True, text=True, check=False)
    assert killed.returncode == -9, killed.stderr
    tip = git(store.root, "rev-parse", "main").strip()
    purged = "Action: purged" in git(store.root, "log", "-1", "--format=%B", "main")
    assert tip == before or purged  # never half: the branch is the old one or the purged one
    if tip == before:
        assert store.root.joinpath(".git").exists() and holds_text(store.root)
    finished = subprocess.run([sys.executable, "-m", "tests.purge_process", str(store.root), secret],
                              cwd=ROOT, capture_output=True, text=True, check=False)
    assert finished.returncode == 0, finished.stderr
    assert holds_text(store.root) == [] and holds_vectors(store.root, secret_keys(embedder)) == []
    assert "Draft of the welcome text." in git(store.root, "stash", "show", "-p", "stash@{0}")
    assert _after_hosting_gc(remote) == [] and holds_vectors(remote, secret_keys(embedder)) == []
    assert git(remote, "rev-parse", "main") == git(store.root, "rev-parse", "main")
    assert_clean(store.root)


def test_a_memory_written_while_the_purge_runs_is_not_lost(store: MemoryStore, remote: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    secret, _ = write_history(store)
    store.sync()
    import memsite.features.purge as purging
    real = purging.rewrite_refs
    landed = []

    def rewrite_while_the_agent_writes(*args: object, **kwargs: object) -> dict[str, str]:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        landed.append(store.remember("Written while the purge ran", category="events"))
        return result

    monkeypatch.setattr(purging, "rewrite_refs", rewrite_while_the_agent_writes)
    with pytest.raises(RepositoryError, match="a branch moved while the purge ran.*run the purge again"):
        store.purge(secret, reason="erasure")
    assert store.get(landed[0].id)
    monkeypatch.setattr(purging, "rewrite_refs", real)
    store.purge(secret, reason="erasure")
    assert store.get(landed[0].id).content == "Written while the purge ran"
    assert holds_text(store.root) == [] and _after_hosting_gc(remote) == []
    assert_clean(store.root)


def test_a_clone_whose_own_commit_changed_what_the_purged_branch_changed_merges_it_as_a_sync_does(
        store: MemoryStore, remote: Path, tmp_path: Path) -> None:
    secret, _ = write_history(store)
    store.sync()
    other = MemoryStore(_clone(remote, tmp_path / "b"), agent="coder")
    store.world.merge({"ci.status": "green"})  # after the other clone last synced
    store.sync()
    store.purge(secret, reason="erasure")
    other.world.merge({"db.version": "16"})  # the same file, another key, not published yet

    other.sync()

    assert other.world.read() == {"deploy.target": "staging", "ci.status": "green", "db.version": "16"}
    assert holds_text(other.root) == []
    store.sync()
    assert store.world.read() == other.world.read() and holds_text(store.root) == []
    assert_clean(other.root)
    other.close()


def test_the_catalog_of_past_commits_forgets_the_purged_text_too(store: MemoryStore, clock: Clock) -> None:
    store.remember("The build server is orion", category="entities")
    clock.advance(hours=1)
    secret = store.remember(SECRET, category="cases", abstract=ABSTRACT).id
    clock.advance(hours=1)
    then = store.now()
    clock.advance(hours=1)
    store.forget(secret, reason="asked to be removed")
    assert "Jane Roe" in store.get(secret, as_of=then).content  # an as-of read: a catalog of that commit
    assert any("past.sqlite3" in hit for hit in holds_text(store.root))
    store.purge(secret, reason="erasure", remote=None)
    assert holds_text(store.root) == []
    with pytest.raises(NotFound):
        store.get(secret, as_of=then)


def test_the_purged_memorys_vectors_leave_the_published_files_their_history_and_the_cache(
        store: MemoryStore, remote: Path, tmp_path: Path, clock: Clock) -> None:
    embedder = Counting()
    secret, keep = write_history(store, embedder)
    store.sync()
    keys = secret_keys(embedder)
    assert len(keys) == 2 and holds_vectors(store.root, keys)  # both versions, published and cached
    dry = CliRunner().invoke(main, ["--repo", str(store.root), "purge", secret, "--reason", "erasure", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert f"published vector files that hold their vectors (1):\n  {published_folder('counting/1')}" in dry.output

    plan = store.purge(secret, reason="erasure").plan

    assert plan.vectors and plan.vectors[0].startswith(published_folder("counting/1"))
    assert holds_vectors(store.root, keys) == []  # no version of a vector file, no cache, no working file
    assert _after_hosting_gc(remote) == [] and holds_vectors(remote, keys) == []
    (vec,) = (store.root / published_folder("counting/1")).iterdir()
    assert len(decode(vec.read_bytes(), "counting/1")) == len(keep)  # every other memory's vector stays published
    cache = sqlite3.connect(store.root / ".memsite" / "vectors.sqlite3")
    assert cache.execute("SELECT count(*) FROM vectors").fetchone()[0] == len(keep)  # and cached
    cache.close()
    again = Counting()
    with MemoryStore(store.root, agent="planner", clock=clock, embedder=again) as hybrid:
        assert hybrid.recall("build server")[0].memory.abstract.startswith("The build server")
    assert again.memories_embedded() == []  # nothing embedded again
    other = MemoryStore(_clone(remote, tmp_path / "b"), agent="coder")
    assert holds_vectors(other.root, keys) == []
    assert_clean(store.root)
    other.close()


def test_a_purge_leaves_a_persons_stashes_and_reflog_entries_that_never_held_the_memory(
        store: MemoryStore, remote: Path) -> None:
    index = store.root / "content" / "index.md"
    for n in (1, 2):  # a person's work in progress, put aside
        index.write_text(index.read_text() + f"\nDraft {n} of the welcome text.\n")
        git(store.root, "stash", "-q")
    before = git(store.root, "reflog", "show", "--format=%H %gs", "HEAD").splitlines()
    secret, _ = write_history(store)
    store.sync()

    store.purge(secret, reason="erasure")

    assert holds_text(store.root) == []
    assert len(git(store.root, "stash", "list").splitlines()) == 2
    assert "Draft 1" in git(store.root, "stash", "show", "-p", "stash@{1}")
    after = git(store.root, "reflog", "show", "--format=%H %gs", "HEAD").splitlines()
    assert after[-len(before):] == before  # HEAD's entries from before the memory was written stay


def test_a_clone_in_queue_mode_shows_its_commits_once_after_following_a_purge(
        store: MemoryStore, remote: Path, tmp_path: Path) -> None:
    secret, _ = write_history(store)
    store.sync()
    root = _clone(remote, tmp_path / "b")
    settings = root / "mkdocs.yml"
    settings.write_text(settings.read_text().replace("  memsite:\n", "  memsite:\n    sync: {integrate: queue}\n", 1))
    git(root, "commit", "-qam", "sync.integrate: queue")
    other = MemoryStore(root, agent="coder")
    assert other.config.sync_integrate == "queue"
    other.remember("The staging database is on port 5433", category="entities")
    assert other.sync().status == "queued"
    store.integrate()  # the merge queue takes it in
    other.remember("The staging cache is redis 7", category="entities")
    assert other.sync().status == "queued"  # published, waiting for the queue
    store.sync()
    store.purge(secret, reason="erasure")

    other.sync()
    store.integrate()
    other.sync()
    store.sync()

    for where in (remote, other.root, store.root):
        subjects = git(where, "log", "--format=%s", "main").splitlines()
        for text in ("The staging database is on port 5433", "The staging cache is redis 7",
                     "sync.integrate: queue"):
            assert sum(text in subject for subject in subjects) == 1, (where, text, subjects)
    assert holds_text(other.root) == []
    other.close()


def stash_draft(root: Path, text: str = "Draft of the welcome text.", *options: str) -> None:
    """A person's work in progress on the welcome page, put aside with ``git stash``."""
    index = root / "content" / "index.md"
    index.write_text(index.read_text() + f"\n{text}\n")
    git(root, "stash", "-q", *options)


def stash_log(root: Path) -> list[str]:
    """Each stash entry's place, who made it and when (``git stash list`` orders and names them by these)."""
    return git(root, "log", "-g", "--date=raw", "--format=%gd %gn <%ge>", "refs/stash").splitlines()


def test_a_stash_of_the_memorys_file_goes_with_it(store: MemoryStore) -> None:
    """A person's stash holding the memory's text (an edit of its file, put aside on a commit that held it) is
    written again without it, in its place, with the person's other changes; a stash of anything else stays."""
    stash_draft(store.root)
    untouched = git(store.root, "rev-parse", "stash@{0}").strip()
    secret = store.remember(SECRET, category="cases", abstract=ABSTRACT)
    path = store.root / git(store.root, "ls-files", "content/memories/cases").split()[0]
    path.write_text(path.read_text() + "\nJane Roe called again.\n")
    (store.root / "scratch.txt").write_text("a scratch file, untracked\n")
    stash_draft(store.root, "Second draft of the welcome text.", "--include-untracked")
    listed, log = git(store.root, "stash", "list").splitlines(), stash_log(store.root)
    assert "Jane Roe" in listed[0]

    dry = CliRunner().invoke(main, ["--repo", str(store.root), "purge", secret.id, "--reason", "erasure", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    stashed = git(store.root, "rev-parse", "stash@{0}").strip()
    assert f"stash entries that hold them, written again in place (1):\n  stash@{{0}} {stashed[:12]}\n" in dry.output
    store.purge(secret.id, reason="erasure")

    assert holds_text(store.root) == []
    after = git(store.root, "stash", "list").splitlines()
    assert after[1:] == listed[1:] and git(store.root, "rev-parse", "stash@{1}").strip() == untouched
    assert after[0].startswith("stash@{0}: WIP on main: ") and after[0].endswith(" Remember cases: [purged]")
    assert stash_log(store.root) == log  # the same entries, in their order, by whom and when they were made
    shown = git(store.root, "stash", "show", "-p", "--include-untracked", "stash@{0}")
    assert "Second draft of the welcome text." in shown and "a scratch file" in shown and "cases/" not in shown
    assert "Draft of the welcome text." in git(store.root, "stash", "show", "-p", "stash@{1}")
    git(store.root, "stash", "pop", "-q")  # the person takes their work back, on the purged branch
    assert "Second draft" in (store.root / "content" / "index.md").read_text()
    assert (store.root / "scratch.txt").exists() and not path.exists()


def test_another_clone_rewrites_its_own_stash_on_its_next_sync(store: MemoryStore, remote: Path,
                                                               tmp_path: Path) -> None:
    secret, _ = write_history(store)
    store.sync()
    other = MemoryStore(_clone(remote, tmp_path / "b"), agent="coder")
    stash_draft(other.root)  # on a commit that held the memory (its message names it too)
    log = stash_log(other.root)
    assert holds_text(other.root)
    store.purge(secret, reason="erasure")

    other.sync()

    assert holds_text(other.root) == []
    assert git(other.root, "rev-parse", "main") == git(remote, "rev-parse", "main")
    assert stash_log(other.root) == log
    assert "Draft of the welcome text." in git(other.root, "stash", "show", "-p", "stash@{0}")
    assert git(other.root, "stash", "list").startswith("stash@{0}: WIP on main: ")
    other.close()


def test_a_stash_made_while_the_purge_runs_stops_it_and_the_next_run_takes_it_too(
        store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    secret, _ = write_history(store)
    stash_draft(store.root)
    import memsite.features.purge as purging
    real = purging.rewrite_refs

    def rewrite_while_the_person_stashes(*args: object, **kwargs: object) -> dict[str, str]:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        stash_draft(store.root, "Another draft, put aside meanwhile.")
        return result

    monkeypatch.setattr(purging, "rewrite_refs", rewrite_while_the_person_stashes)
    with pytest.raises(RepositoryError, match="moved while the purge ran.*run the purge again"):
        store.purge(secret, reason="erasure", remote=None)
    assert len(git(store.root, "stash", "list").splitlines()) == 2 and holds_text(store.root)
    assert git(store.root, "for-each-ref", "refs/memsite/") == ""
    monkeypatch.setattr(purging, "rewrite_refs", real)
    store.purge(secret, reason="erasure", remote=None)
    assert holds_text(store.root) == [] and len(git(store.root, "stash", "list").splitlines()) == 2
    assert "Another draft" in git(store.root, "stash", "show", "-p", "stash@{0}")


def test_a_purge_by_pattern_is_followed_by_another_clone_as_one_by_id(store: MemoryStore, remote: Path,
                                                                      tmp_path: Path) -> None:
    """The pattern is written nowhere a follower can read it: a follower finds it in what the purge took out of
    the history they share, and writes its branches to the same commits."""
    secret, keep = write_history(store)
    other_secret = store.remember("Jane Roe's second address is 9 Oak Lane", category="cases").id
    store.forget(other_secret, reason="Jane Roe asked to be removed")  # the pattern, outside any memory's text
    store.sync()
    other = MemoryStore(_clone(remote, tmp_path / "b"), agent="coder")
    own = other.remember("The staging database is on port 5433", category="entities")
    scratch = other.remember("The staging cache is redis 7", category="entities")
    other.forget(scratch.id, reason="Jane Roe called: the cache is memcached")  # its own message holds the pattern
    result = store.purge(reason="erasure", matching="Jane Roe")
    assert set(result.plan.ids) == {secret, other_secret}

    other.sync()

    assert holds_text(other.root) == [] and _after_hosting_gc(remote) == []
    store.sync()
    assert holds_text(store.root) == [] and store.get(own.id)
    for where in (remote, store.root, other.root):  # the history they shared, once: the purge's own commits
        subjects = git(where, "log", "--format=%s", "main").splitlines()
        assert subjects.count("Remember entities: The build server is orion") == 1, (where, subjects)
        assert subjects.count("Remember entities: The staging database is on port 5433") == 1, (where, subjects)
        assert subprocess.run(["git", "merge-base", "--is-ancestor", result.tombstone or "", "main"],
                              cwd=where).returncode == 0
    assert f"Forgot {scratch.id}: [purged] called: the cache is memcached" in git(remote, "log", "--format=%B")
    assert {m.id for m in other.list()} == {*keep, own.id}
    other.close()


def test_a_purged_memorys_recalls_waiting_for_a_commit_go_with_it(store: MemoryStore) -> None:
    kept = store.remember("The build server is orion", category="entities")
    secret = store.remember(SECRET, category="cases", abstract=ABSTRACT)
    store.recall("Jane Roe refund case")
    store.recall("build server orion")
    assert {secret.id, kept.id} <= set(pending_counts(store.root))

    store.purge(secret.id, reason="erasure", remote=None)

    assert set(pending_counts(store.root)) == {kept.id}  # the other memory's recall still waits
    store.flush_activity()
    assert store.get(kept.id).active_count == 1 and holds_text(store.root) == []


def test_refs_a_person_or_git_keeps_beside_the_branches_are_rewritten_too(store: MemoryStore, remote: Path) -> None:
    """A filter-branch backup (refs/original/) or git maintenance's prefetched copy of the remote (refs/prefetch/)
    would keep every old commit, and the text with it."""
    secret, _ = write_history(store)
    store.sync()
    for ref in ("refs/original/refs/heads/main", "refs/prefetch/remotes/origin/main"):
        git(store.root, "update-ref", ref, "main")
    tip = git(store.root, "rev-parse", "main").strip()
    git(store.root, "notes", "add", "-m", "reviewed by a person", tip)  # a note on a commit of the old history

    store.purge(secret, reason="erasure")

    assert holds_text(store.root) == []
    for ref in ("refs/original/refs/heads/main", "refs/prefetch/remotes/origin/main"):
        assert git(store.root, "rev-parse", ref) == git(store.root, "rev-parse", "main^")  # the rewritten history
    assert "reviewed by a person" in git(store.root, "notes", "show", tip)  # notes stay as they were


def test_a_stash_message_quoting_a_subject_cut_short_loses_it_too(store: MemoryStore) -> None:
    """A long abstract is cut short in the commit's subject (``…``), and a stash made on that commit quotes it."""
    abstract = "Jane Roe asked for the refund of order 1182 to go to her new address in Elm Street"
    secret = store.remember(SECRET, category="cases", abstract=abstract)
    assert git(store.root, "log", "-1", "--format=%s").strip().endswith("…")
    stash_draft(store.root)
    assert "refund of order" in git(store.root, "stash", "list")

    store.purge(secret.id, reason="erasure", remote=None)

    assert holds_text(store.root) == [] and holds_text(store.root, "refund of order") == []
    assert git(store.root, "stash", "list").strip().endswith(" Remember cases: [purged]")


def test_an_edit_of_the_memorys_file_not_committed_stops_the_purge_until_it_is_stashed(store: MemoryStore) -> None:
    """The branch's files follow the rewritten branch: an edit there would keep the text (or stop them half way)."""
    secret = store.remember(SECRET, category="cases", abstract=ABSTRACT)
    path = store.root / git(store.root, "ls-files", "content/memories/cases").split()[0]
    path.write_text(path.read_text() + "\nJane Roe called again.\n")
    tip = git(store.root, "rev-parse", "main")
    with pytest.raises(RepositoryError, match=r"cases/.*\.md has changes not committed and is purged; stash them"):
        store.purge(secret.id, reason="erasure", remote=None)
    assert git(store.root, "rev-parse", "main") == tip and git(store.root, "for-each-ref", "refs/memsite/") == ""
    assert "Jane Roe called again" in path.read_text()  # the person's edit, untouched

    git(store.root, "stash", "-q")
    store.purge(secret.id, reason="erasure", remote=None)

    assert holds_text(store.root) == [] and not path.exists() and git(store.root, "status", "--short") == ""


def test_a_clone_with_an_edit_of_the_purged_file_not_committed_syncs_once_it_is_stashed(
        store: MemoryStore, remote: Path, tmp_path: Path) -> None:
    secret = store.remember(SECRET, category="cases", abstract=ABSTRACT)
    store.sync()
    other = MemoryStore(_clone(remote, tmp_path / "b"), agent="coder")
    path = other.root / git(other.root, "ls-files", "content/memories/cases").split()[0]
    path.write_text(path.read_text() + "\nJane Roe called again.\n")
    store.purge(secret.id, reason="erasure")
    tip = git(other.root, "rev-parse", "main")

    with pytest.raises(RepositoryError, match="has changes not committed and is purged; stash them.*then sync"):
        other.sync()

    assert git(other.root, "rev-parse", "main") == tip and "Jane Roe called again" in path.read_text()
    git(other.root, "stash", "-q")
    other.sync()
    assert holds_text(other.root) == [] and git(other.root, "rev-parse", "main") == git(remote, "rev-parse", "main")
    other.close()


@pytest.mark.parametrize("point", [
    pytest.param(point, marks=() if point == "refs-moved" else pytest.mark.slow) for point in sorted(FOLLOW_POINTS)])
def test_a_clone_killed_while_following_a_purge_finishes_on_its_next_sync(
        store: MemoryStore, remote: Path, tmp_path: Path, point: str) -> None:
    secret, keep = write_history(store)
    store.sync()
    other = MemoryStore(_clone(remote, tmp_path / "b"), agent="coder")
    own = other.remember("The staging database is on port 5433", category="entities").id
    stash_draft(other.root)
    other.close()
    store.purge(secret, reason="erasure")

    killed = subprocess.run([sys.executable, "-m", "tests.purge_process", str(other.root), "--follow", "--kill-at",
                             point], cwd=ROOT, capture_output=True, text=True, check=False)
    assert killed.returncode == -9, killed.stderr
    finished = subprocess.run([sys.executable, "-m", "tests.purge_process", str(other.root), "--follow"],
                              cwd=ROOT, capture_output=True, text=True, check=False)
    assert finished.returncode == 0, finished.stderr

    assert holds_text(other.root) == []
    store.sync()
    assert holds_text(store.root) == [] and _after_hosting_gc(remote) == []
    subjects = git(remote, "log", "--format=%s", "main").splitlines()
    assert subjects.count("Remember entities: The build server is orion") == 1, subjects  # not doubled
    assert {m.id for m in store.list()} == {*keep, own}
    assert "Draft of the welcome text." in git(other.root, "stash", "show", "-p", "stash@{0}")


def test_a_push_that_moves_the_branch_while_the_purge_pushes_is_a_race_it_retries(store: MemoryStore,
                                                                                  remote: Path) -> None:
    """Another clone's push landing between the remote's check of the purge's lease and its update of the ref
    ('cannot lock ref ... is at X but expected Y') is the same race as a lease that failed: fetch, rewrite what
    came, push again."""
    secret, _ = write_history(store)
    store.sync()
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\n[ -e moved-once ] && exit 0\ntouch moved-once\n"
                    "unset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES\n"
                    "tip=$(git rev-parse refs/heads/main)\n"
                    "new=$(git commit-tree \"$tip^{tree}\" -p \"$tip\" -m 'Pushed while the purge pushed')\n"
                    "git update-ref refs/heads/main \"$new\" \"$tip\"\n")
    hook.chmod(0o755)

    store.purge(secret, reason="erasure")

    assert (remote / "moved-once").exists()
    subjects = git(remote, "log", "--format=%s", "main").splitlines()
    assert subjects.count("Pushed while the purge pushed") == 1 and subjects[0].startswith("Purge a memory")
    assert holds_text(store.root) == [] and _after_hosting_gc(remote) == []
