"""Failures of the machine under memsite, as memsite errors.

The layers below the API raise what the operating system and SQLite report
(``OSError``, ``sqlite3.Error``) and git's own complaints; an API caller gets
one exception tree instead. :func:`boundary` makes a class one side of that
line: every public method, property and constructor of the classes users
call (``MemoryStore``, ``World``, ``Task`` and the ``Transaction`` a store
hands out) is :func:`translated`, so a method added later is inside it
without anyone remembering a decorator (``tests/test_api_surface.py`` walks
``memsite.__all__`` and fails on one outside). A
full disk becomes :class:`DiskFull` ("disk full at <path>; nothing was
written") and the temporary files this process left on the way are removed;
another I/O error becomes a :class:`RepositoryError` naming the file; a SQLite
failure a :class:`CacheError` naming the rebuildable cache.

Disk space is checked as well as ``errno``: SQLite reports a full disk as
"disk I/O error" and git as "could not write config.lock".
"""

from __future__ import annotations

import functools
import inspect
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..foundation.errors import CacheError, DiskFull, MemsiteError, RepositoryError
from ..git import PACK_TMP_PREFIX
from .sqlite import intact
from .state import disk_full, out_of_room

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)

# The dunder methods that are entry points: a ``with`` block and the constructor.
ENTRY_DUNDERS = frozenset({"__init__", "__enter__", "__exit__"})


def translated(func: F) -> F:
    """``func`` raising only ``MemsiteError`` for OS and SQLite failures (see the module).

    A generator function is translated while it is iterated, where its work is done.
    """
    if getattr(func, "__translated__", False):
        return func
    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def generator(*args: Any, **kwargs: Any) -> Any:
            try:
                return (yield from func(*args, **kwargs))
            except DiskFull:
                raise
            except (OSError, sqlite3.Error, RepositoryError) as exc:
                _reraise(exc, args, kwargs)

        generator.__translated__ = True  # type: ignore[attr-defined]  # a mark on the function
        return generator  # type: ignore[return-value]  # wraps F, same signature

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except DiskFull:
            raise
        except (OSError, sqlite3.Error, RepositoryError) as exc:
            _reraise(exc, args, kwargs)

    wrapper.__translated__ = True  # type: ignore[attr-defined]  # a mark on the function
    return wrapper  # type: ignore[return-value]  # wraps F, same signature


def _reraise(exc: BaseException, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    error = translate(exc, _root_of(args, kwargs))
    if error is exc:
        raise exc
    raise error from exc


def boundary(cls: C) -> C:
    """``cls`` with every public method, property, class and static method, and its entry dunders, translated."""
    for name, attr in list(vars(cls).items()):
        if name.startswith("_") and name not in ENTRY_DUNDERS:
            continue
        if isinstance(attr, property):
            wrapped: Any = property(attr.fget and translated(attr.fget), attr.fset and translated(attr.fset),
                                    attr.fdel and translated(attr.fdel), attr.__doc__)
        elif isinstance(attr, classmethod):
            wrapped = classmethod(translated(attr.__func__))
        elif isinstance(attr, staticmethod):
            wrapped = staticmethod(translated(attr.__func__))
        elif inspect.isfunction(attr):
            wrapped = translated(attr)
        else:
            continue
        setattr(cls, name, wrapped)
    return cls


def inside(attr: Any) -> bool:
    """Whether a class attribute (a method, property, class or static method) is translated."""
    if isinstance(attr, property):
        return all(getattr(f, "__translated__", False) for f in (attr.fget, attr.fset, attr.fdel) if f is not None)
    return bool(getattr(getattr(attr, "__func__", attr), "__translated__", False))


def translate(exc: BaseException, root: Path | None) -> BaseException:
    """The memsite error ``exc`` stands for (``exc`` itself when it already is the right one)."""
    where = root or Path.cwd()
    if out_of_room(exc, where):
        filename = getattr(exc, "filename", None)
        sweep_temp_files(where)
        return disk_full(filename or where)
    if isinstance(exc, MemsiteError):
        return exc
    if isinstance(exc, sqlite3.Error):
        return CacheError(_sqlite_message(exc, where / ".memsite"))
    assert isinstance(exc, OSError)
    sweep_temp_files(where)
    return RepositoryError(f"{exc.filename or where}: {exc.strerror or exc}; nothing was written")


def sweep_temp_files(root: Path) -> None:
    """Remove the temporary files this process's writes left in ``root`` (named with its pid).

    Git object files (``tmp_obj_<pid>_*``), pack files (``.memsite-tmp-<pid>-*``)
    and working-tree files (``.<name>.<pid>.memsite-tmp``): memsite's own,
    named so no other program's file can match.
    """
    pid = str(os.getpid())
    git_dir = root / ".git"
    objects = git_dir / "objects" if git_dir.is_dir() else None
    candidates: list[Path] = []
    if objects is not None:
        candidates += objects.glob(f"??/tmp_obj_{pid}_*")
        candidates += objects.glob(f"pack/{PACK_TMP_PREFIX}{pid}-*")
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        candidates += [Path(folder) / f for f in files if f.startswith(".") and f.endswith(f".{pid}.memsite-tmp")]
    for path in candidates:
        try:
            path.unlink()
        except OSError:
            continue


def _sqlite_message(exc: sqlite3.Error, state_dir: Path) -> str:
    """Which of memsite's SQLite files failed, and the command that repairs it.

    A damaged file is normally set aside and rebuilt on the spot (``Storage.heal``);
    this is what is left when even that failed.
    """
    for path in sorted(state_dir.glob("*.sqlite3")):
        if not intact(path):
            return f"{path}: damaged ({exc}); 'memsite doctor --fix' sets it aside and rebuilds it"
    return f"{state_dir}: SQLite failed ({exc}); 'memsite doctor --fix' rebuilds memsite's files there"


def _root_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Path | None:
    """The repository a call works on: its object's ``root`` (or its store's), or the path it was given
    (a constructor)."""
    owner = args[0] if args else None
    root = getattr(owner, "root", None)  # (None while the constructor has not found it)
    if root is None:  # a transaction: its store's
        root = getattr(getattr(owner, "store", None), "root", None)
    if isinstance(root, Path):
        return root
    path = kwargs.get("path", args[1] if len(args) > 1 else None)
    if isinstance(path, (str, os.PathLike)):
        return Path(path).absolute()
    return None
