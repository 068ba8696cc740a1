"""Code lines per module and per function, and the budget they must fit (tinygrad's sz.py idea).

A code line is a line holding a token that is not a comment, a docstring or blank space. The
budget: no module over 400 code lines, no function over 60, in the project's packages.

    python scripts/size_budget.py              # every module's count, largest first; exit 1
                                               # (each problem on stderr) if over the budget
    python scripts/size_budget.py --root DIR   # the same for another tree
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("spyre_sim", "backends", "benchmarks", "regressions", "reports", "spyre_regress")
MODULE_BUDGET = 400
FUNCTION_BUDGET = 60
_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER}


class Size(NamedTuple):
    path: str
    code_lines: int
    long_functions: tuple[tuple[str, int], ...]  # (name, code lines) over the budget


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                lines.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return lines


def measure(path: Path, root: Path = ROOT) -> Size:
    source = path.read_text()
    tree = ast.parse(source)
    docstrings = _docstring_lines(tree)
    code: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _SKIPPED:
            code.update(line for line in range(token.start[0], token.end[0] + 1)
                        if line not in docstrings)
    long = tuple(
        (node.name, n) for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (n := sum(1 for line in code
                      if node.lineno <= line <= (node.end_lineno or node.lineno)))
        > FUNCTION_BUDGET)
    return Size(str(path.relative_to(root)), len(code), long)


def sizes(root: Path = ROOT) -> list[Size]:
    return sorted((measure(p, root) for package in PACKAGES
                   for p in (root / package).rglob("*.py") if p.is_file()),
                  key=lambda s: -s.code_lines)


def over_budget(found: list[Size]) -> list[str]:
    problems = [f"{s.path}: {s.code_lines} code lines (budget {MODULE_BUDGET})"
                for s in found if s.code_lines > MODULE_BUDGET]
    problems += [f"{s.path}: {name}() has {n} code lines (budget {FUNCTION_BUDGET})"
                 for s in found for name, n in s.long_functions]
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="tree to measure")
    found = sizes(parser.parse_args(argv).root.resolve())
    for size in found:
        print(f"{size.code_lines:5d}  {size.path}")
    print(f"{sum(s.code_lines for s in found):5d}  total")
    problems = over_budget(found)
    for problem in problems:
        print(f"over budget: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
