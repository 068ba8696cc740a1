"""The docs' commands, read by tests/doc_commands.py: the reader itself, and every documented
command and option accepted by the command line (in process, fast). Running them is
tests/e2e/test_documented_commands.py's job (slow)."""

from __future__ import annotations

import pytest
from doc_commands import DocCommand, expand, fenced_commands, table_commands

from spyre_regress.cli import build_parser

# A value of the right type for each placeholder the docs use, for parsing only.
DUMMIES = {"N": "2", "Q": "0.05", "ID": "1", "STATUS": "fixed", "SHAPE": "127",
           "REGEX=FRACTION": "compile=0.1", "FILE.py": "repro.py"}


def test_the_reader_joins_synopses_and_skips_output(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "Run `spyre-regress demo` now.\n\n"
        "| `spyre-regress alerts --state DIR [--set ID STATUS]` | triage |\n\n"
        "```sh\n.venv/bin/pip install -e . && .venv/bin/spyre-regress demo --out x\n```\n")
    (tmp_path / "docs" / "page.md").write_text(
        "```\nspyre-regress detect --results DIR [--repo PATH]\n"
        "                     [--json FILE]   # a comment\n"
        "spyre-regress alerts --state DIR \\\n  --set ID fixed\n```\n\n"
        "```\n$ python scripts/x.py\nspyre-regress detect (fresh process): 13.9 s\n```\n"
        "````md\n```\nspyre-regress stages --repo PATH\n```\n````\n")
    (tmp_path / "docs" / "how-to").mkdir()  # pages in subfolders are read too
    (tmp_path / "docs" / "how-to" / "task.md").write_text("```sh\nspyre-regress knobs\n```\n")
    found = [(c.page, c.line, c.text) for c in fenced_commands(tmp_path)]
    assert found == [
        ("README.md", 6, "spyre-regress demo --out x"),
        ("docs/how-to/task.md", 2, "spyre-regress knobs"),
        ("docs/page.md", 2, "spyre-regress detect --results DIR [--repo PATH] [--json FILE] "
                            "# a comment"),
        ("docs/page.md", 4, "spyre-regress alerts --state DIR --set ID fixed"),
        ("docs/page.md", 14, "spyre-regress stages --repo PATH"),
    ]
    assert [c.text for c in table_commands(tmp_path)] == [
        "spyre-regress alerts --state DIR [--set ID STATUS]"]


def test_expand_substitutes_placeholders_and_keeps_only_asked_options():
    command = DocCommand("p", 1, "spyre-regress detect --results .asv/results [--repo .] "
                                 "[--json FILE] [--threshold REGEX=FRACTION ...] "
                                 "[--metric a|b|c]")
    assert expand(command, {}) == ["detect", "--results", ".asv/results"]
    assert expand(command, {"--repo": (), "--json": "/x.json", "--metric": ()}) == [
        "detect", "--results", ".asv/results", "--repo", ".", "--json", "/x.json",
        "--metric", "a"]
    assert expand(command, {}, include_all=True, default=str.lower) == [
        "detect", "--results", ".asv/results", "--repo", ".", "--json", "file",
        "--threshold", "regex=fraction", "--metric", "a"]
    with pytest.raises(KeyError, match="no value for FILE of --json"):
        expand(command, {"--json": ()})


def test_the_docs_show_every_subcommand():
    documented = {c.subcommand for c in fenced_commands()}
    assert {"demo", "nightly", "detect", "bisect", "stages", "knobs", "minimize", "report",
            "alerts"} <= documented


@pytest.mark.parametrize("command", fenced_commands() + table_commands(), ids=lambda c: c.id)
def test_every_documented_option_is_accepted(command):
    """With every optional group included: an option the docs show and the command line
    lacks fails here, before anything runs."""
    arguments = expand(command, {}, include_all=True, default=lambda w: DUMMIES.get(w, "x"))
    try:
        build_parser().parse_args(arguments)
    except SystemExit as exc:
        pytest.fail(f"{command.id}: `spyre-regress {' '.join(arguments)}` is refused "
                    f"(exit {exc.code})")
