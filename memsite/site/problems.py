"""The problems page: the files the build left out, what is wrong with each, and the fix."""

from __future__ import annotations

import json

from .safe import text
from .snapshot import Snapshot

SRC = "problems.md"


def problem_pages(snap: Snapshot) -> dict[str, str]:
    """``{"problems.md": page}`` naming every file the snapshot left out; empty when there is none."""
    if not snap.problems:
        return {}
    items = "".join(f"<li><code>{text(line)}</code></li>" for line in snap.problems)
    return {SRC: "\n".join([
        "---", f"title: {json.dumps('Problems')}", "---", "",
        "# Problems", "",
        f"{len(snap.problems)} file(s) could not be read and are left out of this site; everything else is here. "
        "`memsite check` lists the same problems; `memsite build --strict` fails while any is left.", "",
        f"<ul>{items}</ul>", "",
    ])}
