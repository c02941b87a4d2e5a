"""``memsite build`` / ``serve`` / ``project``: MkDocs run with the repository's own settings."""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from .. import history
from ..config import PLUGIN, load_config, plugin_options, read_mkdocs_yml
from ..errors import DiskFull, MemsiteError
from ..store.activity import pending_counts
from .guard import refuse_unsafe_config
from .plugin import build_time
from .pages import projection
from .snapshot import load


SERVING = ".memsite/serving.json"  # where a running 'memsite serve' says what it serves (for 'show --url')


def _settings(root: Path) -> Path:
    path = root / "mkdocs.yml"
    if not path.is_file():
        raise MemsiteError(f"{root}: has no mkdocs.yml; run 'memsite init' there, or 'memsite demo' for an example")
    return path


def _checked(root: Path) -> Path:
    """``root/mkdocs.yml``, checked before MkDocs reads it: no code to run, memsite's settings valid, its plugin there.

    Raises:
        MemsiteError: one line per problem.
    """
    from mkdocs.plugins import get_plugins

    path = _settings(root)
    refuse_unsafe_config(path)  # MkDocs' YAML loader would run a !!python/object tag
    load_config(root)  # memsite's settings, one line per problem naming its key
    if plugin_options(read_mkdocs_yml(path).get("plugins")) is not None and PLUGIN not in get_plugins():
        raise MemsiteError(f"{path}: names the {PLUGIN} plugin, which MkDocs finds only once memsite is installed "
                           "with it: run 'pip install -e .' in memsite's checkout again (or pip install memsite)")
    return path


def _mkdocs_config(root: Path, **overrides: object):  # -> MkDocsConfig
    from mkdocs.config import load_config as load_mkdocs
    from mkdocs.exceptions import ConfigurationError

    path = _checked(root)
    try:
        return load_mkdocs(config_file=str(path), **{k: v for k, v in overrides.items() if v is not None})
    except ConfigurationError as exc:
        raise MemsiteError(f"{path}: {exc}") from None


def build(root: Path, site_dir: Path | None = None, *, strict: bool = False) -> Path:
    """Build the site of the repository at ``root``; returns the folder it was written to.

    Raises:
        MemsiteError: the settings are invalid, or a file breaks its format
            (the message names the file, the field and the fix).
    """
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.exceptions import Abort, PluginError

    config = _mkdocs_config(root, site_dir=str(site_dir) if site_dir else None, strict=strict)
    _writable(Path(config.site_dir))
    logger = logging.getLogger("mkdocs")
    logger.setLevel(logging.WARNING)
    shown = logging.StreamHandler()  # every warning on stderr, --strict or not (which adds a counting handler)
    shown.setFormatter(logging.Formatter("warning: %(message)s"))
    logger.addHandler(shown)
    try:
        mkdocs_build(config)
    except PluginError as exc:
        raise MemsiteError(str(exc)) from None
    except Abort as exc:
        raise MemsiteError(f"the site build stopped: {exc}") from None
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise MemsiteError(_cannot_write(config.site_dir, exc.filename or config.site_dir)) from None
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise DiskFull(f"disk full at {config.site_dir}: the site was not built; free some space, or build it "
                       "on another disk with --site-dir") from None
    finally:
        logger.removeHandler(shown)
    return Path(config.site_dir)


def _writable(site_dir: Path) -> None:
    """Refuse, before anything is built, a site folder (or the folder it would be made in) this user cannot write."""
    folder = site_dir
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise MemsiteError(_cannot_write(site_dir, folder))


def _cannot_write(site_dir: object, where: object) -> str:
    return (f"{site_dir}: cannot write the site there ({where} is read-only for this user); build it elsewhere "
            "with --site-dir DIR")


def serve(root: Path, host: str = "127.0.0.1", port: int = 8000, *, open_in_browser: bool = False,
          announce: Callable[[str], None] | None = None) -> None:
    """Serve the site of ``root`` at http://HOST:PORT/ with live reload until interrupted.

    Raises:
        MemsiteError: the port is taken or the address cannot be served (one line naming it and the flag).
    """
    from mkdocs.commands.serve import serve as mkdocs_serve

    path = _checked(root)
    check_port(host, port)
    stop = threading.Event()
    message = f"Serving {root} at {url(host, port)} (Ctrl-C stops)"
    record = root / SERVING

    def ready() -> None:  # once the port answers: MkDocs builds the site before it listens
        try:  # what 'memsite show --url' links to while no site_url is set
            record.parent.mkdir(exist_ok=True)
            record.write_text(json.dumps({"pid": os.getpid(), "url": url(host, port)}))
        except OSError:
            pass  # a read-only checkout: served all the same
        if announce:
            announce(message)

    threading.Thread(target=_when_listening, args=(host, port, ready, stop), name="memsite-serve-ready",
                     daemon=True).start()
    try:
        mkdocs_serve(config_file=str(path), dev_addr=f"{host}:{port}", open_in_browser=open_in_browser)
    except OSError as exc:  # taken between the check and the bind
        raise MemsiteError(_address_error(host, port, exc)) from None
    finally:
        stop.set()
        if serving(root) == url(host, port):
            record.unlink(missing_ok=True)


def serving(root: Path) -> str | None:
    """The address a running ``memsite serve`` of ``root`` serves the site at, if one is running."""
    try:
        found = json.loads((root / SERVING).read_text())
        os.kill(int(found["pid"]), 0)
    except (OSError, ValueError, TypeError, KeyError):
        return None  # none, or one that was killed
    return str(found["url"])


def _when_listening(host: str, port: int, ready: Callable[[], None], stop: threading.Event) -> None:
    """Call ``ready()`` as soon as HOST:PORT accepts a connection (an address that serves every interface is
    asked on the loopback one), unless the server stopped first."""
    target = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    while not stop.is_set():
        try:
            socket.create_connection((target, port), timeout=0.5).close()
        except OSError:
            stop.wait(0.05)
            continue
        ready()
        return


def url(host: str, port: int) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


def check_port(host: str, port: int) -> None:
    """Bind HOST:PORT once as the server will, so a taken port is one line and not MkDocs' traceback."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise MemsiteError(f"cannot serve on {host}: {exc.strerror}; give another --host") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
        try:
            probe.bind(address)
        except OSError as exc:
            raise MemsiteError(_address_error(host, port, exc)) from None


def _address_error(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is already in use; choose another with --port (e.g. --port {port + 1})"
    if exc.errno == errno.EACCES:
        return f"port {port} on {host} needs privileges; choose a port above 1023 with --port"
    return f"cannot serve on {host}:{port} ({exc.strerror}); choose another --host or --port"


def project(root: Path, out: Path, *, include_l1: bool = True, by_category: bool = False) -> list[Path]:
    """Write the Markdown projection (by-category/, summaries/) of ``root`` into ``out``; returns the files."""
    config = load_config(root)
    snap = load(root / config.content_dir, config, build_time(), pending_counts(root))
    written = []
    commits = history.read(root, "HEAD", config.content_dir)
    for rel, text in projection(snap, include_l1=include_l1, commits=commits).items():
        if rel.startswith("by-category/") and not by_category:
            continue
        path = out / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise MemsiteError(f"{path}: cannot write it ({exc.strerror}); choose another --out") from None
        written.append(path)
    return written
