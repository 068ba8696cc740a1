"""The `spyre-regress` commands the documentation shows, as argument lists a test can run.

A doc change must not leave a command behind that does not work, so the tests take the
commands from the pages themselves. Two sources:

- fenced code blocks of README.md and docs/*.md: every line that runs `spyre-regress` (also as
  `.venv/bin/spyre-regress`, or after `&&`), with the indented `[--option ...]` lines that
  continue a synopsis; these are run in subprocesses;
- the README's command table (inline code starting with `spyre-regress `): parsed only.

A command is turned into arguments by `expand`: placeholders (upper-case metavars such as
PATH, REV, DIR, FILE, REGEX, N, ID) are replaced by the value the test gives for their option,
an optional `[--option VALUE]` group is kept only when the test gives that option a value,
`a|b|c` alternatives take the first, and `...` (repeatable) is dropped. Literal values in the
docs (`.asv/results`, `mlp`, `127`, `"('mlp', 127)"`) are run as written.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/*.md")
PROGRAM = "spyre-regress"
# An upper-case metavar: PATH, REV, DIR, FILE, FILE.py, REGEX=FRACTION, N, Q, ID, STATUS, ...
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]*(\.py|=[A-Z_]+)?$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_START = re.compile(r"(?:^|&&\s*|;\s*|\$\s+)(?:[\w./-]*/)?spyre-regress(?=\s|$)")
_INLINE = re.compile(r"`(spyre-regress [^`]+)`")


@dataclass(frozen=True)
class DocCommand:
    """One documented command: where it is written and its text (continuations joined)."""

    page: str
    line: int
    text: str

    @property
    def subcommand(self) -> str:
        words = shlex.split(self.text, comments=True)
        return words[1] if len(words) > 1 else ""

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}:{self.subcommand}"


def pages(root: Path = ROOT) -> list[Path]:
    return [path for pattern in PAGES for path in sorted(root.glob(pattern))]


def _blocks(text: str) -> Iterator[list[tuple[int, str]]]:
    """The (line number, line) pairs of each fenced code block."""
    fence: str | None = None
    block: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        match = _FENCE.match(line)
        if fence is None:
            if match:
                fence, block = match.group(1), []
            continue
        if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
                and not line.strip()[len(match.group(1)):].strip():
            fence = None
            yield block
            continue
        block.append((number, line))


def _fenced_lines(text: str) -> Iterator[tuple[int, str]]:
    """Lines of fenced blocks that may hold commands: in a transcript (a block with `$ `
    prompts) only the prompted lines, since the rest is output."""
    for block in _blocks(text):
        transcript = any(line.lstrip().startswith("$ ") for _, line in block)
        for number, line in block:
            if not transcript or line.lstrip().startswith("$ "):
                yield number, line


def fenced_commands(root: Path = ROOT) -> list[DocCommand]:
    """Every `spyre-regress` command in a fenced block of the pages."""
    found = []
    for path in pages(root):
        lines = dict(_fenced_lines(path.read_text()))
        for number, line in lines.items():
            match = _START.search(line)
            if not match:
                continue
            text = re.split(r"\s&&\s|\s;\s", PROGRAM + line[match.end():])[0].rstrip()
            following = number + 1
            while following in lines:  # a synopsis continues on indented lines
                nxt = lines[following]
                if text.endswith("\\"):
                    text = text[:-1]
                elif not (nxt[:1].isspace() and nxt.strip().startswith(("[", "--"))):
                    break
                text += " " + nxt.strip()
                following += 1
            found.append(DocCommand(str(path.relative_to(root)), number, " ".join(text.split())))
    return found


def table_commands(root: Path = ROOT) -> list[DocCommand]:
    """The README's inline `spyre-regress ...` commands (its command table)."""
    readme = root / "README.md"
    return [DocCommand("README.md", number, " ".join(match.split()))
            for number, line in enumerate(readme.read_text().splitlines(), 1)
            if line.startswith("|")
            for match in _INLINE.findall(line)]


def _groups(words: list[str]) -> Iterator[tuple[bool, list[str]]]:
    """(optional?, words) for each `--option VALUE...` group, brackets removed."""
    index = 0
    while index < len(words):
        word = words[index]
        if word.startswith("["):
            group = []
            while True:
                group.append(words[index])
                if words[index].endswith("]"):
                    break
                index += 1
            group[0] = group[0][1:]  # one after the other: `[--flag]` is one word
            group[-1] = group[-1][:-1]
            yield True, [w for w in group if w]
        else:
            group = [word]
            while index + 1 < len(words) and not words[index + 1].startswith(("-", "[")):
                index += 1
                group.append(words[index])
            yield False, group
        index += 1


def expand(command: DocCommand, values: Mapping[str, str | tuple[str, ...]],
           include_all: bool = False, default: Callable[[str], str] | None = None
           ) -> list[str]:
    """The arguments after `spyre-regress` a user would type, with the test's values.

    `values` maps an option (or the subcommand, for its positional placeholders) to the
    value(s) of its placeholders, in order. With `include_all`, every optional group is kept
    (for parsing only) and `default(placeholder)` fills what `values` does not give. Raises
    KeyError naming a placeholder the test gave no value for.
    """
    words = shlex.split(command.text, comments=True)[1:]
    arguments: list[str] = []
    for optional, group in _groups(words):
        option = group[0]
        if optional and option not in values and not include_all:
            continue
        value = values.get(option, ())
        given = [value] if isinstance(value, str) else list(value)
        arguments.append(option)
        for word in group[1:]:
            if word == "...":
                continue
            if PLACEHOLDER.match(word):
                if given:
                    arguments.append(given.pop(0))
                elif default is not None:
                    arguments.append(default(word))
                else:
                    raise KeyError(f"{command.id}: the test gives no value for {word} of "
                                   f"{option}")
            else:
                arguments.append(word.split("|")[0])
    return arguments
