"""The shape of the code: imports point down the layers, roles keep to their rooms, the metric
table decides, modules stay small, and constructors and long calls take keywords.

Layers, bottom to top: spyre_sim <- backends <- benchmarks <- regressions <- reports <-
spyre_regress. The compilers under test sit at the bottom (`backends`, the other compilers,
may use spyre_sim's stage-capture writer). A module may import its own package and the
packages below it; `reports` renders and takes from `regressions` only the types it renders
(and the errors); only `spyre_regress`, the orchestration, calls both. Inside `regressions`,
the ground truth (synthetic data, planted scenarios, scratch histories, the month simulation)
is imported by tests, scripts and the demo only; the night imports no command; the records
stand below the investigation (it turns what it measured into their evidence); nothing below
the orchestration imports the executor or Dask; and its rooms (sub-packages and top-level
modules) import one another in one direction only, with the probe protocol, stdlib-only, on
the floor of `probing`. A dataclass of more than five fields is keyword-only and no call
passes more than four arguments by position (what counts: `positional_calls`). Each rule is
checked on the real tree and shown to catch a violation written for the purpose.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from regressions import metrics

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("spyre_sim", "backends", "benchmarks", "regressions", "reports", "spyre_regress")
# What `reports` may take from `regressions`: the investigation's types and their codec.
REPORTS_MAY_IMPORT = {"regressions.investigation.model", "regressions.metrics",
                      "regressions.errors", "regressions.codec", "regressions.bisection.stages"}
GROUND_TRUTH = "regressions.groundtruth"
# The demo runs the nightly on a history with planted regressions: ground truth by design.
MAY_IMPORT_GROUND_TRUTH = {"spyre_regress.demo", "spyre_regress.cli.demo"}
EXECUTOR = ("spyre_regress.executor", "dask", "distributed")
# Modules above spyre_sim that may import it by name. For good: its implementation of the
# backend interface, Inductor's capture (it writes the protocol with spyre_sim's writer),
# spyre_sim's own asv suite, the ground truth, which plants regressions in spyre_sim, and the
# emulated builds (example investigations without git), which patch spyre_sim in-process.
# (the other backends name it for the stage-capture protocol's writer, spyre_sim.debug_capture;
# torch-spyre's timing, for spyre_sim's timing model, the one cost model there is)
NAMES_SPYRE_SIM = {"backends/spyre.py", "backends/inductor.py", "backends/torch_spyre_texts.py",
                   "backends/torch_spyre_timing.py",
                   "benchmarks/compile_work_child.py", "benchmarks/prepare.py",
                   "regressions/groundtruth/month.py", "spyre_regress/emulated.py",
                   "spyre_regress/example.py"}
# Still naming it until they go through the backend interface: none is left (the reproducer's
# harness was the last). A module that starts naming spyre_sim fails the test.
NAMES_SPYRE_SIM_FOR_NOW: set[str] = set()
# Where a metric's kind may be compared as a string: the table and the codec that reads it.
KIND_STRINGS_ALLOWED = {"regressions/metrics.py", "regressions/codec.py"}


def imported_modules(source: str) -> list[str]:
    """Every name an import statement brings in, absolute (`from a.b import c` -> a.b.c)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def violations(package: str, source: str, module: str = "") -> list[str]:
    """The imports of one module (`module`, dotted) of `package` that break a rule."""
    allowed = set(LAYERS[:LAYERS.index(package) + 1])
    problems = []
    for name in imported_modules(source):
        top = name.split(".")[0]
        if top in LAYERS and top not in allowed:
            problems.append(f"imports {name} (a layer above {package})")
        elif package == "reports" and top == "regressions" and not any(
                _within(name, m) for m in REPORTS_MAY_IMPORT):
            problems.append(f"imports {name} (reports takes only regressions' types)")
        if _within(name, GROUND_TRUTH) and not _within(module, GROUND_TRUTH) \
                and module not in MAY_IMPORT_GROUND_TRUTH:
            problems.append(f"imports {name} (ground truth is for tests, scripts, the demo)")
        if _within(module, "regressions.night") and _within(name, "spyre_regress.cli"):
            problems.append(f"imports {name} (the night knows no command)")
        if _within(module, "regressions.records") and _within(name, "regressions.investigation"):
            problems.append(f"imports {name} (records stand below the investigation)")
        if package != "spyre_regress" and any(_within(name, e) for e in EXECUTOR):
            problems.append(f"imports {name} (only the orchestration uses the executor)")
    return problems


def kind_comparisons(source: str) -> list[str]:
    """Comparisons of a value with a metric's kind or probe name written as a string: a
    per-metric decision taken outside the metric table."""
    names = set(metrics.KINDS) | set(metrics.PROBE_METRICS)
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        for operand in (node.left, *node.comparators):
            values = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) \
                else [operand]
            found += [f"line {node.lineno}: {v.value!r}" for v in values
                      if isinstance(v, ast.Constant) and v.value in names]
    return found


def project_modules():
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            yield package, ".".join(p for p in parts if p != "__init__"), path


def test_imports_point_down_the_layers_and_roles_keep_to_their_rooms():
    problems = [f"{path.relative_to(ROOT)}: {problem}" for package, module, path in
                project_modules() for problem in violations(package, path.read_text(), module)]
    assert problems == []


@pytest.mark.parametrize(("package", "module", "source"), [
    ("regressions", "regressions.detection.detect", "from reports import write_bundle\n"),
    ("spyre_sim", "spyre_sim.ir", "import regressions.stats\n"),
    ("spyre_sim", "spyre_sim.pipeline", "from backends import inductor\n"),
    ("backends", "backends.inductor", "from regressions.bisection import stages\n"),
    ("benchmarks", "benchmarks.workloads", "from regressions.detection import detect\n"),
    ("reports", "reports.bundle", "from spyre_regress import prober\n"),
    ("reports", "reports.bundle",
     "from regressions.investigation.investigator import Investigator\n"),
    ("regressions", "regressions.git", "def f():\n    from spyre_regress import nightly\n"),
    ("regressions", "regressions.night", "from regressions.groundtruth import month\n"),
    ("spyre_regress", "spyre_regress.nightly", "from regressions.groundtruth import planted\n"),
    ("regressions", "regressions.night", "from spyre_regress.cli import common\n"),
    ("regressions", "regressions.records.evidence",
     "from regressions.investigation.investigator import Located\n"),
    ("regressions", "regressions.records.lifecycle",
     "def f():\n    from regressions.investigation import model\n"),
    ("regressions", "regressions.detection.remeasure", "import distributed\n"),
    ("reports", "reports.bundle", "from dask import delayed\n"),
])
def test_the_layer_check_catches_a_violation(package, module, source):
    assert violations(package, source, module)


def test_the_layer_check_lets_allowed_imports_through():
    assert violations("reports", "from regressions.investigation.model import Investigation\n",
                      "reports.bundle") == []
    assert violations("spyre_regress", "from reports import write_bundle\n",
                      "spyre_regress.reporting") == []
    assert violations("spyre_regress", "from regressions.groundtruth import scratch\n",
                      "spyre_regress.demo") == []
    assert violations("regressions", "from regressions.groundtruth import month\n",
                      "regressions.groundtruth.planted") == []
    assert violations("regressions", "from regressions.records import lifecycle\n",
                      "regressions.investigation.evidence") == []
    assert violations("spyre_regress", "import distributed\n", "spyre_regress.executor") == []


def room_of(module: str) -> str | None:
    """The room of `regressions` a module stands in: its sub-package, or itself when it is a
    module of the package's top (regressions.detection.detect -> detection, regressions.stats
    -> stats); None outside `regressions` and for the package itself."""
    parts = module.split(".")
    return parts[1] if parts[0] == "regressions" and len(parts) > 1 else None


def rooms_arrows(modules: dict[str, str]) -> dict[str, set[str]]:
    """Which rooms of `regressions` import which, from each module's source (`modules`:
    dotted name -> source); an import inside a room is no arrow."""
    arrows: dict[str, set[str]] = {}
    for module, source in modules.items():
        room = room_of(module)
        if room is None:
            continue
        for name in imported_modules(source):
            target = room_of(name)
            if target is not None and target != room:
                arrows.setdefault(room, set()).add(target)
    return arrows


def loops(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The rooms that import each other, directly or around a circle: every strongly
    connected group of more than one room (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(room: str) -> None:
        index[room] = low[room] = len(index)
        stack.append(room)
        for target in sorted(arrows.get(room, ())):
            if target not in index:
                visit(target)
                low[room] = min(low[room], low[target])
            elif target in stack:
                low[room] = min(low[room], index[target])
        if low[room] == index[room]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == room:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for room in sorted({*arrows, *(t for ts in arrows.values() for t in ts)}):
        if room not in index:
            visit(room)
    return sorted(found)


def test_inside_regressions_no_room_imports_one_that_imports_it_back():
    """Folder by folder (detection, bisection, probing, investigation, records, ...; a
    top-level module is a room of its own), every arrow points down: no loop."""
    sources = {module: path.read_text() for package, module, path in project_modules()
               if package == "regressions"}
    arrows = rooms_arrows(sources)
    assert loops(arrows) == [], {room: sorted(targets) for room, targets in arrows.items()}
    # the probe protocol is the floor of the probing room: nothing but the standard library
    protocol = sources["regressions.probing.protocol"]
    assert {name.split(".")[0] for name in imported_modules(protocol)} <= {
        "__future__", "collections", "dataclasses", "math", "typing"}


def test_the_loop_check_catches_rooms_that_import_each_other():
    back = rooms_arrows({
        "regressions.bisection.stages": "from regressions.probing.protocol import KernelTime\n",
        "regressions.probing.prober": "from regressions.bisection import minimize\n",
        "regressions.detection.detect": "from regressions import stats\n"})
    assert loops(back) == [["bisection", "probing"]]
    around = {"records": {"investigation"}, "investigation": {"bisection"},
              "bisection": {"records"}, "night": {"records"}}
    assert loops(around) == [["bisection", "investigation", "records"]]
    assert loops({"night": {"records"}, "records": {"codec"}}) == []


def names_spyre_sim(source: str) -> bool:
    return any(name.split(".")[0] == "spyre_sim" for name in imported_modules(source))


def test_above_the_simulator_only_its_backend_and_the_listed_modules_name_it():
    naming = {str(path.relative_to(ROOT)) for package, _, path in project_modules()
              if package != "spyre_sim" and names_spyre_sim(path.read_text())}
    assert naming - NAMES_SPYRE_SIM == NAMES_SPYRE_SIM_FOR_NOW


def test_naming_the_simulator_is_seen_in_a_function_too():
    assert names_spyre_sim("def f():\n    from spyre_sim.stages import STAGES\n")
    assert not names_spyre_sim("from backends import interface\n")


def test_no_metric_kind_is_compared_as_a_string_outside_the_table():
    problems = [f"{path.relative_to(ROOT)}: {found}" for _, _, path in project_modules()
                if str(path.relative_to(ROOT)) not in KIND_STRINGS_ALLOWED
                for found in kind_comparisons(path.read_text())]
    assert problems == []


@pytest.mark.parametrize("source", [
    "if metric == 'numerics':\n    pass\n",
    "ok = kind in ('compile_time', 'compile_work')\n",
    "ok = 'device_time' != probe\n",
])
def test_the_kind_check_catches_a_comparison(source):
    assert kind_comparisons(source)


def test_the_kind_check_lets_table_fields_through():
    assert kind_comparisons("if metric.errors and kind == metrics.FAILURE:\n    pass\n") == []


def size_budget(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "size_budget.py"), *args],
                          capture_output=True, text=True, timeout=120)


def test_no_module_or_function_is_over_the_size_budget():
    done = size_budget()
    assert done.returncode == 0, done.stderr


def test_the_size_check_catches_a_long_function_and_a_long_module(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (tmp_path / "spyre_sim").mkdir()
    (tmp_path / "spyre_sim" / "long.py").write_text(
        f'def f():\n    """Docstrings do not count."""\n{body}\n')
    (tmp_path / "spyre_sim" / "big.py").write_text("# comments do not count\n" * 500 + "\n".join(
        f"y{i} = {i}" for i in range(401)) + "\n")
    done = size_budget("--root", str(tmp_path))
    assert done.returncode == 1
    assert "spyre_sim/long.py: f() has 62 code lines (budget 60)" in done.stderr
    assert "spyre_sim/big.py: 401 code lines (budget 400)" in done.stderr


def test_compile_work_keeps_its_roles_in_files_of_at_most_400_lines():
    """The parent that deals and launches, the valgrind-side child and what they hand each
    other: separate files, each at most 400 lines as `wc -l` counts them, and the child loads
    the exchange, never the parent."""
    files = {role: ROOT / "benchmarks" / f"{role}.py"
             for role in ("compile_work", "compile_work_child", "compile_work_manifest")}
    lines = {role: len(path.read_text().splitlines()) for role, path in files.items()}
    assert max(lines.values()) <= 400, lines
    child = files["compile_work_child"].read_text()
    assert '"compile_work_manifest.py"' in child and '"compile_work.py"' not in child


# --- constructors and calls by keyword ----------------------------------------------------
# What the keyword rules read: the project's packages, the suites it ships, its scripts and
# its tests. Not examples/ (it stands for a user's project, and the ground truth plants
# regressions by editing its text) nor tests/fixtures/ (data).
KEYWORD_ROOTS = (*LAYERS, "suites", "scripts", "tests")
MAX_FIELDS, MAX_POSITIONAL = 5, 4
# Callables of other libraries whose positional arguments are items of one kind, not
# distinct parameters: the iterables zip pairs up, the values print or max take, the path
# parts join joins, a log call's %-arguments.
LIBRARY_VARIADIC = {"zip", "print", "max", "min", "join", "debug", "info", "warning", "error",
                    "exception", "critical"}


def _is_dataclass_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return (target.attr if isinstance(target, ast.Attribute)
            else getattr(target, "id", None)) == "dataclass"


def _init_fields(cls: ast.ClassDef) -> list[str]:
    """The fields a dataclass's __init__ takes: annotated names, less ClassVars, the
    KW_ONLY marker and `field(init=False)`."""
    names = []
    for item in cls.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        annotation = ast.unparse(item.annotation)
        if "ClassVar" in annotation or "KW_ONLY" in annotation:
            continue
        if isinstance(item.value, ast.Call) and any(
                k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in item.value.keywords):
            continue
        names.append(item.target.id)
    return names


def positional_dataclasses(source: str) -> list[str]:
    """The dataclasses of more than MAX_FIELDS fields that take positional arguments: their
    decorator does not say `kw_only=True` (fields of base classes are not counted)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for decorator in filter(_is_dataclass_decorator, node.decorator_list):
            fields = len(_init_fields(node))
            keyword_only = isinstance(decorator, ast.Call) and any(
                k.arg == "kw_only" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in decorator.keywords)
            if fields > MAX_FIELDS and not keyword_only:
                found.append(f"line {node.lineno}: {node.name} ({fields} fields)")
    return found


def keyword_modules() -> dict[str, str]:
    """Dotted module name -> source, for every file the keyword rules read; a script, and a
    module at the top of tests/ (conftest), also by its bare name, as they are imported."""
    modules = {}
    for path in keyword_files():
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(p for p in parts if p != "__init__")] = path.read_text()
        if parts[0] in ("scripts", "tests") and len(parts) == 2:
            modules[parts[-1]] = modules[".".join(parts)]
    return modules


def keyword_files() -> list[Path]:
    return [path for root in KEYWORD_ROOTS for path in sorted((ROOT / root).rglob("*.py"))
            if "fixtures" not in path.relative_to(ROOT).parts]


def _named_parameters(tree: ast.Module) -> dict[str, int | None]:
    """Per top-level function: how many named positional parameters precede its `*args`
    (None for a function without one)."""
    return {node.name: len(node.args.posonlyargs + node.args.args) if node.args.vararg else None
            for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def positional_calls(source: str, modules: dict[str, str] | None = None) -> list[str]:
    """Calls that pass more than MAX_POSITIONAL arguments by position (a `*iterable` counts as
    one). Arguments that land in a `*args` parameter are items of one kind and do not count:
    where the callee is a function of this module, one imported by name from a module of
    `modules`, or `module.function` of such a module, its named positional parameters are
    what counts; a callee of another library counts in full unless LIBRARY_VARIADIC names
    it."""
    modules = modules or {}
    tree = ast.parse(source)
    local = _named_parameters(tree)
    imported: dict[str, int | str | None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if submodule in modules:
                    imported[alias.asname or alias.name] = submodule
                elif node.module in modules:
                    imported[alias.asname or alias.name] = _named_parameters(
                        ast.parse(modules[node.module])).get(alias.name)
        elif isinstance(node, ast.Import):
            imported.update({(a.asname or a.name): a.name for a in node.names
                             if a.name in modules})
    found = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        function, positional = call.func, len(call.args)
        named = _variadic_parameters(function, local, imported, modules)
        name = function.attr if isinstance(function, ast.Attribute) else getattr(
            function, "id", None)
        if named is None and name in LIBRARY_VARIADIC and name not in local:
            continue
        if min(positional, named if named is not None else positional) > MAX_POSITIONAL:
            found.append(f"line {call.lineno}: {ast.unparse(function)}() with {positional}")
    return found


def _variadic_parameters(function: ast.expr, local: dict[str, int | None],
                         imported: dict[str, int | str | None],
                         modules: dict[str, str]) -> int | None:
    """How many named positional parameters precede the `*args` of a callee found in this
    module or in one of `modules`; None where it has no `*args` or is not found."""
    if isinstance(function, ast.Name):
        found = local[function.id] if function.id in local else imported.get(function.id)
        return found if isinstance(found, int) else None
    if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
        module = imported.get(function.value.id)
        if isinstance(module, str):
            return _named_parameters(ast.parse(modules[module])).get(function.attr)
    return None


def test_dataclasses_of_more_than_five_fields_are_keyword_only():
    problems = [f"{path.relative_to(ROOT)}: {found}" for path in keyword_files()
                for found in positional_dataclasses(path.read_text())]
    assert problems == []


def test_no_call_passes_more_than_four_positional_arguments():
    modules = keyword_modules()
    problems = [f"{path.relative_to(ROOT)}: {found}" for path in keyword_files()
                for found in positional_calls(path.read_text(), modules)]
    assert problems == []


def test_the_keyword_checks_catch_a_positional_dataclass_and_a_long_call():
    six = "\n".join(f"    f{i}: int" for i in range(6))
    assert positional_dataclasses(f"@dataclass(frozen=True)\nclass A:\n{six}\n") == [
        "line 2: A (6 fields)"]
    assert positional_dataclasses(f"@dataclasses.dataclass\nclass A:\n{six}\n")
    assert positional_dataclasses(f"@dataclass(kw_only=True)\nclass A:\n{six}\n") == []
    assert positional_dataclasses(  # five fields, one not in __init__, one a ClassVar
        "@dataclass\nclass A:\n" + "\n".join(f"    f{i}: int" for i in range(5))
        + "\n    g: int = field(init=False)\n    h: ClassVar[int] = 0\n") == []
    assert positional_calls("f(1, 2, 3, 4, 5)\n") == ["line 1: f() with 5"]
    assert positional_calls("x = obj.method(a, b, c, d, e, f)\n") == [
        "line 1: obj.method() with 6"]
    assert positional_calls("f(1, 2, 3, 4, e=5)\nf(*many)\n") == []
    # arguments that land in *args are items of one kind
    assert positional_calls("def g(a, *rest):\n    pass\ng(1, 2, 3, 4, 5, 6)\n") == []
    assert positional_calls("def g(a, b, c, d, e, *rest):\n    pass\ng(1, 2, 3, 4, 5)\n")
    modules = {"helpers": "def run(script, *args):\n    pass\n"}
    assert positional_calls("from helpers import run\nrun('s', 1, 2, 3, 4)\n", modules) == []
    assert positional_calls("import helpers\nhelpers.run('s', 1, 2, 3, 4)\n", modules) == []
    assert positional_calls("print(1, 2, 3, 4, 5)\nzip(a, b, c, d, e)\n") == []


# The records' readers of asv's files, which everything above them reaches through the
# results store (`records.results_store.ResultsStore`).
ASV_FILE_READERS = {"load_results", "read_file", "read_document", "benchmarks_meta",
                    "open_document", "read_store", "merge_into"}


def reads_asv_files(source: str) -> list[str]:
    """Calls of the records' readers of asv files, by name or as an attribute."""
    return [f"line {node.lineno}: {ast.unparse(node.func)}()"
            for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
            and (node.func.attr if isinstance(node.func, ast.Attribute)
                 else getattr(node.func, "id", None)) in ASV_FILE_READERS]


def test_asv_results_are_read_through_the_results_store_everywhere():
    """Outside `regressions/records` (scripts included, tests aside: they pin the readers
    themselves) nothing opens an asv result file but through `ResultsStore`."""
    outside = [path for root in (*LAYERS, "suites", "scripts")
               for path in sorted((ROOT / root).rglob("*.py"))
               if not path.relative_to(ROOT).parts[:2] == ("regressions", "records")]
    problems = [f"{path.relative_to(ROOT)}: {found}" for path in outside
                for found in reads_asv_files(path.read_text())]
    assert problems == []
    assert reads_asv_files("frame = results.load_results(root, machine=m)\n") == [
        "line 1: results.load_results()"]
    assert reads_asv_files("frame = ResultsStore(root, m).frame()\n") == []
