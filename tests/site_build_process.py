"""``memsite build`` stopped at a named point of the build, for the atomic-build tests and benchmark.

    python -m tests.site_build_process REPO POINT kill|int [memsite build options...]

``kill`` sends the process SIGKILL at that point (as ``kill -9`` would), ``int``
SIGINT (as Ctrl-C does). The points, in the order a build passes them:
"""

from __future__ import annotations

import signal
import sys
from typing import Any

import mkdocs.commands.build as mkdocs_build

from memsite.cli import main
from memsite.site import generate, memory_pages, output, plugin, search
from tests import kill_points

KILL_POINTS: dict[str, tuple[Any, str, int]] = {
    # point: (owner, attribute, the call after which the signal is sent)
    "folder-made": (output.Build, "begin", 1),
    "pages-generated": (plugin, "generate", 1),
    "page-written": (mkdocs_build, "_build_page", 3),
    "theme-written": (mkdocs_build, "_build_theme_template", 1),
    "shell-read": (memory_pages.Shell, "__init__", 1),
    "memory-pages-kept": (memory_pages, "reuse", 1),  # the unchanged pages linked from the site served
    "memory-page-written": (memory_pages.Shell, "fill", 2),  # some memory pages written, not all
    "memory-pages-written": (memory_pages, "write_all", 1),
    "redirects-written": (generate, "redirects", 1),
    "search-indexed": (search, "index", 1),
    "swapped": (output, "_exchange", 1),  # the new site in place, its record not yet removed
}


def arm(point: str, signum: int) -> None:
    kill_points.arm(*KILL_POINTS[point], signum)


if __name__ == "__main__":
    # Ctrl-C reaches the build as at a terminal, whatever this process inherited: a process started from
    # one that ignores SIGINT (a job in the background) ignores it too, and the build would never see it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    repo, point, how, *rest = sys.argv[1:]
    arm(point, signal.SIGKILL if how == "kill" else signal.SIGINT)
    main(["-C", repo, "build", *rest])
