"""Install a torch-spyre checkout at any commit without its C++ build.

torch-spyre's `setup.py` always builds `torch_spyre._C` against closed runtime libraries and
downloads a C++ header at import time, and its build requirements (cmake, ninja, torch) make
an isolated `pip install` fetch a torch of its own. Its compiler's front half needs none of
that. This puts the checkout's Python package where an interpreter finds it, with what a real
install would give it besides: the `torch.backends` entry point (so `import torch` autoloads
torch-spyre, as it does after `pip install torch-spyre`), its pure-Python dependencies, and
spyre-regress's `_C` stand-in, installed behind any built extension by a `.pth` line.

Two ways, one script (standard library only: asv runs it in an environment that has
nothing of spyre-regress):

    python torch_spyre_install.py wheel CHECKOUT OUT_DIR
        a wheel of the checkout's package (asv's build command: asv keeps one per commit);
    python torch_spyre_install.py develop CHECKOUT SITE_PACKAGES
        the checkout itself on the path (a `.pth` file), for working in a checkout.

Keep such an environment apart from any other torch work: with the entry point installed,
every `import torch` there imports torch-spyre.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

NAME = "torch_spyre"
STAND_IN = "torch_spyre_stand_in"
MODULES = ("torch_spyre_layout", STAND_IN)  # spyre-regress's modules the stand-in is
# torch-spyre's pure-Python dependencies (its pyproject's `dependencies` but torch, which the
# environment pins): regex is imported by its compiler, numpy and psutil by its package.
REQUIRES = ("regex", "numpy", "psutil")
ENTRY_POINTS = "[torch.backends]\ntorch_spyre = torch_spyre:_autoload\n"
HOOK = f"import {STAND_IN}; {STAND_IN}.install()\n"
SKIPPED = ("csrc", "__pycache__", ".claude")  # C++ sources, bytecode, editor files


def version(checkout: Path) -> str:
    """`<torch_spyre/version.py's version>+g<commit>`: a distinct version per commit."""
    namespace: dict = {}
    exec((checkout / NAME / "version.py").read_text(), namespace)  # noqa: S102 (its own file)
    try:
        sha = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short=10", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        sha = "unknown"
    return f"{namespace['__version__']}+g{sha}"


def metadata(release: str) -> str:
    return "".join(["Metadata-Version: 2.1\n", f"Name: {NAME}\n", f"Version: {release}\n",
                    "Summary: torch-spyre's Python package, installed without its C++ "
                    "build (spyre-regress)\n",
                    *(f"Requires-Dist: {r}\n" for r in REQUIRES)])


def package_files(checkout: Path) -> list[Path]:
    """The package's files, relative to the checkout: everything but C++ sources and
    bytecode (the compiler reads templates and tables beside its modules)."""
    root = checkout / NAME
    if not (root / "__init__.py").is_file():
        raise SystemExit(f"{checkout} has no {NAME}/__init__.py: not a torch-spyre checkout")
    return sorted(p.relative_to(checkout) for p in root.rglob("*")
                  if p.is_file() and not set(p.relative_to(root).parts) & set(SKIPPED))


def stand_in_sources() -> dict[str, str]:
    """The stand-in's modules, by file name: beside this script (where the tool ships them)
    or in the `benchmarks/` folder beside it (a suite written out by `spyre-regress suite`)."""
    here = Path(__file__).resolve().parent
    for folder in (here, here / "benchmarks"):
        if all((folder / f"{m}.py").is_file() for m in MODULES):
            return {f"{m}.py": (folder / f"{m}.py").read_text() for m in MODULES}
    raise SystemExit(f"{', '.join(MODULES)} not found beside {here}: reinstall spyre-regress "
                     "or write the suite out again")


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def wheel(checkout: Path, out_dir: Path) -> Path:
    """The checkout's package as a wheel in `out_dir`; its path."""
    files: dict[str, bytes] = {str(p): (checkout / p).read_bytes()
                               for p in package_files(checkout)}
    release = version(checkout)
    info = f"{NAME}-{release}.dist-info"
    files.update({name: text.encode() for name, text in stand_in_sources().items()})
    files[f"{STAND_IN}.pth"] = HOOK.encode()
    files[f"{info}/METADATA"] = metadata(release).encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: spyre-regress\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    files[f"{info}/entry_points.txt"] = ENTRY_POINTS.encode()
    record = "".join(_record_line(name, data) for name, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{NAME}-{release}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return target


def develop(checkout: Path, site_packages: Path) -> None:
    """The checkout on `site_packages`' path, with the entry point and the stand-in."""
    package_files(checkout)  # a torch-spyre checkout, or a clear exit
    release = version(checkout)
    for old in site_packages.glob(f"{NAME}-*.dist-info"):
        shutil.rmtree(old)
    info = site_packages / f"{NAME}-{release}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(metadata(release))
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    (info / "INSTALLER").write_text("spyre-regress\n")
    (info / "RECORD").write_text("")
    (site_packages / f"{NAME}.pth").write_text(f"{checkout.resolve()}\n")
    for name, text in stand_in_sources().items():
        (site_packages / name).write_text(text)
    (site_packages / f"{STAND_IN}.pth").write_text(HOOK)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in ("wheel", "develop"):
        print(__doc__.split("\n\n")[2], file=sys.stderr)
        return 2
    mode, checkout, target = argv[0], Path(argv[1]), Path(argv[2])
    if mode == "wheel":
        print(wheel(checkout, target))
    else:
        develop(checkout, target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
