"""The task protocol: an agent cannot finish a task without writing things down.

    with store.task(type="debug", keywords=["undefined var", "add"]) as task:
        task.plan(["find the cause", "fix", "verify"])
        task.check("find the cause", note="NameError in add()")
        task.rounds += 1
        task.problem("..."); task.solution("..."); task.learn("pattern: ...")
        task.world({"ci.status": "green"})

Start reads the agent's knowledge and the world state, matches known patterns,
and writes the TODO (always ending with the four closing steps) to
``task_process.md``. Every change to the TODO is written to that file at once,
so a crash leaves the working memory on disk and the next start resumes it.
It is working memory: written to the working tree, committed when the task
closes. Close makes one commit of all four steps (session record, agent
knowledge, world state, cleared working memory) or, if any step cannot be
done, commits nothing and raises ProtocolError listing what is missing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from ..foundation import inputs
from ..foundation.errors import FormatError, InvalidInput, MemsiteError, ProtocolError, SecretFound
from ..foundation.record import format_time, one_line
from . import sessions, world
from .notes import (
    CLOSING_STEPS,
    Knowledge,
    TaskState,
    TodoItem,
    parse_knowledge,
    parse_process,
    render_knowledge,
    render_process,
)

if TYPE_CHECKING:
    from ..storage import Storage, Transaction

log = logging.getLogger("memsite")

STEP_SESSION, STEP_KNOWLEDGE, STEP_WORLD, STEP_CLEAR = CLOSING_STEPS
MAX_TEXT = 32 * 1024


def start(store: Storage, type: str | None, keywords: Iterable[str], plan: Iterable[str] | None) -> Task:
    """Start a task for ``store.agent``, or resume the one left unfinished. See MemoryStore.task."""
    words = [_keyword(k) for k in ([keywords] if isinstance(keywords, str) else keywords)]
    type = _task_type(type) if type is not None else None
    lock = FileLock(store.repo.state_dir / f"task-{store.agent}.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ProtocolError(f"agent {store.agent} already has a task open in another process; finish it there "
                            "or write as another agent", []) from None
    try:
        config = store.config
        for folder in (config.sessions_dir, config.notes_path(store.agent, "")):
            (store.root / folder).mkdir(parents=True, exist_ok=True)
        knowledge = read_knowledge(store)
        state_path = store.root / config.notes_path(store.agent, "task_process.md")
        on_disk = state_path.read_text(encoding="utf-8") if state_path.exists() else None
        existing = parse_process(on_disk, str(state_path)) if on_disk else None
        if existing is not None:
            if type is not None and (type != existing.type or (words and words != existing.keywords)):
                raise ProtocolError(
                    f"agent {store.agent} has an unfinished task ({existing.type}: {', '.join(existing.keywords)}, "
                    f"started {format_time(existing.started)}); resume it with store.task() or "
                    "'memsite task show', or close it with task.abandon(reason)", [])
            state, resumed = existing, True
        else:
            if type is None:
                raise ProtocolError(f"agent {store.agent} has no task in progress; start one with "
                                    "store.task(type, keywords)", [])
            matched = knowledge.matching(type, words)
            state = TaskState(store.agent, type, words, store.now(), pattern=matched[0] if matched else None)
            resumed = False
        return Task(store, state, knowledge, lock, resumed=resumed, plan=plan)
    except BaseException:
        lock.release()
        raise


def read_knowledge(store: Storage, agent: str | None = None) -> Knowledge:
    """The agent's knowledge at the branch tip (empty if it has none yet)."""
    agent = agent or store.agent
    path = store.config.notes_path(agent, "agent_knowledge.md")
    with store.repo.thread_lock:
        data = store.repo.read_file(store.tip(), path)
    return parse_knowledge(data.decode("utf-8"), path, agent) if data else Knowledge(agent)


class Task:
    """A task in progress; see the module documentation and MemoryStore.task."""

    def __init__(self, store: Storage, state: TaskState, knowledge: Knowledge, lock: FileLock, *,
                 resumed: bool, plan: Iterable[str] | None = None) -> None:
        """Takes the task's ``lock``; writes its working memory at once, with ``plan`` as the TODO if given."""
        self._store = store
        self._state = state
        self._lock = lock
        self._written: bytes | None = None
        self.resumed = resumed
        """True when this picked up a task a crash (or another process) left unfinished."""
        self.knowledge = knowledge
        self.known_patterns: list[str] = knowledge.matching(state.type, state.keywords)
        """Patterns from the agent's knowledge that share words with this task, best first."""
        self.world_state: dict[str, str] = world.World(store).read()
        """The world state as it was when the task started."""
        self.session: str | None = None
        """The session record's name, once the task is closed."""
        self.commit: str | None = None
        """The commit that closed the task."""
        self.closed = False
        if plan is not None:
            self.plan(plan)
        else:
            self._save()

    # --- what the task knows ------------------------------------------------

    @property
    def root(self) -> Path:
        """The repository's working tree."""
        return self._store.root

    @property
    def agent(self) -> str:
        return self._state.agent

    @property
    def type(self) -> str:
        return self._state.type

    @property
    def keywords(self) -> list[str]:
        return list(self._state.keywords)

    @property
    def todo(self) -> list[tuple[str, bool, str]]:
        """The plan as (item, done, note), closing steps excluded."""
        return [(t.text, t.done, t.note) for t in self._state.todo]

    @property
    def rounds(self) -> int:
        return self._state.rounds

    @rounds.setter
    def rounds(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInput(f"rounds: expected a whole number >= 0, got {value!r}")
        self._state.rounds = value
        self._save()

    # --- the TODO (written to task_process.md at once) ------------------------

    def plan(self, items: Iterable[str]) -> None:
        """Replace the plan; items already checked keep their state."""
        previous = {t.text: t for t in self._state.todo}
        texts = [_item(text) for text in items]
        self._state.todo = [previous.get(text, TodoItem(text)) for text in dict.fromkeys(texts)]
        self._save()

    def add(self, item: str) -> None:
        """Add an item at the end of the plan."""
        text = _item(item)
        if text not in {t.text for t in self._state.todo}:
            self._state.todo.append(TodoItem(text))
        self._save()

    def drop(self, item: str) -> None:
        """Remove an item from the plan (it turned out not to be needed)."""
        self._state.todo.remove(self._find(item))
        self._save()

    def check(self, item: str, note: str | None = None) -> None:
        """Mark an item done, with an optional note of what was found."""
        found = self._find(item)
        found.done = True
        if note is not None:
            found.note = one_line(self._text(note, "note"))
        self._save()

    # --- the record -----------------------------------------------------------

    def problem(self, text: str) -> None:
        """Describe the problem the task addressed (the session's Problem section)."""
        self._state.problem = self._text(text, "problem")
        self._save()

    def solution(self, text: str) -> None:
        """Describe the solution (the session's Solution section)."""
        self._state.solution = self._text(text, "solution")
        self._save()

    def learn(self, text: str) -> None:
        """Record a learning. Closing the task stores each as a memory recall can find (its source the
        session): one starting with 'pattern:' in ``patterns`` (and the agent's knowledge), the rest in ``general``."""
        self._state.learnings.append(one_line(self._text(text, "learning")))
        self._save()

    def world(self, updates: Mapping[str, object] | None = None, remove: Iterable[str] = ()) -> None:
        """World state changes to merge when the task closes (checked now).

        Raises:
            InvalidInput: a bad key or value, or the world state would pass
                its cap (``max_world_bytes``, as for ``store.world.merge``).
        """
        cap = self._store.config.max_world_bytes
        sets = dict(self._state.world)
        removes = list(self._state.world_remove)
        for key, value in world.check_updates(updates, "task.world").items():
            key, body = world.check_value(key, value, cap)
            sets[key] = body
            if key in removes:
                removes.remove(key)
        for key in world.check_remove(remove, "task.world"):
            key = world.check_value(key, "", cap)[0]
            sets.pop(key, None)
            if key not in removes:
                removes.append(key)
        current = world.World(self._store).read()
        world.render_checked("", world.merged(current, sets, [k for k in removes if k in current]), cap,
                             len(world.render("", current).encode("utf-8")) if current else 0)
        self._state.world, self._state.world_remove = sets, removes
        self._save()

    # --- closing ----------------------------------------------------------------

    def finish(self) -> str:
        """Close the task: one commit of the four closing steps. Returns the commit id.

        The session's outcome is ``succeeded``, or ``partial`` while items of
        the plan are not checked (its Plan section shows which).

        Raises:
            ProtocolError: a step cannot be done (the message lists each, with
                the reason); nothing is committed and the task stays open.
        """
        if not self._state.problem.strip() or not self._state.solution.strip():
            missing = [what for what, text in (("task.problem(...)", self._state.problem),
                                              ("task.solution(...)", self._state.solution)) if not text.strip()]
            raise _protocol_error([(STEP_SESSION, f"nothing to record yet: call {' and '.join(missing)}")])
        return self._close("partial" if any(not item.done for item in self._state.todo) else "succeeded")

    def abandon(self, reason: str) -> str:
        """Close the task without finishing it; the session records why. Returns the commit id."""
        return self._close("abandoned", error=one_line(self._text(reason, "reason")) or "abandoned")

    def release(self) -> None:
        """Stop working on the task in this process, leaving it open (it can be resumed)."""
        if self._lock.is_locked:
            self._lock.release()

    def __enter__(self) -> Task:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            if self.closed:
                return
            if exc is None:
                self.finish()
                return
            try:
                self._close("failed", error=_summary(exc))
            except MemsiteError as failure:
                log.warning("the failed task could not be recorded (%s); its working memory stays in %s",
                            failure, self._store.config.notes_path(self.agent, "task_process.md"))
        finally:
            self.release()

    # --- internals --------------------------------------------------------------

    def _find(self, item: str) -> TodoItem:
        for todo in self._state.todo:
            if todo.text == item:
                return todo
        plan = "; ".join(t.text for t in self._state.todo) or "(empty)"
        raise InvalidInput(f"no TODO item {item!r}; the plan is: {plan}")

    def _text(self, value: object, what: str) -> str:
        text = inputs.text(value, what, max_bytes=MAX_TEXT, allow_empty=True).strip()
        inputs.no_secrets({what: text})
        return text

    def _save(self) -> None:
        if self.closed:
            raise ProtocolError("the task is closed; start a new one with store.task(...)", [])
        data = render_process(self._state, self.agent).encode("utf-8")
        with self._store.repo.thread_lock:
            self._store.repo.write_working_file(self._store.config.notes_path(self.agent, "task_process.md"), data)
        self._written = data

    def _close(self, outcome: str, error: str | None = None) -> str:
        if self.closed:
            raise ProtocolError(f"the task was already closed (session {self.session}, commit {self.commit}); "
                                "a task closes once: start a new one with store.task(...)", [])
        store, config = self._store, self._store.config
        try:
            tx, missing = store.write(lambda tx: self._stage_close(tx, outcome, error), message=self._subject(outcome))
        except InvalidInput as refused:  # the commit found one of the four files edited by someone else
            path = str(refused).split(":", 1)[0]
            step = {config.world_path: STEP_WORLD,
                    config.notes_path(self.agent, "agent_knowledge.md"): STEP_KNOWLEDGE,
                    config.notes_path(self.agent, "task_process.md"): STEP_CLEAR}.get(path, STEP_SESSION)
            raise _protocol_error([(step, str(refused))]) from None
        if missing:
            raise _protocol_error(missing)
        self.closed = True
        self.commit = tx.commit
        self.release()
        store.flush_activity()  # recall counts gathered during the task, in a commit of their own
        assert tx.commit is not None
        return tx.commit

    def _remember_learnings(self, tx: Transaction, session: str) -> None:
        """Each learning as a memory of the session (a near-duplicate merges into the one already known)."""
        for learning in self._state.learnings:
            content, category = learning_memory(learning)
            if not content:
                continue
            try:
                routed = self._store.config.route(category).name
            except InvalidInput:  # categories configured without it: the first one holds learnings
                routed = self._store.config.categories[0].name
            tx.remember(content, category=routed, source=session, tags=("learning",))

    def _subject(self, outcome: str) -> str:
        return f"Task {self.type}: {', '.join(self.keywords) or '(no keywords)'} ({outcome})"

    def _stage_close(self, tx: Transaction, outcome: str, error: str | None) -> list[tuple[str, str]]:
        """Stage the four closing steps in ``tx``; the steps that cannot be done, with why.

        When the list is not empty the caller raises and nothing is committed
        (raising here would also abort the transaction; returning lets every
        step be tried, so the error names all that are missing).
        """
        store, state, config = self._store, self._state, self._store.config
        finished = store.now()
        taken = {name[:-3] for name in tx.listing(config.sessions_dir) if name.endswith(".md")}
        name = sessions.session_name(state.started, state.type, state.keywords, taken)
        missing: list[tuple[str, str]] = []

        def step(label: str, action: Any) -> None:
            try:
                action()
            except (InvalidInput, FormatError) as exc:
                missing.append((label, str(exc)))

        record = sessions.SessionRecord(
            name=name, agent=state.agent, type=state.type, keywords=tuple(state.keywords), started=state.started,
            finished=finished, outcome=outcome, rounds=state.rounds, problem=state.problem, solution=state.solution,
            pattern=state.pattern, learnings=tuple(state.learnings), error=error,
            plan=tuple((item.text, item.done, item.note) for item in state.todo),
        )
        step(STEP_SESSION, lambda: tx.write_text(f"{config.sessions_dir}/{name}.md", sessions.render(record)))

        def knowledge() -> None:
            path = config.notes_path(state.agent, "agent_knowledge.md")
            text = tx.read_text(path)
            current = parse_knowledge(text, path, state.agent) if text else Knowledge(state.agent)
            patterns = [item.split(":", 1)[1].strip() for item in state.learnings
                        if item.lower().startswith("pattern:") and item.split(":", 1)[1].strip()]
            tx.write_text(path, render_knowledge(current.with_task(state.rounds, patterns, name), finished))

        step(STEP_KNOWLEDGE, knowledge)
        step(STEP_SESSION, lambda: self._remember_learnings(tx, name))
        activity = {f"agent.{state.agent}.last_task": f"{name}: {outcome} at {format_time(finished)}"}
        step(STEP_WORLD, lambda: world.merge_in(tx, {**state.world, **activity}, state.world_remove))
        process = config.notes_path(state.agent, "task_process.md")
        step(STEP_CLEAR, lambda: tx.write_text(process, render_process(None, state.agent), owned=self._written))
        if missing:
            tx.abort()
            return missing
        self.session = name
        tx.trailers += [("Session", name), ("Agent", state.agent), ("Outcome", outcome)]
        return missing


def learning_memory(learning: str) -> tuple[str, str]:
    """(text, category name) of the memory a task learning becomes: 'pattern: x' is the pattern x."""
    head, sep, rest = learning.partition(":")
    if sep and head.strip().lower() == "pattern" and rest.strip():
        return rest.strip(), "patterns"
    return learning.strip(), "general"


def _protocol_error(missing: list[tuple[str, str]]) -> ProtocolError:
    lines = "\n".join(f"- [ ] {label}: {why}" for label, why in missing)
    return ProtocolError(f"the task was not closed; nothing was committed. Missing steps:\n{lines}",
                         [label for label, _ in missing])


def _summary(exc: BaseException) -> str:
    text = one_line(f"{type(exc).__name__}: {exc}")[:300]
    try:
        inputs.no_secrets({"error": text})
    except SecretFound:
        return f"{type(exc).__name__} (message withheld: it looked like a credential)"
    return text


def _keyword(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 100 or "\n" in value:
        raise InvalidInput(f"keyword {value!r}: use a short phrase of up to 100 characters")
    return " ".join(value.split())


def _task_type(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or not sessions.session_name_part(value):
        raise InvalidInput(f"task type {value!r}: use a word like debug, fix, feature, refactor")
    return value.strip().lower()


def _item(value: object) -> str:
    text = one_line(inputs.text(value, "TODO item", max_bytes=1024))
    inputs.no_secrets({"TODO item": text})
    return text


def reworded(message: str, words: Iterable[tuple[str, str]]) -> str:
    """A protocol error's message with its Python calls (``task.problem(...)``) named as a surface names them.

    The command line and the MCP server each pass their table: options there, tool arguments here.
    """
    for api, surface in words:
        message = message.replace(api, surface)
    return message

