"""``memsite build`` / ``serve`` / ``project``: the site built with the repository's own settings.

``memsite build`` builds with one of three engines, the same ``mkdocs.yml``
for each: MkDocs (the default) and ProperDocs run memsite's plugin; Zensical
runs no plugin, so memsite writes its pages out first (``generate``) and
finishes the site after it. Every engine writes into a fresh folder that
replaces the site only once whole (``output``).
"""

from __future__ import annotations

import errno
import importlib.metadata
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..features import history
from ..features.site_guard import refuse_unsafe_config
from ..foundation.config import ENGINES, PLUGIN, Config, load_config, plugin_options, read_mkdocs_yml
from ..foundation.errors import DiskFull, MemsiteError
from ..storage.activity import pending_counts
from . import output
from .generate import build_time
from .pages import projection
from .snapshot import load

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig

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


def _mkdocs_config(root: Path, **overrides: Any) -> MkDocsConfig:
    from mkdocs.config import load_config as load_mkdocs
    from mkdocs.exceptions import ConfigurationError

    path = _checked(root)
    try:
        return load_mkdocs(config_file=str(path), **{k: v for k, v in overrides.items() if v is not None})
    except ConfigurationError as exc:
        raise MemsiteError(f"{path}: {exc}") from None


ZENSICAL_MIN = (0, 0, 73)  # the Zensical memsite was tried with: Material's theme, custom_dir, page templates
ZENSICAL_BELOW = (0, 1, 0)  # 0.1 renders with zensical-ui, which memsite has not been tried with


def build(root: Path, site_dir: Path | None = None, *, strict: bool = False, engine: str | None = None,
          clean: bool = False, announce: Callable[[str], None] | None = None) -> Path:
    """Build the site of the repository at ``root``; returns the folder it was written to.

    The site is written into a fresh folder beside it and swapped in once
    whole: a build that fails, or is interrupted or killed, leaves the
    previous site as it was (the next build says so through ``announce``).
    The memory pages that did not change since the previous site are kept
    from it, unless ``clean``.

    Args:
        root: the memory repository (holding mkdocs.yml).
        site_dir: where the site goes (default: mkdocs.yml's site_dir, site/).
        strict: fail on warnings too.
        engine: mkdocs, properdocs or zensical (default: the ``engine`` setting, mkdocs).
        clean: write every memory page again (``--clean``).
        announce: told each note about the build (an interrupted build before it, a site of another version).

    Returns:
        The site folder.

    Raises:
        MemsiteError: the settings are invalid, the engine is not installed, a
            file breaks its format, or the site folder cannot be replaced
            (the message names the file, the field and the fix).
    """
    from mkdocs.exceptions import Abort, PluginError

    config = _mkdocs_config(root, site_dir=str(site_dir) if site_dir else None, strict=strict)
    settings = load_config(root)
    engine = engine or settings.engine
    check_engine(engine)
    _writable(Path(config.site_dir))
    commit, erased = output.rewritten(root, Path(config.site_dir))
    job = output.Build(Path(config.site_dir), engine, reuse=not clean, commit=commit, erased=erased)
    logger = logging.getLogger("mkdocs")
    logger.setLevel(logging.WARNING)
    shown = logging.StreamHandler()  # every warning on stderr, --strict or not (which adds a counting handler)
    shown.setFormatter(logging.Formatter("warning: %(message)s"))
    logger.addHandler(shown)
    try:
        try:
            folder = job.begin()
            for note in job.notes:
                (announce or logger.warning)(note)
            if engine == "mkdocs":
                from mkdocs.commands.build import build as mkdocs_build

                from .plugin import files_without_memories

                config.site_dir = str(folder)
                with files_without_memories():
                    mkdocs_build(config)
            elif engine == "properdocs":
                _properdocs(root, folder, strict)
            else:
                _zensical(root, config, settings, folder, strict)
        except BaseException as exc:
            job.abort(interrupted=isinstance(exc, KeyboardInterrupt))
            raise
        job.finish()
    except PluginError as exc:
        raise MemsiteError(str(exc)) from None
    except Abort as exc:
        raise MemsiteError(f"the site build stopped: {exc}") from None
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise MemsiteError(_cannot_write(config.site_dir, exc.filename or config.site_dir)) from None
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise DiskFull(f"disk full at {job.folder}: the site was not built ({job.site_dir} is as it was); free "
                       "some space, or build it on another disk with --site-dir") from None
    finally:
        logger.removeHandler(shown)
    return job.site_dir


def check_engine(engine: str) -> None:
    """Raise unless ``engine`` is installed in a version memsite builds with.

    Raises:
        MemsiteError: one line naming the engine and what to install.
    """
    if engine not in ENGINES:
        raise MemsiteError(f"engine {engine!r}: expected one of {', '.join(ENGINES)}")
    try:
        found = importlib.metadata.version(engine)  # each engine's distribution is named as the engine
    except importlib.metadata.PackageNotFoundError:
        raise MemsiteError(f"the {engine} engine is not installed: pip install 'memsite[{engine}]' "
                           f"(or choose another with --engine)") from None
    if engine == "zensical":
        numbers = tuple(int(part) if part.isdigit() else 0 for part in found.split(".")[:3])
        if not ZENSICAL_MIN <= numbers < ZENSICAL_BELOW:
            raise MemsiteError(f"zensical {found} is installed; memsite builds with zensical "
                               f"{'.'.join(map(str, ZENSICAL_MIN))} up to 0.1 (Material's theme, theme.custom_dir "
                               "and page templates): pip install 'memsite[zensical]'")


def _run(command: list[str], cwd: Path, engine: str) -> None:
    """Run an engine's command line; its warnings go to stderr, its failure becomes one message."""
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    for line in result.stderr.splitlines():
        if "WARNING" in line or "Warning" in line:
            print(line, file=sys.stderr)
    if result.returncode != 0:
        lines = [line for line in (result.stderr or result.stdout).splitlines() if line.strip()]
        raise MemsiteError(f"{engine} could not build the site: " + " / ".join(lines[-5:]))


def _folders(nav: Any, pages: dict[str, str]) -> Any:
    """A nav with each generated page named where Zensical finds it (``generate.as_folder``)."""
    from .generate import as_folder

    if isinstance(nav, list):
        return [_folders(entry, pages) for entry in nav]
    if isinstance(nav, dict):
        return {key: _folders(value, pages) for key, value in nav.items()}
    return as_folder(nav) if isinstance(nav, str) and nav in pages else nav


def _properdocs(root: Path, folder: Path, strict: bool) -> None:
    """ProperDocs (a maintained MkDocs 1.6) runs memsite's plugin as MkDocs does."""
    _run([sys.executable, "-m", "properdocs", "build", "-q", "-f", str(root / "mkdocs.yml"), "-d", str(folder),
          *(["--strict"] if strict else [])], root, "properdocs")


def _zensical(root: Path, config: Any, settings: Config, folder: Path, strict: bool) -> None:
    """Zensical runs no plugin: memsite writes the pages it renders, then finishes the site it wrote."""
    from .generate import CSS_URI, THEME, fill_pages, finish, generate, write_docs
    from .plugin import default_nav

    docs_dir = Path(config.docs_dir)
    generated = generate(root, docs_dir, settings, config.site_name, config.repo_url)
    for problem in generated.snap.problems:
        logging.getLogger("mkdocs").warning("skipped %s", problem)
    if strict and generated.snap.problems:
        raise MemsiteError(f"{len(generated.snap.problems)} file(s) left out of the site (--strict)")
    # Zensical writes only inside the folder of its mkdocs.yml: one inside the build's own (removed with it if
    # the build is killed), its output then moved up into the build's folder.
    work = folder / ".zensical"
    work.mkdir()
    try:
        write_docs(generated, docs_dir, root, work / "docs")
        # memsite's templates, and its search box in place of Zensical's (which reads one index of the whole site)
        shutil.copytree(THEME, work / "overrides", ignore=shutil.ignore_patterns("zensical"))
        shutil.copytree(THEME / "zensical", work / "overrides", dirs_exist_ok=True)
        data = read_mkdocs_yml(root / "mkdocs.yml")
        nav = data.get("nav") or default_nav(settings) + ([{"Problems": "problems.md"}] if "problems.md" in
                                                          generated.pages else [])
        theme = data.get("theme") or {"name": "material"}
        theme = {"name": theme} if isinstance(theme, str) else dict(theme)
        custom = theme.get("custom_dir")
        if custom:  # the repository's own overrides first, memsite's template beside them
            shutil.copytree(root / custom, work / "overrides", dirs_exist_ok=True)
        theme.update(custom_dir="overrides", font=False, variant="classic")  # Material's own look
        data.update(docs_dir="docs", site_dir="site", theme=theme,
                    extra_css=[*(data.get("extra_css") or []), CSS_URI],
                    plugins=["search"], nav=_folders(nav, generated.pages))
        for key in ("hooks", "INHERIT"):
            data.pop(key, None)
        (work / "mkdocs.yml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        zensical = shutil.which("zensical", path=str(Path(sys.executable).parent)) or shutil.which("zensical")
        if zensical is None:
            raise MemsiteError("the zensical engine is not installed: pip install 'memsite[zensical]'")
        _run([zensical, "build", "-f", str(work / "mkdocs.yml"), *(["--strict"] if strict else [])], work, "zensical")
        (work / "site" / "search.json").unlink(missing_ok=True)  # Zensical's own index: memsite's box asks Pagefind
        for entry in (work / "site").iterdir():
            entry.rename(folder / entry.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the pages' Markdown: a few MB, memory pages are not in it
    fill_pages(folder, generated)
    finish(folder, generated, sitemap=bool(config.site_url), log=lambda line: None)


def _writable(site_dir: Path) -> None:
    """Refuse, before anything is built, a site this user cannot write: a build is made beside the site
    folder and swapped in (see output.py), so the folder holding it must be writable."""
    folder = site_dir.parent
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
