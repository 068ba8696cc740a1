"""Render a bundle's report.html in headless Chromium and save a PNG screenshot.

    python scripts/screenshot_report.py BUNDLE_OR_HTML [--out PNG] [--height 2400]
    python scripts/screenshot_report.py --example OUT_DIR   # build an emulated bundle first

The browser runs with networking switched off as far as its flags allow and with a fresh
profile, so the screenshot also shows that the page needs nothing from the network. Exit code
2 means no Chromium was found (install Debian's `chromium` package).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND")


def find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def screenshot(html: Path, png: Path, width: int = 1280, height: int = 2400,
               timeout: float = 120.0) -> Path:
    """Screenshot `html` into `png` with headless Chromium; raises if it fails."""
    browser = find_browser()
    if browser is None:
        raise FileNotFoundError("no chromium found; apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        command = [browser, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
                   f"--window-size={width},{height}", html.resolve().as_uri()]
        subprocess.run(command, check=True, timeout=timeout, capture_output=True)
    if not png.is_file():
        raise RuntimeError(f"chromium wrote no screenshot at {png}")
    return png


def example_bundle(out_dir: Path) -> Path:
    """An emulated device-time bundle (fusion switched off), for a look at the layout."""
    from reports import write_bundle
    from spyre_regress import example

    investigation, _ = example.fusion_example(out_dir / "probe")
    return write_bundle(investigation, out_dir)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", nargs="?", type=Path, help="a bundle folder or report.html")
    parser.add_argument("--example", type=Path, metavar="OUT_DIR",
                        help="build an emulated bundle in OUT_DIR and screenshot it")
    parser.add_argument("--out", type=Path,
                        help="PNG path (default: <bundle folder>.png, beside the folder)")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2400)
    args = parser.parse_args(argv)
    if find_browser() is None:
        print("no chromium found; install it (apt-get install -y chromium)", file=sys.stderr)
        return 2
    if args.example is not None:
        target = example_bundle(args.example)
    elif args.target is not None:
        target = args.target
    else:
        parser.error("give a bundle folder, a report.html, or --example OUT_DIR")
    html = target / "report.html" if target.is_dir() else target
    png = args.out or html.parent.with_name(f"{html.parent.name}.png")
    screenshot(html, png, args.width, args.height)
    print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
