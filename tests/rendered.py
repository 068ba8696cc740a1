"""A rendered report.md read back as a reader reads it: its tables, and the figures its two
statements quote. Shared by tests/test_bundle.py (synthetic investigations) and
tests/e2e/test_demo.py (the demo's bundles): every figure the causal and the workaround
statement quote must be a value of the report's Figures table (or of the per-kernel table,
for the kernels it names), and the Figures table must name no quantity twice."""

from __future__ import annotations

import re

# a figure where the text quotes one: a ratio (×1.746), an error (1.389× eager ...), a value
# with its unit (584.0 us, 1.12 ms, 12.345 M instructions), a p-value, either end of "A → B"
_NUMBER = r"\d+(?:\.\d+)?(?:e[-+]?\d+)?"
_QUOTED = re.compile(
    rf"×({_NUMBER})|({_NUMBER})×|({_NUMBER}) (?:us|ms|s|M instructions)\b|p = ({_NUMBER})"
    rf"|({_NUMBER}) → (?:×)?({_NUMBER})")


def _plain(markdown: str) -> str:
    return re.sub(r"\\(.)", r"\1", markdown).replace("&lt;", "<").replace("&gt;", ">") \
        .replace("&amp;", "&")


def tables(markdown: str) -> dict[str, list[list[str]]]:
    """Each section's first table (header row first), by section title; cells unescaped."""
    found: dict[str, list[list[str]]] = {}
    for section in re.split(r"^## ", markdown, flags=re.M)[1:]:
        title, _, body = section.partition("\n")
        rows = [line for line in body.splitlines() if line.startswith("| ")]
        if rows and _plain(title) not in found:
            found[_plain(title)] = [[_plain(c).strip().strip("*") for c in
                                     re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]
    return found


def statements(markdown: str) -> str:
    paragraphs = [p for p in markdown.split("\n\n")
                  if p.startswith(("**Causal statement.**", "**Workaround, separate"))]
    return _plain(" ".join(paragraphs))


def quoted(text: str) -> list[str]:
    return [n for match in _QUOTED.finditer(text) for n in match.groups() if n]


def unexplained(markdown: str) -> list[str]:
    """Figures of the statements that no cell of the Figures or Kernels table holds."""
    known = tables(markdown)
    cells = [c for row in known.get("Figures", [])
             for c in row]
    kernels = re.findall(r"^\| \*?\*?k\d+\S* \|.*$", markdown, flags=re.M)
    cells += [_plain(c).strip().strip("*") for row in kernels for c in row.split("|")]

    def held(number: str) -> bool:
        pattern = re.compile(rf"(?<![\d.]){re.escape(number)}(?![\d])")
        return any(pattern.search(cell) for cell in cells)

    return [n for n in quoted(statements(markdown)) if not held(n)]


def named_twice(markdown: str) -> list[tuple[str, ...]]:
    rows = tables(markdown).get("Figures", [])[2:]  # past the header and its rule
    keys = [tuple(row[:4]) for row in rows]
    return [key for key in dict.fromkeys(keys) if keys.count(key) > 1]
