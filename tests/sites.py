"""Memory repositories with built sites, shared by the site and browser tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memsite import MemoryStore
from memsite.foundation.fileformat import format_memory

ROOT = Path(__file__).resolve().parent.parent

HOSTILE = [
    # (abstract, content)
    ("<script>window.__pwned='abstract'</script>Deploy notes",
     "<script>window.__pwned='body'</script>\n\nDeploy with care."),
    ("Image <img src=x onerror=\"window.__pwned='img'\">",
     '<img src="http://evil.example/x.png" onerror="window.__pwned=\'onerror\'">\n\n'
     '<iframe src="http://evil.example/"></iframe>'),
    ("A javascript link", "[click me](javascript:window.__pwned='js')\n\n<a href=\"javascript:alert(1)\">raw</a>"),
    ("Attribute lists", "Paragraph with a handler\n{: onclick=\"window.__pwned='attr'\" }\n\n"
                        "# Heading {: onmouseover=\"window.__pwned='h'\" }"),
    ("<b onmouseover=\"window.__pwned='title'\">Bold title</b>",
     "<style>body{background:url(http://evil.example/bg.png)}</style>\n"
     "<link rel=stylesheet href=http://evil.example/x.css>Styled"),
]


def env(home: Path) -> dict[str, str]:
    """The environment of a memsite subprocess: its own HOME, no system git config."""
    return {**os.environ, "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Test Person",
            "GIT_AUTHOR_EMAIL": "person@example.com", "GIT_COMMITTER_NAME": "Test Person",
            "GIT_COMMITTER_EMAIL": "person@example.com"}


def memsite(*args: str, home: Path, cwd: Path = ROOT, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "memsite", *args], cwd=cwd, env=env(home),
                            capture_output=True, text=True, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"memsite {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def hostile_repository(path: Path, home: Path) -> list[str]:
    """A repository whose memories attack the site; returns their ids."""
    with MemoryStore.init(path, agent="mallory") as store:
        ids = [store.remember(content, category="general", abstract=abstract,
                              overview="<svg onload=\"window.__pwned='overview'\"></svg>", tags=("attack",),
                              dedupe=False).id
               for abstract, content in HOSTILE]
        # Tags and names the API refuses can still arrive in a hand-made commit.
        memory = store.remember("Tagged by hand", category="general", abstract="Hand-made tags")
        hand = memory.replace(tags=("<script>window.__pwned='tag'</script>", "\"><img src=x onerror=alert(1)>"))
        memory.path.write_text(format_memory(hand))
        ids.append(memory.id)
    subprocess.run(["git", "commit", "-qam", "Hand-edited tags"], cwd=path, env=env(home), check=True)
    memsite("-C", str(path), "build", home=home)
    return ids
