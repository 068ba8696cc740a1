"""torch-spyre's device data model, re-implemented in Python for spyre-regress's `_C`
stand-in (`torch_spyre_stand_in.py`): the enums, the tensor layout, the dtype tables and the
constant encoding a compile reads from `torch_spyre._C`.

Written from the extension's public interface (`torch_spyre/_C.pyi`) and its open C++
(`csrc/spyre_tensor_impl.cpp`: the generic stick layout and the stride map;
`csrc/types_mapping.h`: the device format of each host dtype). Two values live in closed
headers and are guesses, marked `GUESS` where they are defined: the stick size of each data
format but IEEE_INT32 (`_ELEMS_PER_STICK`), and the 16-bit constant encoding
(`encode_constant`). Standard library only: torch is imported where a layout is built from a
torch dtype.
"""

from __future__ import annotations

import enum
import math
import struct
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

MODULE_NAME = "torch_spyre._C"  # the module these classes say they belong to (pickling)


class _PybindEnum(enum.Enum):
    """An enum as pybind11 spells one: `str()` `Cls.NAME`, `repr()` `<Cls.NAME: v>`,
    `int()` and hash the value, equal only to members of its own class."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {self.value}>"

    def __int__(self) -> int:
        return int(self.value)

    def __index__(self) -> int:
        return int(self.value)

    def __hash__(self) -> int:
        return hash(int(self.value))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.value == self.value

    def __ne__(self, other: object) -> bool:
        return not self == other


class DataFormats(_PybindEnum):
    SEN169_FP16 = 0
    IEEE_FP32 = 1
    INVALID = 2
    SEN143_FP8 = 3
    SEN152_FP8 = 4
    SEN153_FP9 = 5
    SENINT2 = 6
    SENINT4 = 7
    SENINT8 = 8
    SENINT16 = 9
    SENINT24 = 10
    IEEE_INT64 = 11
    IEEE_INT32 = 12
    SENUINT32 = 13
    SENUINT2 = 14
    IEEE_FP16 = 15
    BOOL = 16
    BFLOAT16 = 17
    SEN18F_FP24 = 18

    def elems_per_stick(self) -> int:
        return _ELEMS_PER_STICK.get(self, 0)


BYTES_IN_STICK = 128  # open: csrc/spyre_tensor_impl.cpp
# GUESS: the closed dataFormatToStickSize, as a 128-byte stick over each format's element
# size; formats whose element size does not divide 128 bytes (SENINT24, SEN18F_FP24) and
# INVALID get 0, which torch-spyre's is_supported_dtype reads as "not supported".
_ELEMS_PER_STICK = {
    DataFormats.SEN169_FP16: 64, DataFormats.IEEE_FP16: 64, DataFormats.BFLOAT16: 64,
    DataFormats.SENINT16: 64, DataFormats.BOOL: 64,
    DataFormats.IEEE_FP32: 32, DataFormats.SENUINT32: 32,
    DataFormats.IEEE_INT32: 32,  # open code: elems_per_stick's special case
    DataFormats.IEEE_INT64: 16,
    DataFormats.SEN143_FP8: 128, DataFormats.SEN152_FP8: 128, DataFormats.SEN153_FP9: 128,
    DataFormats.SENINT8: 128, DataFormats.SENINT4: 256, DataFormats.SENINT2: 512,
    DataFormats.SENUINT2: 512,
}


class ElementArrangement(_PybindEnum):
    STANDARD = 0
    DL16_TO_FP32 = 1
    QFP8CH = 2
    EXX2 = 3
    FP32_TO_DL16 = 4
    QFP8WT = 5


class SymbolicArgKind(_PybindEnum):
    kAddress = 0
    kDimension = 1


for _enum in (DataFormats, ElementArrangement, SymbolicArgKind):
    _enum.__module__ = MODULE_NAME


# open: csrc/types_mapping.h, the device format each host dtype is stored in, by torch's
# name for the dtype
_DEVICE_FORMATS = {
    "float16": DataFormats.SEN169_FP16, "float32": DataFormats.IEEE_FP32,
    "int8": DataFormats.SENINT8, "int16": DataFormats.SENINT16,
    "int32": DataFormats.IEEE_INT32, "int64": DataFormats.IEEE_INT32,
    "bool": DataFormats.SEN169_FP16, "bfloat16": DataFormats.SEN169_FP16,
    "uint8": DataFormats.SENUINT32, "float8_e4m3fn": DataFormats.SEN143_FP8,
    "float8_e5m2fnuz": DataFormats.SEN152_FP8, "quint8": DataFormats.SENUINT32,
    "qint8": DataFormats.SENINT8, "quint4x2": DataFormats.SENUINT2,
    "quint2x4": DataFormats.SENUINT2,
}


def get_device_dtype(dtype: torch.dtype) -> DataFormats:
    return _DEVICE_FORMATS.get(str(dtype).removeprefix("torch."), DataFormats.INVALID)


def get_elem_in_stick(dtype: torch.dtype) -> int:
    return get_device_dtype(dtype).elems_per_stick()


def _stick_dim_map(dim_order: Sequence[int]) -> list[int]:
    """The generic stick layout: every host dimension but the first in order, then the first,
    then the stick dimension (the last) again; a trailing -1 marks sparse sticks."""
    rank = len(dim_order)
    if rank == 7 and dim_order[6] != -1:
        raise RuntimeError("7-element dim_order is only valid for sparse-stick (last entry "
                           "must be -1)")
    if not 1 <= rank <= 7:
        raise RuntimeError(f"Unsupported tensor rank: {rank}")
    return [*dim_order[1:], dim_order[0], dim_order[-1]]


def _stride_map(dim_map: Sequence[int], host_size: Sequence[int],
                host_stride: Sequence[int], device_size: Sequence[int]) -> list[int]:
    """Each device dimension's stride in host elements, innermost first; -1 where the host
    dimension has size 1 (or is the sparse marker)."""
    stride_map = [-1] * len(dim_map)
    outer: dict[int, int] = {}  # host dim -> the stride its next tile outward takes
    for j in range(len(dim_map) - 1, -1, -1):
        d = dim_map[j]
        if d == -1 or host_size[d] == 1:
            continue
        stride_map[j] = outer.get(d, host_stride[d])
        outer[d] = stride_map[j] * device_size[j]
    return stride_map


def _row_major_strides(size: Sequence[int]) -> list[int]:
    strides, stride = [0] * len(size), 1
    for i in range(len(size) - 1, -1, -1):
        strides[i], stride = stride, stride * size[i]
    return strides


class SpyreTensorLayout:
    """A tensor's layout in device memory: the tiled device size (stick dimension last),
    each device dimension's host stride, the device data format and element arrangement."""

    __module__ = MODULE_NAME
    _PICKLE_VERSION = 3

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        device = ("device_size", "stride_map", "device_dtype", "element_arrangement")
        values = dict(zip(device, args, strict=False)) | kwargs
        if isinstance(values.get("device_dtype"), DataFormats):  # the compiler's own
            self._set(values["device_size"], values["stride_map"], values["device_dtype"],
                      values.get("element_arrangement", ElementArrangement.STANDARD))
            return
        host = ("host_size", "host_strides", "dtype", "dim_order", "element_arrangement")
        values = dict(zip(host, args, strict=False)) | kwargs
        if len(args) == 2 and not kwargs.keys() - {"host_size", "dtype"}:
            values = {"host_size": args[0], "dtype": args[1]}
        import torch

        host_size = [int(s) for s in values["host_size"]]
        dtype = values["dtype"]
        if not isinstance(dtype, torch.dtype):
            raise TypeError("SpyreTensorLayout(): incompatible constructor arguments: "
                            f"{args!r} {kwargs!r}")
        strides = values.get("host_strides")
        dim_order = values.get("dim_order")
        self._init_host(host_size,
                        _row_major_strides(host_size) if strides is None else list(strides),
                        dtype, list(range(len(host_size))) if dim_order is None
                        else [int(d) for d in dim_order])
        self._arrangement = values.get("element_arrangement", ElementArrangement.STANDARD)

    def _set(self, device_size: Sequence[int], stride_map: Sequence[int],
             device_dtype: DataFormats, arrangement: ElementArrangement) -> None:
        self._device_size = [int(s) for s in device_size]
        self._stride_map = [int(s) for s in stride_map]
        self._device_dtype = device_dtype
        self._arrangement = arrangement

    def _init_host(self, host_size: list[int], host_strides: list[int], dtype: torch.dtype,
                   dim_order: list[int]) -> None:
        if not (len(host_size) == len(dim_order) or (
                len(host_size) + 1 == len(dim_order) and dim_order[-1] == -1)):
            raise RuntimeError("Incompatible host_size and dim_order")
        self._device_dtype = get_device_dtype(dtype)
        self._arrangement = ElementArrangement.STANDARD
        per_stick = self._device_dtype.elems_per_stick()
        if not host_size:  # a scalar
            self._device_size, self._stride_map = [1, per_stick], [-1, -1]
            return
        dim_map = _stick_dim_map(dim_order)
        sparse = dim_order[-1] == -1
        stick_dim = dim_map[-1]
        device_size = []
        for dim in dim_map[:-1]:
            if dim != stick_dim:
                device_size.append(host_size[dim])
            elif sparse:
                device_size.append(1)
            else:
                device_size.append(math.ceil(host_size[stick_dim] / per_stick))
        device_size.append(per_stick)
        self._device_size = device_size
        self._stride_map = _stride_map(dim_map, host_size, host_strides, device_size)

    @property
    def device_size(self) -> list[int]:
        return list(self._device_size)

    @property
    def stride_map(self) -> list[int]:
        return list(self._stride_map)

    @property
    def device_dtype(self) -> DataFormats:
        return self._device_dtype

    @property
    def element_arrangement(self) -> ElementArrangement:
        return self._arrangement

    def elems_per_stick(self) -> int:
        return self._device_dtype.elems_per_stick()

    def with_element_arrangement(self, element_arrangement: ElementArrangement
                                 ) -> SpyreTensorLayout:
        return SpyreTensorLayout(self._device_size, self._stride_map, self._device_dtype,
                                 element_arrangement)

    def _key(self) -> tuple:
        return (tuple(self._device_size), tuple(self._stride_map), self._device_dtype.value,
                self._arrangement.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpyreTensorLayout) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        # the extension's toString, which generated code evaluates
        text = (f"SpyreTensorLayout(device_size={self._device_size}, stride_map "
                f"={self._stride_map}, device_dtype={self._device_dtype}")
        if self._arrangement != ElementArrangement.STANDARD:
            text += f", element_arrangement={self._arrangement}"
        return text + ")"

    __str__ = __repr__

    def __getstate__(self) -> tuple:
        return (self._PICKLE_VERSION, self.device_size, self.stride_map, self._device_dtype,
                self._arrangement)

    def __setstate__(self, state: tuple) -> None:
        version, *fields = state
        sizes = {1: 4, 2: 3, 3: 4}
        if version not in sizes or len(fields) != sizes[version]:
            raise ValueError(f"Unsupported SpyreTensorLayout pickle: version {version} with "
                             f"{len(fields)} fields")
        if version == 1:  # (device_size, dim_map, stride_map, device_dtype)
            fields = [fields[0], fields[2], fields[3]]
        arrangement = fields[3] if version == 3 else ElementArrangement.STANDARD
        self._set(fields[0], fields[1], fields[2], arrangement)


class SymbolicArg:
    __module__ = MODULE_NAME

    def __init__(self, kind: SymbolicArgKind, tensor_id: int, dim_index: int = -1,
                 value: int = -1) -> None:
        self.kind, self.tensor_id, self.dim_index, self.value = kind, tensor_id, dim_index, value

    def __repr__(self) -> str:
        return (f"SymbolicArg(kind={self.kind}, tensor_id={self.tensor_id}, "
                f"dim_index={self.dim_index}, value={self.value})")


# Layouts recorded on tensors; a tensor with none has the default layout of its size
_LAYOUTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def get_spyre_tensor_layout(tensor: torch.Tensor) -> SpyreTensorLayout:
    recorded = _LAYOUTS.get(tensor)
    return recorded if recorded is not None else SpyreTensorLayout(list(tensor.shape),
                                                                   tensor.dtype)


def set_spyre_tensor_layout(tensor: torch.Tensor, layout: SpyreTensorLayout) -> None:
    _LAYOUTS[tensor] = layout


def encode_constant(value: float, data_format: DataFormats) -> int:
    """The bits a kernel's constant is stored as: IEEE fp32 as itself; any other format as
    DLFloat16 (GUESS: the closed FloatToFp16Bin). Like the extension, the value is an fp32
    first (`float torch_const`)."""
    bits = _fp32_bits(float(value))
    return bits if data_format == DataFormats.IEEE_FP32 else _dlfloat16_bits(bits)


def _fp32_bits(value: float) -> int:
    try:
        return struct.unpack("<I", struct.pack("<f", value))[0]
    except OverflowError:  # beyond fp32's range: infinity, as a C++ float conversion gives
        return struct.unpack("<I", struct.pack("<f", math.copysign(math.inf, value)))[0]


# DLFloat16 (SEN169_FP16): 1 sign, 6 exponent (bias 31), 9 fraction bits, on fp32 bit
# patterns; the same semantics as spyre_sim's dlfloat.py (its docstring has the sources): no
# subnormals (a magnitude that rounds to 2^-31 or below is a zero of its sign), one NINF code
# for NaN and infinity (overflow gives it), rounding to nearest with ties to even.
_DROPPED = 23 - 9  # fp32 fraction bits rounded away
_FLUSH_BITS = (127 - 31) << 23  # 2^-31
_OVERFLOW_BITS = 0x4FFFA000  # the midpoint above the largest finite value (0x4FFF8000)
_NINF_CODE = 0x7FFF


def _dlfloat16_bits(fp32_bits: int) -> int:
    sign, magnitude = fp32_bits >> 31 << 15, fp32_bits & 0x7FFFFFFF
    rounded = (magnitude + ((1 << (_DROPPED - 1)) - 1) + ((magnitude >> _DROPPED) & 1)) \
        & ~((1 << _DROPPED) - 1)
    if magnitude > _OVERFLOW_BITS:  # NaN and infinity included
        return sign | _NINF_CODE
    if rounded <= _FLUSH_BITS:
        return sign
    exponent = (rounded >> 23) - (127 - 31)
    return sign | exponent << 9 | (rounded >> _DROPPED) & 0x1FF
