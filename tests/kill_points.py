"""Stopping a process at a named point of its work: just after (or just before) the n-th call of a function,
send it a signal."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any


def arm(owner: Any, name: str, after: int = 1, signum: int = signal.SIGKILL,
        counts: Callable[[], bool] = lambda: True, *, before: bool = False,
        only: Callable[[tuple[Any, ...]], bool] = lambda args: True) -> None:
    """Send this process ``signum`` once ``owner.name`` has returned for the ``after``-th time (``before``: as
    that call begins, before it does anything).

    Only calls made while ``counts()`` is true are counted (a point inside one command's work, not the same
    function called while the store opens), and only those whose positional arguments ``only`` accepts (one
    ``os.replace`` among all: the one that puts the index in place, say).
    """
    original: Callable[..., Any] = getattr(owner, name)
    calls = [0]

    def count(args: tuple[Any, ...]) -> None:
        if counts() and only(args):
            calls[0] += 1
            if calls[0] == after:
                sys.stdout.flush()  # (what the process printed is what the parent reads as acknowledged)
                os.kill(os.getpid(), signum)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before:
            count(args)
        result = original(*args, **kwargs)
        if not before:
            count(args)
        return result

    setattr(owner, name, wrapped)


def target(args: tuple[Any, ...]) -> str:
    """The path a call such as ``os.replace(source, target)`` writes: its second argument."""
    return str(args[1]) if len(args) > 1 else ""
