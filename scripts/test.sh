#!/usr/bin/env bash
# Set up a virtualenv (if needed) and run lint, the type checker and the whole test suite,
# slow tests included, on two pytest-xdist workers (one per core here), each test file on one
# worker so a module's fixtures (a scratch history, a nightly, the demo) are built once.
# pytest exits 5 when it collects no tests; `set -e` turns that into a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
.venv/bin/ruff check .
.venv/bin/mypy  # the files and the settings: [tool.mypy] in pyproject.toml
# --no-loadscope-reorder: keep tests/conftest.py's order (the slowest files first); xdist
# otherwise sends the files with the most tests first, and the two nightlies started last
.venv/bin/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder "$@"
