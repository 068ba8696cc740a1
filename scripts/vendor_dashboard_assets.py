"""Fetch the JavaScript and CSS asv's dashboard loads from public CDNs, from the npm registry,
into spyre_regress/dashboard_assets/, so `spyre-regress nightly` can publish a dashboard that
works with no network (spyre_regress/dashboard.py).

    python scripts/vendor_dashboard_assets.py          # needs npm and the npm registry

Run it when the pinned asv changes: it reads the CDN references of the installed asv's
www/index.html, fetches each package with `npm pack` (the registry's own client), copies the
file and the package's license text, and writes assets.json: per CDN address the file, the
package and version it came from, its license, its SHA-256, and whether it is byte for byte
the file asv pins (its Subresource Integrity hash). Where npm has no identical file the
nearest is taken and the manifest says so (`same_as_cdn: false`, with why).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import asv

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "spyre_regress" / "dashboard_assets"
DASHBOARD_ASSETS_VERSION = 1
# CDN address -> (npm package@version, file inside the package, why it differs if it does)
SOURCES = {
    "https://code.jquery.com/jquery-3.3.1.min.js": ("jquery@3.3.1", "dist/jquery.min.js", ""),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js":
        ("flot@0.8.3", "jquery.flot.js", "npm ships flot 0.8.3 unminified; cdnjs minified it"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js":
        ("flot@0.8.3", "jquery.flot.time.js",
         "npm ships flot 0.8.3 unminified; cdnjs minified it"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js":
        ("flot@0.8.3", "jquery.flot.selection.js",
         "npm ships flot 0.8.3 unminified; cdnjs minified it"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js":
        ("flot@0.8.3", "jquery.flot.categories.js",
         "npm ships flot 0.8.3 unminified; cdnjs minified it"),
    "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js":
        ("flot-orderbars@1.0.0", "js/jquery.flot.orderBars.js", ""),
    "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js":
        ("stupid-table-plugin@1.1.3", "stupidtable.min.js",
         "npm has stupid-table-plugin 1.1.3 only, not cdnjs's 1.0.1 (same author and API: "
         "stupidtable(), stupidsort())"),
    "https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js":
        ("blueimp-md5@2.19.0", "js/md5.min.js", ""),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js":
        ("bootstrap@3.1.1", "dist/js/bootstrap.min.js", ""),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css":
        ("bootstrap@3.1.1", "dist/css/bootstrap.min.css", ""),
}
LICENSE_FILES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "MIT-LICENSE.txt")


def cdn_references(index_html: str) -> dict[str, str | None]:
    """Every http(s) script or stylesheet of asv's page, with its integrity hash if any."""
    found = {}
    for tag in re.findall(r"<(?:script|link)\b[^>]*>", index_html):
        address = re.search(r'(?:src|href)="(https?://[^"]+)"', tag)
        if address:
            integrity = re.search(r'integrity="([^"]+)"', tag)
            found[address.group(1)] = integrity.group(1) if integrity else None
    return found


def sri(data: bytes, algorithm: str) -> str:
    return f"{algorithm}-" + base64.b64encode(hashlib.new(algorithm, data).digest()).decode()


def license_name(metadata: dict, text: Path | None) -> str:
    """The package's SPDX name: package.json's `license` (a string, or an object with a
    `type` in older packages), else what its license text is."""
    declared = metadata.get("license")
    if isinstance(declared, dict):
        declared = declared.get("type")
    if declared:
        return str(declared)
    if text is not None and "Permission is hereby granted, free of charge" in text.read_text():
        return "MIT"
    raise SystemExit(f"{metadata.get('name')}: no license found; look before vendoring it")


def licenses_page(assets: list[dict]) -> str:
    """LICENSES.md: each vendored package, its license and where its text is."""
    lines = ["# Third-party files of the offline dashboard", "",
             "Copied into the published dashboard's `vendor/` folder by "
             "`spyre_regress/dashboard.py`; fetched from the npm registry by "
             "`scripts/vendor_dashboard_assets.py`.", "",
             "| file | package | license | license text |", "|---|---|---|---|"]
    for a in assets:
        text = a["license_file"] or "none shipped in the package (package.json declares it)"
        lines.append(f"| {a['file']} | {a['package']} | {a['license']} | {text} |")
    return "\n".join(lines) + "\n"


def unpack(spec: str, scratch: Path) -> Path:
    """`npm pack SPEC`, unpacked: the package folder."""
    done = subprocess.run(["npm", "pack", spec, "--silent"], cwd=scratch, check=True,
                          capture_output=True, text=True)
    tarball = scratch / done.stdout.strip().splitlines()[-1]
    target = scratch / spec.replace("/", "_")
    with tarfile.open(tarball) as archive:
        archive.extractall(target, filter="data")
    return target / "package"


def main() -> int:
    page = (Path(asv.__file__).parent / "www" / "index.html").read_text()
    wanted = cdn_references(page)
    unknown = sorted(set(wanted) - set(SOURCES))
    if unknown:
        print(f"asv {asv.__version__} loads {unknown}: add them to SOURCES", file=sys.stderr)
        return 1
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "licenses").mkdir(parents=True)
    assets, packages = [], {}
    with tempfile.TemporaryDirectory() as scratch:
        for address, integrity in wanted.items():
            spec, inside, why = SOURCES[address]
            if spec not in packages:
                packages[spec] = unpack(spec, Path(scratch))
            folder = packages[spec]
            data = (folder / inside).read_bytes()
            name = f"{spec.split('@')[0]}-{Path(inside).name}"
            (OUT / name).write_bytes(data)
            metadata = json.loads((folder / "package.json").read_text())
            license_text = next((folder / n for n in LICENSE_FILES if (folder / n).is_file()),
                                None)
            license_file = None
            if license_text is not None:
                license_file = f"licenses/{spec.split('@')[0]}-{license_text.name}"
                shutil.copy(license_text, OUT / license_file)
            same = integrity is not None and sri(data, integrity.split("-")[0]) == integrity
            assets.append({"url": address, "file": name, "package": spec,
                           "path_in_package": inside,
                           "license": license_name(metadata, license_text),
                           "license_file": license_file,
                           "sha256": hashlib.sha256(data).hexdigest(),
                           "cdn_integrity": integrity, "same_as_cdn": same,
                           "why_not_the_same": "" if same else why})
            if not same and not why:
                print(f"{address}: {spec} {inside} differs from the CDN's file", file=sys.stderr)
                return 1
    (OUT / "assets.json").write_text(json.dumps(
        {"version": DASHBOARD_ASSETS_VERSION, "asv": asv.__version__, "assets": assets},
        indent=1) + "\n")
    (OUT / "LICENSES.md").write_text(licenses_page(assets))
    print(f"wrote {len(assets)} assets to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
