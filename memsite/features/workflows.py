"""The GitHub Actions workflows of a memory repository (``memsite init`` writes them).

- ``memory-review.yml``: on a pull request, ``memsite check --base``, the
  ``memsite diff`` report as the job summary (and a PR comment where the token
  may write one), ``memsite build --strict``, the site uploaded for preview.
- ``pages.yml``: the site deployed to GitHub Pages from the default branch.
- ``integrate.yml``: the merge queue, ``memsite integrate`` on every push to
  an agent branch (one run at a time), then the site deployed again.

Each validates against GitHub's workflow schema and passes ``zizmor``:
read-only permissions unless a job needs more, no persisted credentials,
untrusted values reach shell steps through environment variables only,
actions pinned to commit hashes (the tag each was in the comment).
"""

from __future__ import annotations

INSTALL_FROM_PYPI = 'python -m pip install "${MEMSITE_PACKAGE}"'
PACKAGE_ENV = "MEMSITE_PACKAGE: ${{ vars.MEMSITE_PACKAGE || 'memsite' }}"

_SETUP = """\
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683  # v4.2.2
        with:
          fetch-depth: 0
          persist-credentials: false
      - uses: actions/setup-python@a26af69be951a213d495a4c3e4e4022e16d87065  # v5.6.0
        with:
          python-version: "3.12"
      - name: Install memsite
        run: {install}
"""


def memory_review(install: str = INSTALL_FROM_PYPI) -> str:
    env = f"\n    env:\n      {PACKAGE_ENV}" if "MEMSITE_PACKAGE" in install else ""
    return f"""\
# A memory pull request: check the invariants, report the changes, build the site.
name: Memory review

on:
  pull_request:

permissions:
  contents: read

jobs:
  review:
    runs-on: ubuntu-latest
    permissions:
      contents: read
      pull-requests: write{env}
    steps:
{_SETUP.format(install=install)}\
      - name: Check the memory invariants
        env:
          BASE_REF: ${{{{ github.base_ref }}}}
        run: memsite check --base "origin/$BASE_REF"
      - name: Report the memory changes
        env:
          BASE_REF: ${{{{ github.base_ref }}}}
        run: memsite diff "origin/$BASE_REF" HEAD | tee memory-changes.md >> "$GITHUB_STEP_SUMMARY"
      - name: Comment the report on the pull request
        # A fork's token cannot comment; the job summary has the report anyway.
        continue-on-error: true
        env:
          GH_TOKEN: ${{{{ github.token }}}}
          PR_NUMBER: ${{{{ github.event.pull_request.number }}}}
        run: gh pr comment "$PR_NUMBER" --body-file memory-changes.md
      - name: Build the site
        # with the engine mkdocs.yml names (plugins.memsite.engine: mkdocs, properdocs or zensical; the
        # last two are memsite's extras: install "memsite[zensical]")
        run: memsite build --strict
      - uses: actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02  # v4.6.2
        with:
          name: memory-site-preview
          path: site/
"""


def pages(install: str = INSTALL_FROM_PYPI) -> str:
    env = f"\n    env:\n      {PACKAGE_ENV}" if "MEMSITE_PACKAGE" in install else ""
    return f"""\
# The memory website on GitHub Pages, from the default branch.
name: Deploy the memory site

on:
  push:
    branches: [main]
  workflow_dispatch:

permissions:
  contents: read

concurrency:
  group: pages
  cancel-in-progress: false

jobs:
  build:
    runs-on: ubuntu-latest{env}
    steps:
{_SETUP.format(install=install)}\
      - name: Build the site
        # with the engine mkdocs.yml names (plugins.memsite.engine: mkdocs, properdocs or zensical; the
        # last two are memsite's extras: install "memsite[zensical]")
        run: memsite build --strict
      - uses: actions/upload-pages-artifact@56afc609e74202658d3ffba0e8f6dda462b719fa  # v3.0.1
        with:
          path: site/
  deploy:
    needs: build
    runs-on: ubuntu-latest
    permissions:
      pages: write
      id-token: write
    environment:
      name: github-pages
      url: ${{{{ steps.deployment.outputs.page_url }}}}
    steps:
      - id: deployment
        uses: actions/deploy-pages@d6db90164ac5ed86f2b6aed7e0febac5b3c0c03e  # v4.0.5
"""


def integrate(install: str = INSTALL_FROM_PYPI) -> str:
    """The merge queue: each push to an agent branch runs ``memsite integrate``, one run at a time."""
    env = f"\n    env:\n      {PACKAGE_ENV}" if "MEMSITE_PACKAGE" in install else ""
    return f"""\
# The merge queue: a push to an agent branch merges every published agent
# branch into main with memsite's merge drivers (memsite integrate), one run
# at a time. A branch with a conflict only a person can resolve is left out
# and named, and the job fails so that someone looks.
name: Integrate agent memory

on:
  push:
    branches: ["agent/**"]
  workflow_dispatch:

permissions:
  contents: read

concurrency:
  group: memsite-integrate
  cancel-in-progress: false

jobs:
  integrate:
    runs-on: ubuntu-latest
    permissions:
      contents: write
      actions: write{env}
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683  # v4.2.2
        with:
          ref: main
          fetch-depth: 0
          # memsite integrate pushes main with this job's token.
          persist-credentials: true
      - uses: actions/setup-python@a26af69be951a213d495a4c3e4e4022e16d87065  # v5.6.0
        with:
          python-version: "3.12"
      - name: Install memsite
        run: {install}
      - name: Merge the published agent branches into main
        id: integrate
        run: |
          status=0
          memsite --agent integrator integrate --branch main --json > integrate.json || status=$?
          cat integrate.json
          echo "commit=$(jq -r '.commit // empty' integrate.json)" >> "$GITHUB_OUTPUT"
          exit "$status"
      - name: Deploy the site of the new main
        # A push made with this job's token starts no workflow; a dispatch does.
        if: ${{{{ always() && steps.integrate.outputs.commit != '' }}}}
        env:
          GH_TOKEN: ${{{{ github.token }}}}
        run: gh workflow run pages.yml --ref main
"""


def tests() -> str:
    """memsite's own tests (the product repository only)."""
    return """\
# memsite's test suite: the README's test command, as .ci/run runs it.
name: Tests

on:
  push:
  pull_request:

permissions:
  contents: read

jobs:
  tests:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683  # v4.2.2
        with:
          persist-credentials: false
      - uses: actions/setup-python@a26af69be951a213d495a4c3e4e4022e16d87065  # v5.6.0
        with:
          python-version: "3.12"
      - name: Run the tests
        run: .ci/run
"""


def for_memory_repository() -> dict[str, str]:
    """What ``memsite init`` writes: path -> text."""
    return {".github/workflows/memory-review.yml": memory_review(), ".github/workflows/pages.yml": pages(),
            ".github/workflows/integrate.yml": integrate()}


def for_product_repository() -> dict[str, str]:
    """memsite's own ``.github/workflows`` (its root is an example memory site, built from the checkout)."""
    local = "python -m pip install -e ."
    return {".github/workflows/tests.yml": tests(), ".github/workflows/memory-review.yml": memory_review(local),
            ".github/workflows/pages.yml": pages(local)}
