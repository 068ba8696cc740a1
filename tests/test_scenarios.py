"""The scenarios still fit the sources, and harmless commits are harmless."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from regressions.errors import SpyreRegressError
from regressions.groundtruth import scenarios, scratch

PROBE = """
import json, sys, warnings
warnings.simplefilter("ignore")
import spyre_sim
sys.path.insert(0, sys.argv[1])
from benchmarks import workloads
model, inputs = workloads.build("attention", 127, 128)
program = spyre_sim.compile(model, inputs, spyre_sim.Config(noise_cv=0.0))
result = program.run(*inputs)
print(json.dumps({"artifacts": program.artifacts, "device_time_us": result.device_time_us,
                  "output": result.outputs[0].flatten()[:64].tolist()}))
"""


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    scratch.copy_sources(scratch.project_root(), root)
    return root


def _measure(root: Path) -> dict:
    done = subprocess.run([sys.executable, "-P", "-c", PROBE, str(root)], capture_output=True,
                          text=True, check=True, env={"PYTHONPATH": str(root), "PATH": ""})
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(scenarios.INJECTIONS))
def test_every_injection_applies_exactly_once(tmp_path, name):
    root = _tree(tmp_path)
    scenarios.apply(root, scenarios.INJECTIONS[name])
    with pytest.raises(SpyreRegressError, match="matches 0 times"):
        scenarios.apply(root, scenarios.INJECTIONS[name])


def test_a_revert_restores_the_tree(tmp_path):
    root = _tree(tmp_path)
    before = (root / "spyre_sim" / "device.py").read_text()
    scenarios.apply(root, scenarios.INJECTIONS["dram_derate"])
    assert (root / "spyre_sim" / "device.py").read_text() != before
    scenarios.revert(root, scenarios.INJECTIONS["dram_derate"])
    assert (root / "spyre_sim" / "device.py").read_text() == before


@pytest.mark.slow  # over 4 s: out of the quick loop, still in CI
def test_benign_commits_change_no_artifact_and_no_timing(tmp_path):
    root = _tree(tmp_path)
    before = _measure(root)
    for _, edit in scenarios.BENIGN:
        scenarios.apply_edit(root, edit)
    after = _measure(root)
    assert after == before


@pytest.mark.slow  # over 4 s: out of the quick loop, still in CI
def test_an_injection_does_change_what_it_claims(tmp_path):
    root = _tree(tmp_path)
    before = _measure(root)
    scenarios.apply(root, scenarios.INJECTIONS["fusion_off"])
    after = _measure(root)
    assert after["artifacts"]["decompose"] == before["artifacts"]["decompose"]
    assert after["artifacts"]["lower"] != before["artifacts"]["lower"]
    assert after["device_time_us"] > before["device_time_us"]
