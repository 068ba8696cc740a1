"""Every `spyre-regress` command the docs show, run as a user runs it, on one scratch history.

The commands come from the pages themselves (tests/doc_commands.py): a fenced command that
stops working, or a new one no test knows how to run, fails here. Each runs the installed
script from outside the repository with PYTHONPATH unset. To keep CI short they share one
scratch repository (an import, a harmless commit, the work-division regression, another
harmless commit) and one nightly run, on the demo's benchmark grid with `--bench` limited to
device time; the demo itself is the README's command, run once per session (conftest).

That nightly run is the GitHub workflow's own step: the `run:` script of
.github/workflows/nightly.yml, executed by bash as Actions runs it, with GITHUB_WORKSPACE,
HOME and PYENV_DIR set to prefixes of the reports' path (the scrubber once rewrote such paths
and then could not read its own trace files) and a credential in a variable whose name says
so. The culprit's commit subject carries that credential, so it reaches the report unless it
is scrubbed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import SCRIPT, documented, isolated_home, run_cli, seed_asv_env, user_environment
from doc_commands import ROOT, expand, fenced_commands

from regressions import git
from regressions.groundtruth import scenarios
from regressions.groundtruth import scratch as scratch_history
from regressions.records import results as results_store
from regressions.records import tables

pytestmark = pytest.mark.slow

GRID = {"SPYRE_REGRESS_GRID": "demo"}  # the demo's small grid (benchmarks/prepare.py)
BENCH = "ExecuteDeviceTime"  # device time only: deterministic enough for one alert
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
STEP = "Run the nightly loop"
TOKEN_NAME, TOKEN = "SPYRE_DEPLOY_TOKEN", "sr-planted-4f7Qz9LmX2"
INJECTION = scenarios.INJECTIONS["workdiv_m127"]


def workflow_script(inputs: dict[str, str]) -> str:
    """The `run:` block of the workflow step, with its `${{ ... || 'default' }}` expressions
    evaluated as Actions would for a dispatch with `inputs`."""
    lines = WORKFLOW.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"- name: {STEP}")
    run = next(i for i in range(start, len(lines)) if lines[i].strip() == "run: |")
    indent = len(lines[run + 1]) - len(lines[run + 1].lstrip())
    body = []
    for line in lines[run + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break
        body.append(line[indent:])

    def evaluate(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        assert name.startswith("github.event.inputs."), match.group(0)
        return inputs.get(name.rsplit(".", 1)[1]) or default

    script = re.sub(r"\$\{\{\s*([\w.]+)\s*\|\|\s*'([^']*)'\s*\}\}", evaluate, "\n".join(body))
    assert "${{" not in script, script
    return script


class Scratch:
    """The shared history and where the workflow's step left its output."""

    def __init__(self, root: Path) -> None:
        self.home = root  # the runner's home directory
        self.workspace = root / "work" / "spyre-regress"  # GITHUB_WORKSPACE: the checkout
        self.reports = self.workspace / "reports-out"
        self.state = self.workspace / ".spyre-regress"
        records = scratch_history.build(self.workspace, [None])
        scenarios.apply(self.workspace, INJECTION)
        # a leaked credential in a commit message: exactly what must not reach a public issue
        self.culprit = git.commit_all(self.workspace, f"{INJECTION.subject} (token {TOKEN})",
                                      scratch_history.START_TIME + 3 * 3600)
        note = self.workspace / "docs" / "notes" / "01.md"
        note.parent.mkdir(parents=True)
        note.write_text("# Release note\n\nNothing user-visible changed.\n")
        self.last = git.commit_all(self.workspace, "docs: add a release note",
                                   scratch_history.START_TIME + 4 * 3600)
        self.first, self.parent = records[0].sha, records[-1].sha

    def environment(self) -> dict[str, str]:
        """As an Actions runner sets it, plus the demo grid; HOME, PYENV_DIR and
        GITHUB_WORKSPACE are all prefixes of the reports' path."""
        return {**isolated_home(self.home), **GRID, TOKEN_NAME: TOKEN,
                "GITHUB_WORKSPACE": str(self.workspace), "GITHUB_ACTIONS": "true",
                "PYENV_DIR": str(self.workspace.parent), "GITHUB_REF_NAME": "main"}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, asv_env) -> Scratch:
    history = Scratch(tmp_path_factory.mktemp("runner"))
    seed_asv_env(history.workspace / ".asv" / "env", asv_env)
    return history


@pytest.fixture(scope="module")
def workflow_run(scratch) -> subprocess.CompletedProcess:
    """The workflow's step, by bash, as Actions runs a `run:` script (`bash -e {0}`)."""
    script = workflow_script({"stride": "1", "bench": BENCH})
    env = user_environment(**scratch.environment(),
                           PATH=f"{SCRIPT.parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                          cwd=scratch.workspace, env=env, capture_output=True, text=True,
                          timeout=2400, check=False)
    (scratch.home / "workflow.log").write_text(done.stdout + done.stderr)  # for a failure
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return done


def every_file(root: Path) -> dict[str, bytes]:
    """Every file under `root`, archives unpacked, by path."""
    files = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        files[str(path.relative_to(root))] = path.read_bytes()
        if path.name.endswith(".tar.gz"):
            with tarfile.open(path) as archive:
                for member in archive.getmembers():
                    if member.isfile():
                        extracted = archive.extractfile(member)
                        assert extracted is not None  # a regular file
                        files[f"{path.name}!{member.name}"] = extracted.read()
    return files


def test_the_workflow_step_reports_the_regression_without_the_token(scratch, workflow_run):
    subject = git.commit_info(scratch.workspace, scratch.culprit).subject
    assert TOKEN in subject  # there is a credential to leak
    (bundle,) = [p for p in scratch.reports.glob("culprit-*/*") if p.is_dir()]
    assert bundle.name.startswith(f"device_time-{scratch.culprit[:12]}-")
    assert (bundle.parent / f"{bundle.name}.tar.gz").is_file()
    for name in ("report.md", "report.html", "trace_good.json", "trace_bad.json",
                 "reproducer.py", "environment.json", "investigation.json"):
        assert (bundle / name).stat().st_size > 0, name
    files = every_file(scratch.reports)
    assert len(files) > 20
    leaks = [name for name, data in files.items() if TOKEN.encode() in data]
    assert leaks == []
    summary = json.loads((bundle / "summary.json").read_text())
    assert "(token [redacted])" in summary["causal_statement"]  # scrubbed where it is quoted
    # the tool's own paths are left alone: the investigation beside the bundle names the
    # traces under GITHUB_WORKSPACE, and they are the ones the bundle holds
    saved = json.loads((bundle.parent / "investigation.json").read_text())
    assert saved["traces"]["bad"] == str(bundle / "trace_bad.json")
    assert "[redacted]" not in json.dumps(saved["traces"])
    assert "[reported]" in workflow_run.stdout


def test_probes_leave_asv_results_alone(scratch, workflow_run):
    """Bisection measured into the nightly's own store, so asv's results hold asv's runs."""
    probe_store = scratch.state / "probe-results"
    assert any("bisect-probe" in p.name for p in probe_store.rglob("*.json"))
    assert not any("bisect-probe" in p.name
                   for p in (scratch.workspace / ".asv" / "results").rglob("*.json"))


def run_documented(command, values: dict, cwd: Path, scratch: Scratch, timeout: float = 1800):
    return run_cli(*expand(command, values), cwd=cwd, timeout=timeout,
                   **scratch.environment())


def _detect(scratch, command, work):
    values: dict = {"--repo": (), "--json": ()}
    if "--table" in command.text:  # the scratch store as a long table of results
        table = work / "results.csv"
        tables.long_table(results_store.load_results(scratch.workspace / ".asv" / "results")
                          ).to_csv(table, index=False)
        values = {"--table": str(table), "--json": ()}
    done = run_documented(command, values, scratch.workspace, scratch)
    assert done.returncode == 1, done.stderr  # exit 1: alerts
    alerts = json.loads((scratch.workspace / "alerts.json").read_text())["alerts"]
    assert [(a["kind"], a["bad_commit"]) for a in alerts] == [("device_time", scratch.culprit)]
    assert "bisect-probe" not in done.stdout  # the probes' measurements are not asv's
    return done


def _bisect(scratch, command, work):
    out = work / "bisect.json"
    done = run_documented(command, {
        "--repo": str(scratch.workspace), "--good": scratch.first, "--bad": scratch.last,
        "--bench": BENCH, "--results": str(work / "probe-results"), "--json": str(out)},
        work, scratch)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["culprit"] == scratch.culprit
    assert re.search(r"\d+\.\d us", done.stdout), done.stdout  # medians with their unit
    assert f"culprit {scratch.culprit[:12]}" in done.stdout
    return done


def _stages(scratch, command, work):
    out = work / "stages.json"
    done = run_documented(command, _range(scratch) | {"--json": str(out)}, work, scratch)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["first_divergent_stage"] == INJECTION.stage
    assert "compile good ms" in done.stdout and " us (noise-free" in done.stdout
    return done


def _knobs(scratch, command, work):
    done = run_documented(command, _range(scratch), work, scratch)
    assert done.returncode == 0, done.stderr
    assert "Config(work_division='output_first')" in done.stdout
    assert re.search(r"work_division='output_first': \d+\.\d us", done.stdout), done.stdout
    return done


def _minimize(scratch, command, work):
    out = work / "repro.py"
    done = run_documented(command, _range(scratch) | {"--out": str(out)}, work, scratch)
    assert done.returncode == 0, done.stderr
    assert "def program(" in out.read_text() and "ops in" in done.stdout
    return done


def _report(scratch, command, work):
    if "--investigation" in command.text:
        saved = next(scratch.reports.glob("culprit-*/investigation.json"))
        values = {"--investigation": str(saved), "--out": str(work / "rerendered")}
    else:
        alerts = work / "alerts.json"
        found = run_cli("detect", "--results", str(scratch.workspace / ".asv" / "results"),
                        "--repo", str(scratch.workspace), "--json", str(alerts), cwd=work)
        assert found.returncode == 1, found.stderr
        values = {"--repo": str(scratch.workspace), "--alerts": str(alerts),
                  "--results": str(scratch.workspace / ".asv" / "results"),
                  "--out": str(work / "report")}
    done = run_documented(command, values, work, scratch)
    assert done.returncode == 0, done.stderr
    (bundle,) = [p for p in Path(values["--out"]).iterdir() if p.is_dir()]
    assert scratch.culprit[:12] in (bundle / "report.md").read_text()
    return done


def _nightly(scratch, command, work):
    """A second nightly on the same state: nothing new to measure, the alert already
    reported, so nothing is investigated twice (exit 0)."""
    done = run_documented(command, {
        "--repo": str(scratch.workspace), "--state": str(scratch.state),
        "--reports": str(scratch.reports), "--machine": "ci", "--bench": BENCH},
        work, scratch)
    assert done.returncode == 0, done.stderr
    assert re.search(r"alert 1: device_time .*\[(reported|acknowledged)\]", done.stdout)
    assert "investigating" not in done.stderr
    return done


def _alerts(scratch, command, work):
    done = run_documented(command, {"--state": str(scratch.state), "--set": "1"}, work,
                          scratch)
    assert done.returncode == 0, done.stderr
    assert re.search(rf"^\s+1 (reported|acknowledged) .*culprit {scratch.culprit[:10]}",
                     done.stdout, re.MULTILINE), done.stdout
    # 100 columns, but for a report's path: printed whole, however long, to be copied
    assert all(len(line) <= 100 for line in done.stdout.splitlines()
               if not line.lstrip().startswith("report: /"))
    return done


def _benchmark(scratch, command, work):
    """One shard of the suite on the workflow's commits, all of them measured already."""
    done = run_documented(command, {"--repo": str(scratch.workspace), "--machine": "ci"},
                          work, scratch)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^shard 1/2: bench_", done.stdout, re.MULTILINE), done.stdout
    return done


def _merge_results(scratch, command, work):
    """The workflow's results merged with a copy of themselves: one store, nothing
    doubled (the same runs merge once)."""
    results = scratch.workspace / ".asv" / "results"
    copy = work / "copy"
    shutil.copytree(results, copy)
    into = work / "merged"
    done = run_documented(command, {"merge-results": (str(results), str(copy)),
                                    "--into": str(into)}, work, scratch)
    assert done.returncode == 0, done.stderr
    key = ["benchmark", "params", "commit"]
    merged = results_store.load_results(into).set_index(key)["samples"]
    original = results_store.load_results(results).set_index(key)["samples"]
    assert merged.sort_index().tolist() == original.sort_index().tolist()
    return done


def _suite(scratch, command, work):
    """The torch-spyre suite written out for a checkout (the scratch history stands in for
    one: any git repository with the branch will do; compiling needs torch-spyre's history,
    tests/e2e/test_torch_spyre_nightly.py)."""
    out = work / "bench"
    done = run_documented(command, {"--repo": str(scratch.workspace), "--out": str(out)},
                          work, scratch)
    assert done.returncode == 0, done.stderr
    assert json.dumps(str(scratch.workspace.resolve())) in (out / "asv.conf.json").read_text()
    assert {"torch_spyre.py", "torch_spyre_stand_in.py", "workloads.py", "clocks.py"} <= {
        p.name for p in (out / "benchmarks").iterdir()}
    assert (out / "torch_spyre_install.py").is_file()
    return done


def _demo(scratch, command, work):
    """The demo's command is the one conftest's `demo_run` runs for tests/e2e/test_demo.py
    (run there, once: it takes minutes)."""
    assert documented("demo", "README.md") == [command]


def _range(scratch) -> dict:
    return {"--repo": str(scratch.workspace), "--good": scratch.parent,
            "--bad": scratch.culprit}


RUNNERS = {"detect": _detect, "bisect": _bisect, "stages": _stages, "knobs": _knobs,
           "minimize": _minimize, "report": _report, "nightly": _nightly, "alerts": _alerts,
           "benchmark": _benchmark, "merge-results": _merge_results, "suite": _suite}


@pytest.mark.parametrize("command", fenced_commands(), ids=lambda c: c.id)
def test_documented_command_works(command, scratch, workflow_run, tmp_path):
    """Each fenced command of README.md and docs/*.md, with the test's values for its
    placeholders; a subcommand no runner here knows fails, so a new command needs a test."""
    if command.subcommand == "demo":
        _demo(scratch, command, tmp_path)
        return
    assert command.subcommand in RUNNERS, f"{command.id}: no test runs this command"
    RUNNERS[command.subcommand](scratch, command, tmp_path)


def test_every_subcommand_is_documented_and_run():
    from spyre_regress.cli import COMMANDS

    documented = {c.subcommand for c in fenced_commands()}
    assert documented == {c.__name__.rsplit(".", 1)[1].replace("_", "-") for c in COMMANDS}
    assert documented <= set(RUNNERS) | {"demo"}
