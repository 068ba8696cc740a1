"""The offline dashboard: every script and stylesheet asv's page loads from a CDN is vendored,
with its source and license, and the published page loads them from its own folder.
(tests/e2e/test_demo.py opens the demo's dashboard in headless Chromium with no network.)"""

from __future__ import annotations

import base64
import hashlib
import shutil
from pathlib import Path

import asv

from spyre_regress import dashboard

ASV_WWW = Path(asv.__file__).parent / "www"


def test_every_cdn_file_of_asvs_page_is_vendored_with_its_license():
    page = (ASV_WWW / "index.html").read_text()
    remote = dashboard.remote_references(page)
    assets = {a["url"]: a for a in dashboard.manifest()["assets"]}
    assert remote and set(remote) == set(assets)  # asv 0.6.6 loads ten files from CDNs
    for asset in assets.values():
        data = (dashboard.assets_dir() / asset["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == asset["sha256"], asset["file"]
        assert asset["license"] == "MIT", asset
        assert asset["license_file"] is None or \
            (dashboard.assets_dir() / asset["license_file"]).is_file()
        algorithm = asset["cdn_integrity"].split("-")[0]
        digest = base64.b64encode(hashlib.new(algorithm, data).digest()).decode()
        # byte for byte the file asv's page pins, or the manifest says why not
        assert (f"{algorithm}-{digest}" == asset["cdn_integrity"]) == asset["same_as_cdn"]
        assert asset["same_as_cdn"] or asset["why_not_the_same"]
    assert sum(a["same_as_cdn"] for a in assets.values()) == 5


def test_the_published_page_loads_every_script_from_its_own_folder(tmp_path):
    html = tmp_path / "html"
    shutil.copytree(ASV_WWW, html)
    before = (html / "index.html").read_text()
    assert dashboard.make_offline(html) == []
    page = (html / "index.html").read_text()
    assert dashboard.remote_references(page) == [] and "integrity=" not in page
    for asset in dashboard.manifest()["assets"]:
        assert f'src="vendor/{asset["file"]}"' in page or \
            f'href="vendor/{asset["file"]}"' in page
        assert (html / "vendor" / asset["file"]).is_file()
    assert (html / "vendor" / "LICENSES.md").is_file()
    # everything else of asv's page is as asv wrote it
    unchanged = [line for line in before.splitlines() if "https://cdn" not in line
                 and "code.jquery.com" not in line]
    assert all(line in page.splitlines() for line in unchanged)
    # publishing again (a later night) changes nothing more
    assert dashboard.make_offline(html) == [] and (html / "index.html").read_text() == page
