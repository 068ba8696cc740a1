"""The docs as a tree a reader walks: every relative link of README.md and the pages under
docs/ reaches a file (and, with `#anchor`, one of its headings), the pages stay short enough
to read, and the docs cite public sources only (fast; the commands are
tests/test_doc_commands.py's)."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from doc_commands import ROOT, pages

# [text](target) and ![alt](target), not inside inline code; a target has no spaces
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
_CODE = re.compile(r"`[^`\n]*`")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
README_LINES, PAGE_LINES = 150, 400  # issue 47's bounds; docs/measurements/ has none


def _prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced blocks."""
    lines, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)[0]
            continue
        if fence is not None:
            if match and match.group(1)[0] == fence:
                fence = None
            continue
        lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped,
    spaces as `-`."""
    text = re.sub(r"[`*]", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings, repeated ones numbered as GitHub numbers them."""
    seen: Counter[str] = Counter()
    found = set()
    for _, line in _prose(path.read_text()):
        match = _HEADING.match(line)
        if match:
            base = slug(match.group(2))
            found.add(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of each link; a link's text may run over lines."""
    text = path.read_text()
    prose = dict(_prose(text))
    kept = "\n".join(_CODE.sub("``", prose.get(number, ""))
                     for number in range(1, len(text.splitlines()) + 1))
    return [(kept.count("\n", 0, match.start()) + 1, match.group(1))
            for match in _LINK.finditer(kept)]


def test_slug_follows_github():
    assert slug("Seven rounds, one sample per benchmark process (the gate now)") == \
        "seven-rounds-one-sample-per-benchmark-process-the-gate-now"
    assert slug("Configuration choices (asv.conf.json)") == "configuration-choices-asvconfjson"
    assert slug("`spyre_sim.compile` and `--json`") == "spyre_simcompile-and---json"


def test_the_link_reader_skips_code(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# A b\n\n[x](a.md) `[y](b.md)` ![i](img.png)\n```\n[z](c.md)\n```\n"
                    "## A b\n[over two\nlines](d.md)\n")
    assert links(page) == [(3, "a.md"), (3, "img.png"), (8, "d.md")]
    assert anchors(page) == {"a-b", "a-b-1"}


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for number, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        resolved = (page.parent / file).resolve() if file else page
        where = f"{page.relative_to(ROOT)}:{number}: {target}"
        if not resolved.exists():
            broken.append(f"{where} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{where} (no such heading)")
    assert broken == []


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_cite_public_sources_only(page):
    """A reader has the repository and the web, nothing of the machine the docs were
    written on."""
    text = page.read_text()
    assert not re.search(r"\.\./shared|(?<![\w.])research/|(?<![\w.])/work/", text)


def test_pages_are_short_enough_to_read():
    """README within 150 lines, every other page within 400; measured figures
    (docs/measurements/) have the room their tables need."""
    long = [f"{p.relative_to(ROOT)}: {n}" for p in pages()
            if (n := len(p.read_text().splitlines())) > (
                README_LINES if p.name == "README.md" and p.parent == ROOT else PAGE_LINES)
            and "measurements" not in p.relative_to(ROOT).parts]
    assert long == []


def test_the_readme_reaches_your_own_repository_in_one_link():
    targets = {target for _, target in links(ROOT / "README.md")}
    assert "docs/how-to/own-repository.md" in targets


def _tracked_sources() -> list[Path]:
    """The repository's code, tests, workflows and suites: every tracked text file outside
    docs/ that may name a page."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    return [ROOT / name for name in listed
            if name.endswith((".py", ".yml", ".yaml", ".json", ".toml", ".sh", ".md", ".txt"))
            and not name.startswith("docs/") and (ROOT / name).is_file()]


# A page of these docs named in code: docs/<folder>/<page>.md. Other projects' docs (asv's and
# torch-spyre's docs/source/..., a scratch history's docs/notes/) are theirs.
_PAGE = re.compile(r"(?<![\w/.-])docs/(?!source/|notes/)[\w/.-]+?\.md\b")


def test_code_names_pages_that_exist():
    """CLI help, error messages, docstrings, workflows and suites name pages by path; after a
    page moves, every such name follows it."""
    made_up = ROOT / "tests" / "test_doc_commands.py"  # its pages are written in a tmp_path
    missing = [f"{path.relative_to(ROOT)}: {name}" for path in _tracked_sources()
               if path != made_up
               for name in _PAGE.findall(path.read_text(errors="replace"))
               if not (ROOT / name).is_file()]
    assert missing == []


MEASUREMENTS = ROOT / "docs" / "measurements"
_SCRIPT = re.compile(r"(?<![\w/.-])scripts/[\w.-]+\.(?:py|sh)")  # not .github/scripts/


def _sections(text: str) -> list[str]:
    """A page's preamble and each `## ` section."""
    return re.split(r"(?m)^(?=## )", text)


@pytest.mark.parametrize("page", sorted(MEASUREMENTS.glob("*.md")), ids=lambda p: p.name)
def test_every_measured_table_names_its_command_commit_date_and_load(page):
    """A table or a transcript of figures sits in a section that says the command that
    produces it, the commit that wrote it and the load it was measured under. Every command
    line of the section names a script in scripts/ (a table first measured by hand names the
    script that measures it now and says whether it has run it again)."""
    unsourced = []
    for section in _sections(page.read_text()):
        if page.name == "index.md" and not section.startswith("## "):
            continue  # the index's table is of pages, not of figures
        if not re.search(r"(?m)^\|[-| ]+\|$|^```", section):
            continue
        title = section.splitlines()[0]
        commands = re.findall(r"(?m)^- Command[^:\n]*: (.*(?:\n  .*)*)", section)
        if not (commands and re.search(r"(?m)^- Commit: .*\d{4}", section)
                and re.search(r"(?m)^- Load: ", section)):
            unsourced.append(f"{title}: no Command/Commit/Load lines")
            continue
        for command in commands:
            scripts = _SCRIPT.findall(command)
            if not scripts:
                unsourced.append(f"{title}: a command names no script in scripts/: "
                                 f"{command[:60]}")
            unsourced += [f"{title}: {name} does not exist" for name in scripts
                          if not (ROOT / name).is_file()]
    assert unsourced == []


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_script_the_docs_name_exists(page):
    names = set(_SCRIPT.findall(page.read_text()))
    assert [name for name in sorted(names) if not (ROOT / name).is_file()] == []
