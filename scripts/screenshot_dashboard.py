"""Open a published asv dashboard in headless Chromium with no network, and save what it shows.

    python scripts/screenshot_dashboard.py HTML_DIR [--out PNG] [--graph BENCHMARK]

The check runs in a network namespace of its own (`unshare --net`, as root: only the loopback
device exists, so nothing outside this machine can answer) with the dashboard served on
127.0.0.1 (browsers refuse a file:// page's XMLHttpRequest for its JSON). It prints one JSON
line: how the network was cut off, how many flot graphs the page drew, whether asv's
script-load error page appeared, and the screenshot's path. `--graph` opens one benchmark's
graph page (`index.html#NAME`) instead of the summary grid. Exit 2: no Chromium (install
Debian's `chromium` package); 3: no network namespace could be made (not root, or no unshare).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshot_report import FLAGS, find_browser  # noqa: E402

# the report screenshot's flags, less its name-resolution block: here the namespace itself
# cuts the network off, and the page comes from 127.0.0.1
BROWSER_FLAGS = (*(f for f in FLAGS if not f.startswith("--host-resolver-rules")),
                 "--no-proxy-server")
ISOLATED = "SPYRE_REGRESS_NETNS"  # set in the child that runs inside the namespace
VIRTUAL_TIME_MS = "20000"  # let the page's requests and drawing finish before the capture


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # requests are not the output
        pass


def chromium(browser: str, url: str, *extra: str, timeout: float = 180) -> str:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        done = subprocess.run([browser, *BROWSER_FLAGS, f"--user-data-dir={profile}",
                               f"--virtual-time-budget={VIRTUAL_TIME_MS}", *extra, url],
                              capture_output=True, text=True, timeout=timeout, check=True)
    return done.stdout


def inside(html_dir: Path, png: Path, graph: str | None) -> dict:
    """The measurement, in the namespace: bring loopback up, serve, load, look."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    browser = find_browser()
    if browser is None:
        return {"error": "no chromium"}
    server, root = serve(html_dir)
    try:
        url = root + "index.html" + (f"#{graph}" if graph else "")
        dom = chromium(browser, url, "--dump-dom")
        chromium(browser, url, f"--screenshot={png}", "--window-size=1280,900")
    finally:
        server.shutdown()
    return {"network": f"own network namespace, interfaces {_interfaces()}",
            "graphs": dom.count('class="flot-base"'),
            "load_error": "continental origin of swallow" in dom,
            "screenshot": str(png)}


def _interfaces() -> list[str]:
    import socket

    return [name for _, name in socket.if_nameindex()]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html_dir", type=Path, help="asv publish's output (index.html)")
    parser.add_argument("--out", type=Path, default=Path("dashboard.png"))
    parser.add_argument("--graph", help="a benchmark name: its graph page")
    args = parser.parse_args(argv)
    if find_browser() is None:
        print("no chromium found; apt-get install -y chromium", file=sys.stderr)
        return 2
    if os.environ.get(ISOLATED):
        print(json.dumps(inside(args.html_dir.resolve(), args.out.resolve(), args.graph)))
        return 0
    if shutil.which("unshare") is None or shutil.which("ip") is None or os.getuid() != 0:
        print("cannot cut the network off: needs root, unshare and ip (util-linux, iproute2)",
              file=sys.stderr)
        return 3
    return subprocess.run(["unshare", "--net", sys.executable, __file__, *argv],
                          env={**os.environ, ISOLATED: "1"}, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
