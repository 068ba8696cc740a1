"""The `_C` stand-in for torch-spyre (backends/torch_spyre_stand_in.py, torch_spyre_layout.py)
and the installer that puts a checkout on the path without its build
(backends/torch_spyre_install.py). No torch-spyre needed: the tests build tiny packages of
their own; tests/e2e/test_torch_spyre.py compiles with the real one."""

from __future__ import annotations

import copy
import json
import math
import random
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from conftest import load_companion

from backends import interface
from spyre_sim import dlfloat

BACKENDS = Path(interface.__file__).parent


layout = load_companion("torch_spyre_layout")
stand_in = load_companion("torch_spyre_stand_in")
install = load_companion("torch_spyre_install")


def test_the_generic_stick_layout_tiles_the_last_dimension_into_sticks_last():
    """csrc/spyre_tensor_impl.cpp's generic layout: the stick dimension's sticks outside the
    first dimension, 64 fp16 elements to a 128-byte stick; strides in host elements."""
    found = layout.SpyreTensorLayout([128, 512], torch.float16)
    assert found.device_size == [8, 128, 64]
    assert found.stride_map == [64, 512, 1]
    assert found.device_dtype == layout.DataFormats.SEN169_FP16
    three = layout.SpyreTensorLayout([2, 3, 100], torch.float32)
    assert three.device_size == [3, 4, 2, 32]  # ceil(100 / 32) sticks of 32 fp32
    assert three.stride_map == [100, 32, 300, 1]
    # a dimension of size 1 has no stride; a scalar is one stick
    assert layout.SpyreTensorLayout([1, 64], torch.float16).stride_map == [64, -1, 1]
    scalar = layout.SpyreTensorLayout([], torch.float16)
    assert (scalar.device_size, scalar.stride_map) == ([1, 64], [-1, -1])


def test_a_layout_prints_as_the_extension_does_and_evaluates_back():
    """Generated code embeds the layout's repr and evaluates it (torch-spyre's wrapper)."""
    made = layout.SpyreTensorLayout([4, 100], torch.float16).with_element_arrangement(
        layout.ElementArrangement.EXX2)
    text = repr(made)
    assert text == ("SpyreTensorLayout(device_size=[2, 4, 64], stride_map =[64, 100, 1], "
                    "device_dtype=DataFormats.SEN169_FP16, "
                    "element_arrangement=ElementArrangement.EXX2)")
    names = {"SpyreTensorLayout": layout.SpyreTensorLayout, "DataFormats": layout.DataFormats,
             "ElementArrangement": layout.ElementArrangement}
    assert eval(text, names) == made  # noqa: S307 (the text this test just made)
    assert hash(eval(text, names)) == hash(made)  # noqa: S307


def test_layouts_pickle_in_format_three_and_read_the_older_formats():
    """The extension's pickle state (pickling itself names the class's module,
    `torch_spyre._C`, which only a torch-spyre process has; a copy goes through the same
    state)."""
    made = layout.SpyreTensorLayout([64, 64], torch.float32)
    assert copy.deepcopy(made) == made and copy.deepcopy(made) is not made
    assert made.__getstate__()[0] == 3
    old = object.__new__(layout.SpyreTensorLayout)
    old.__setstate__((1, [2, 64, 32], [9, 9, 9], [32, 64, 1], layout.DataFormats.IEEE_FP32))
    assert old.stride_map == [32, 64, 1] and old.element_arrangement.name == "STANDARD"
    with pytest.raises(ValueError, match="pickle"):
        old.__setstate__((4, [], [], layout.DataFormats.IEEE_FP32))


def test_enums_are_spelled_as_pybind11_spells_them_and_hash_their_values():
    fp16 = layout.DataFormats.SEN169_FP16
    assert (str(fp16), repr(fp16), int(fp16)) == ("DataFormats.SEN169_FP16",
                                                   "<DataFormats.SEN169_FP16: 0>", 0)
    assert hash(fp16) == hash(0)  # set order must not follow the string-hash seed
    assert fp16 != 0 and fp16 == layout.DataFormats(0)
    assert layout.DataFormats.IEEE_INT32.elems_per_stick() == 32  # open code
    assert layout.DataFormats.INVALID.elems_per_stick() == 0  # "not supported"


def test_host_dtypes_map_to_the_device_formats_of_the_open_table():
    assert layout.get_device_dtype(torch.int64) == layout.DataFormats.IEEE_INT32
    assert layout.get_device_dtype(torch.bfloat16) == layout.DataFormats.SEN169_FP16
    assert layout.get_device_dtype(torch.float64) == layout.DataFormats.INVALID
    assert layout.get_elem_in_stick(torch.float16) == 64


def test_constants_encode_as_dlfloat16_bit_for_bit_with_spyre_sim():
    """The stand-in's guess at the closed encoder is the format spyre_sim models: the same
    code for every value, edge cases included (flush to zero, NINF, ties to even)."""
    rng = random.Random(0)
    values = [0.0, -0.0, 1.0, -2.002, 2.0 ** -31, 2.0 ** -31 * (1 + 2 ** -10),
              2.0 ** -31 * (1 + 2 ** -9), 8573157376.0, 8.6e9, 1e40, math.inf, math.nan]
    values += [math.ldexp(rng.random(), rng.randint(-40, 40)) * rng.choice((1, -1))
               for _ in range(3000)]
    ours = [layout.encode_constant(v, layout.DataFormats.SEN169_FP16) for v in values]
    theirs = dlfloat.encode(torch.tensor(values, dtype=torch.float64).float()).tolist()
    assert ours == theirs
    assert layout.encode_constant(1.0, layout.DataFormats.IEEE_FP32) == 0x3F800000


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _python(code: str, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": f"{path}:{BACKENDS}", "PATH": "/usr/bin:/bin"},
                          timeout=300)


def test_the_stand_in_answers_only_where_no_built_extension_is_in_the_package(tmp_path):
    absent = _package(tmp_path / "a", {"torch_spyre/__init__.py": ""})
    done = _python("import torch_spyre_stand_in as s; s.install()\n"
                   "import torch_spyre._C as C\n"
                   "print(C.IS_STAND_IN, C.device_count(), C.DataFormats.SEN169_FP16)", absent)
    assert done.stdout.split() == ["True", "0", "DataFormats.SEN169_FP16"], done.stderr
    built = _package(tmp_path / "b", {"torch_spyre/__init__.py": "",
                                      "torch_spyre/_C.py": "BUILT = True\n"})
    done = _python("import torch_spyre_stand_in as s; s.install()\n"
                   "import torch_spyre._C as C; print(C.BUILT, s.is_stand_in(C))", built)
    assert done.stdout.split() == ["True", "False"], done.stderr


def test_device_calls_and_unknown_names_fail_naming_the_symbol(tmp_path):
    checkout = _package(tmp_path, {"torch_spyre/__init__.py": ""})
    done = _python("import torch_spyre_stand_in as s; s.install()\n"
                   "import torch_spyre._C as C\n"
                   "try:\n    C.launch_jobplan(None, [])\n"
                   "except RuntimeError as e:\n    print('device:', e)\n"
                   "try:\n    from torch_spyre._C import not_a_name\n"
                   "except ImportError as e:\n    print('import:', e)", checkout)
    assert "device: torch_spyre._C.launch_jobplan needs the Spyre device runtime" in done.stdout
    assert "import: cannot import name 'not_a_name'" in done.stdout, done.stderr


def test_the_names_check_finds_every_way_a_package_reaches_the_extension(tmp_path):
    package = _package(tmp_path, {
        "torch_spyre/__init__.py": "from torch_spyre import _C\n_C.device_count()\n"
                                   "torch._C._dispatch_has_kernel('x')\n",
        "torch_spyre/a/b.py": "from torch_spyre._C import SpyreTensorLayout, brand_new\n",
        "torch_spyre/a/c.py": "from .._C import encode_constant\nself._C.set_device(0)\n",
        "torch_spyre/w.py": "line = 'from torch_spyre._C import reinterpret_tensor, gen_only'\n",
    }) / "torch_spyre"
    used = stand_in.imported_names(package)
    assert set(used) == {"device_count", "SpyreTensorLayout", "brand_new", "encode_constant",
                         "set_device", "reinterpret_tensor", "gen_only"}
    assert used["brand_new"] == ["torch_spyre/a/b.py"]
    assert set(stand_in.missing_names(package)) == {"brand_new", "gen_only"}


def _checkout(root: Path) -> Path:
    checkout = _package(root, {"torch_spyre/__init__.py": "def _autoload():\n    pass\n",
                               "torch_spyre/version.py": "__version__ = '1.2.3'\n",
                               "torch_spyre/csrc/x.cpp": "int x;\n",
                               "torch_spyre/codegen/table.json": "{}\n"})
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    return checkout


def test_a_checkout_becomes_a_wheel_with_its_entry_point_and_the_stand_in(tmp_path):
    wheel = install.wheel(_checkout(tmp_path / "checkout"), tmp_path / "out")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = "torch_spyre-1.2.3+gunknown.dist-info"
        assert {"torch_spyre/__init__.py", "torch_spyre/codegen/table.json",
                "torch_spyre_stand_in.py", "torch_spyre_layout.py", "torch_spyre_stand_in.pth",
                f"{info}/entry_points.txt", f"{info}/RECORD"} <= names
        assert "torch_spyre/csrc/x.cpp" not in names  # C++ sources: the build is not made
        assert "torch_spyre = torch_spyre:_autoload" in archive.read(
            f"{info}/entry_points.txt").decode()
        assert "Requires-Dist: regex" in archive.read(f"{info}/METADATA").decode()
        record = archive.read(f"{info}/RECORD").decode().splitlines()
        assert len(record) == len(names) and all(line.count(",") == 2 for line in record)


def test_develop_puts_the_checkout_itself_on_the_path(tmp_path):
    checkout, site = _checkout(tmp_path / "checkout"), tmp_path / "site"
    site.mkdir()
    install.develop(checkout, site)
    assert (site / "torch_spyre.pth").read_text().strip() == str(checkout.resolve())
    assert (site / "torch_spyre_stand_in.pth").read_text() == install.HOOK
    (info,) = site.glob("torch_spyre-*.dist-info")
    assert json.dumps(install.ENTRY_POINTS) and (info / "entry_points.txt").read_text() == \
        install.ENTRY_POINTS
    assert install.main(["develop"]) == 2  # usage


def test_a_directory_that_is_no_torch_spyre_checkout_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="not a torch-spyre checkout"):
        install.wheel(tmp_path, tmp_path / "out")
