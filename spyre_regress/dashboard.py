"""The asv dashboard, made to work with no network: its CDN scripts served from the output.

asv 0.6.6's `index.html` loads jQuery, flot, stupidtable, blueimp-md5 and Bootstrap from
public CDNs; with no network the page is blank ("Can not determine continental origin of
swallow"), and labs with accelerators are often offline. `make_offline` copies the same
releases, fetched once from the npm registry into `dashboard_assets/` (with their licenses;
scripts/vendor_dashboard_assets.py, assets.json says which file is byte for byte the CDN's),
into `<html>/vendor/` and points the page's tags at them. The page still reads its data with
XMLHttpRequest, which browsers refuse to a `file://` page, so it is opened through a local
server: `python -m http.server -d DIR` or `asv preview`, neither needing the network.

The tags are rewritten with a regular expression rather than an HTML library: the page is
asv's own fixed template, only tags naming a vendored address are touched, and everything
else must stay byte for byte as asv wrote it (a parser's serializer would reformat it).
"""

from __future__ import annotations

import importlib.resources
import json
import re
import shutil
from pathlib import Path

from regressions.errors import SpyreRegressError

DASHBOARD_ASSETS_VERSION = 1  # dashboard_assets/assets.json
VENDOR = "vendor"
PAGES = ("index.html", "error.html")
# what a tag loaded from a CDN carries that a local file must not: an integrity check
# against the CDN's file (some vendored files are the same release unminified) and CORS mode,
# which a page from a local server does not need
_CDN_ATTRIBUTES = re.compile(r'\s(?:integrity|crossorigin|referrerpolicy)="[^"]*"')
_TAG = re.compile(r"<(?:script|link)\b[^>]*>")


def assets_dir() -> Path:
    return Path(str(importlib.resources.files("spyre_regress").joinpath("dashboard_assets")))


def manifest() -> dict:
    """dashboard_assets/assets.json: per CDN address, the vendored file and its source."""
    document = json.loads((assets_dir() / "assets.json").read_text())
    if document.get("version") != DASHBOARD_ASSETS_VERSION:
        raise SpyreRegressError(f"dashboard assets version {document.get('version')!r} is not "
                                f"{DASHBOARD_ASSETS_VERSION}; reinstall spyre-regress")
    return document


def local_page(page: str, files: dict[str, str]) -> str:
    """`page` with each tag that loads a vendored address loading `vendor/<file>` instead."""

    def rewrite(match: re.Match) -> str:
        tag = match.group(0)
        for address, name in files.items():
            if f'"{address}"' in tag:
                return _CDN_ATTRIBUTES.sub("", tag.replace(f'"{address}"',
                                                           f'"{VENDOR}/{name}"'))
        return tag

    return _TAG.sub(rewrite, page)


def remote_references(page: str) -> list[str]:
    """Scripts and stylesheets the page still loads from the network."""
    return [m.group(1) for tag in _TAG.findall(page)
            if (m := re.search(r'(?:src|href)="(https?://[^"]+)"', tag))]


def make_offline(html_dir: Path) -> list[str]:
    """Vendor the dashboard's CDN files into `html_dir` (asv publish's output) and rewrite
    its pages to load them; returns what the pages still load from the network (nothing
    with the asv this project pins)."""
    html_dir = Path(html_dir)
    assets = manifest()["assets"]
    vendor = html_dir / VENDOR
    vendor.mkdir(exist_ok=True)
    source = assets_dir()
    for asset in assets:
        shutil.copy(source / asset["file"], vendor / asset["file"])
    shutil.copytree(source / "licenses", vendor / "licenses", dirs_exist_ok=True)
    shutil.copy(source / "LICENSES.md", vendor / "LICENSES.md")
    files = {a["url"]: a["file"] for a in assets}
    remaining = []
    for name in PAGES:
        page = html_dir / name
        if page.is_file():
            text = local_page(page.read_text(), files)
            page.write_text(text)
            remaining += remote_references(text)
    return sorted(set(remaining))
