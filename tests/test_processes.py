"""asv's output as the nightly and the demo show it: step lines as they start, not tables."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

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
    assert process.stdout is not None  # piped
    for text, complete in processes.output_as_it_comes(process.stdout, idle=0.3):
        seen.append((round(time.monotonic() - started, 1), text, complete))
    process.wait()
    installing = [t for t, text, complete in seen
                  if text.endswith("Installing requirements for virtualenv-py3.11")]
    # shown while the install is still running (the line ends 1.5 s later), then once ended
    assert installing and installing[0] < 1.2
    ended = [text for _, text, done in seen if done]
    assert ended == ["· Creating environments",
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


# A probe stand-in: processes.PROBE is run as `python -P PROBE command request result`.
ENDING_PROBE = r'''
import json, os, signal, sys, time
command, request, result = sys.argv[1:]
how = json.load(open(request))["how"]
if how == "answer":
    json.dump({"status": "ok"}, open(result, "w"))
elif how == "sigkill":  # what the kernel's OOM killer does
    os.kill(os.getpid(), signal.SIGKILL)
elif how == "exit":
    print("Traceback ... MemoryError", file=sys.stderr)
    sys.exit(3)
elif how == "ctrl-c":  # Ctrl-C in the terminal: SIGINT to the whole process group
    os.killpg(os.getpgrp(), signal.SIGINT)
    time.sleep(30)
'''


def _probe(tmp_path, monkeypatch, how: str) -> dict:
    script = tmp_path / "probe.py"
    script.write_text(ENDING_PROBE)
    monkeypatch.setattr(processes, "PROBE", script)
    return processes.run_probe(tmp_path, "work", {"how": how}, timeout=60)


def test_a_probe_killed_from_outside_says_by_what_and_why(tmp_path, monkeypatch):
    assert _probe(tmp_path, monkeypatch, "answer") == {"status": "ok"}
    killed = _probe(tmp_path, monkeypatch, "sigkill")
    assert killed["status"] == "untestable"
    assert killed["detail"].startswith("probe killed by SIGKILL (signal 9); likely out of "
                                       "memory"), killed
    assert "--shape" in killed["detail"]
    ended = _probe(tmp_path, monkeypatch, "exit")
    assert ended["detail"] == "probe exited 3: Traceback ... MemoryError"


def test_ctrl_c_during_a_probe_interrupts_the_run_and_is_no_measurement(tmp_path):
    """The probe and the tool share a process group: SIGINT reaches both. Probes run in
    worker threads (both builds at once), where no KeyboardInterrupt arrives: the probe's
    death must come back as the interruption it is, not as an "untestable" commit."""
    code = f"""
import signal, sys
from concurrent.futures import ThreadPoolExecutor
sys.path[:0] = {[str(p) for p in sys.path if p]!r}
from pathlib import Path
from regressions import processes
processes.PROBE = Path({str(tmp_path / "probe.py")!r})
signal.signal(signal.SIGINT, lambda *_: None)  # this thread waits on: only the worker speaks
with ThreadPoolExecutor(1) as pool:
    future = pool.submit(processes.run_probe, Path({str(tmp_path)!r}), "work",
                         {{"how": "ctrl-c"}})
    try:
        print("answer", future.result())
    except KeyboardInterrupt:
        print("interrupted")
"""
    (tmp_path / "probe.py").write_text(ENDING_PROBE)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, start_new_session=True)  # its own group: not pytest's
    assert done.stdout.strip() == "interrupted", done.stdout + done.stderr


def test_a_long_step_says_it_is_still_running():
    said: list[str] = []
    with processes.still_running(said.append, "counting instructions", every=0.2):
        time.sleep(0.7)
    assert said and said[0].startswith("counting instructions (still running after 0 s)")
    assert len(said) >= 2 and said[-1].endswith(" s)")


# A probe stand-in that says where and how it ran.
WHERE_PROBE = r'''
import json, os, sys
preloaded = "torch" in sys.modules  # before this script imported anything of its own
command, request, result = sys.argv[1:]
asked = json.load(open(request))
if asked["how"] == "sleep":
    json.dump({"pid": os.getpid()}, open(asked["pid_file"], "w"))
    import time
    time.sleep(60)
json.dump({"status": "ok", "preloaded": preloaded, "first_path": sys.path[0],
           "grid": os.environ.get("SPYRE_REGRESS_GRID"), "cwd": os.getcwd(),
           "pythonpath": os.environ.get("PYTHONPATH"), "safe_path": sys.flags.safe_path},
          open(result, "w"))
'''


def _where(tmp_path, monkeypatch, how="report", timeout=120.0, **env) -> dict:
    script = tmp_path / "probe.py"
    script.write_text(WHERE_PROBE)
    monkeypatch.setattr(processes, "PROBE", script)
    checkout = tmp_path / "checkout"
    checkout.mkdir(exist_ok=True)
    return processes.run_probe(checkout, "sample", {"how": how,
                                                    "pid_file": str(tmp_path / "pid.json")},
                               timeout=timeout, env={"SPYRE_REGRESS_GRID": "demo", **env})


def test_a_probe_is_forked_from_a_server_that_imported_torch_and_runs_as_python_p(
        tmp_path, monkeypatch):
    """What `python -P probe.py` with PYTHONPATH=checkout gives a probe, the fork server
    gives it too, minus the imports; with the switch off, a fresh interpreter."""
    for answer in (_where(tmp_path, monkeypatch), _where(tmp_path, monkeypatch)):
        assert answer["preloaded"] is True
        assert answer["first_path"] == str(tmp_path / "checkout")
        assert answer["pythonpath"] == str(tmp_path / "checkout")
        assert answer["grid"] == "demo" and answer["safe_path"] is True
        assert Path(answer["cwd"]).name.startswith("spyre-probe-")
    fresh = _where(tmp_path, monkeypatch, **{processes.FORKSERVER_SWITCH: "0"})
    assert fresh["preloaded"] is False
    assert fresh["first_path"] == str(tmp_path / "checkout") and fresh["grid"] == "demo"


@pytest.mark.slow  # over 4 s: out of the quick loop, still in CI
def test_a_forked_probe_that_overruns_is_killed_and_reported_as_timed_out(tmp_path,
                                                                          monkeypatch):
    # The fork server started first, so the short timeout is all the sleeping probe's.
    assert _where(tmp_path, monkeypatch)["preloaded"] is True
    answer = _where(tmp_path, monkeypatch, how="sleep", timeout=2.0)
    assert answer == {"status": "failed", "detail": "probe timed out after 2 s"}
    pid = json.loads((tmp_path / "pid.json").read_text())["pid"]
    assert not Path(f"/proc/{pid}").exists()  # killed, and reaped by its server
    assert _where(tmp_path, monkeypatch)["preloaded"] is True  # the server still serves
