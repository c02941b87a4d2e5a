"""Stopping a process at a named point of its work: after the n-th call of a function, send it a signal."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any


def arm(owner: Any, name: str, after: int, signum: int, counts: Callable[[], bool] = lambda: True) -> None:
    """Send this process ``signum`` once ``owner.name`` has returned for the ``after``-th time.

    Only calls made while ``counts()`` is true are counted (a point inside one command's work, not the same
    function called while the store opens).
    """
    original: Callable[..., Any] = getattr(owner, name)
    calls = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if counts():
            calls[0] += 1
            if calls[0] == after:
                sys.stdout.flush()
                os.kill(os.getpid(), signum)
        return result

    setattr(owner, name, wrapped)
