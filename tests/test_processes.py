"""asv's output as the nightly and the demo show it: step lines as they start, not tables."""

from __future__ import annotations

import subprocess
import sys
import time

from regressions import processes

# asv writes a log line without its newline and ends it when the next record starts.
FAKE_ASV = r'''
import sys, time
for text, pause in (("\u00b7 Creating environments", 0.1),
                    ("\n\u00b7\u00b7 Installing requirements for virtualenv-py3.11", 1.5),
                    ("\n[ 8.57%] \u00b7\u00b7\u00b7 =========== ========", 0.0),
                    ("\n[ 8.57%] \u00b7\u00b7\u00b7\u00b7 For parameters: 'mlp', 127", 0.0),
                    ("\nCollecting torch", 0.0),
                    ("\n[10.00%] \u00b7\u00b7\u00b7 bench_execute.ExecuteDeviceTime"
                     ".time_device  ok\n", 0.0)):
    sys.stdout.write(text)
    sys.stdout.flush()
    time.sleep(pause)
'''


def test_only_step_and_progress_lines_are_shown():
    shown = [processes.asv_progress(line) for line in (
        "· Creating environments", "[ 8.57%] ··· =========== =====",
        "[ 8.57%] ···· For parameters: 'mlp', 127", "Collecting torch", "  'mlp'  1.2ms",
        "[10.00%] ··· bench_execute.ExecuteDeviceTime.time_device  ok")]
    assert shown == ["· Creating environments", None, None, None, None,
                     "[10.00%] ··· bench_execute.ExecuteDeviceTime.time_device  ok"]


def test_a_step_still_running_is_shown_before_it_ends():
    process = subprocess.Popen([sys.executable, "-c", FAKE_ASV], stdout=subprocess.PIPE)
    started, seen = time.monotonic(), []
    for text, complete in processes.output_as_it_comes(process.stdout, idle=0.3):
        seen.append((round(time.monotonic() - started, 1), text, complete))
    process.wait()
    installing = [t for t, text, complete in seen
                  if text.endswith("Installing requirements for virtualenv-py3.11")]
    # shown while the install is still running (the line ends 1.5 s later), then once ended
    assert installing and installing[0] < 1.2
    complete = [text for _, text, done in seen if done]
    assert complete == ["· Creating environments",
                        "·· Installing requirements for virtualenv-py3.11",
                        "[ 8.57%] ··· =========== ========",
                        "[ 8.57%] ···· For parameters: 'mlp', 127", "Collecting torch",
                        "[10.00%] ··· bench_execute.ExecuteDeviceTime.time_device  ok"]


def test_run_asv_names_each_step_and_says_a_long_one_is_still_running(tmp_path, monkeypatch):
    fake = tmp_path / "asv"  # `python -m asv` finds this package first on PYTHONPATH
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(FAKE_ASV)
    monkeypatch.setattr(processes, "STILL_RUNNING_EVERY", 0.5)
    started, shown = time.monotonic(), []
    done = processes.run_asv(["run"], tmp_path, env={"PYTHONPATH": str(tmp_path)},
                          stream=lambda line: shown.append((time.monotonic() - started, line)))
    assert done.returncode == 0
    lines = [line for _, line in shown]
    assert lines[0] == "asv · Creating environments"
    installing = "asv ·· Installing requirements for virtualenv-py3.11"
    assert installing in lines and shown[lines.index(installing)][0] < 1.2  # before it ends
    assert any(line.startswith(f"{installing} (still running after ") for line in lines)
    assert lines[-1] == "asv [10.00%] ··· bench_execute.ExecuteDeviceTime.time_device  ok"
    assert not any("====" in line or "For parameters" in line or "Collecting" in line
                   for line in lines)
    assert "Collecting torch" in done.stdout  # the whole output is kept for errors
