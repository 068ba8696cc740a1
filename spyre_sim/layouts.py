"""torch-spyre's stick layout (`SpyreTensorLayout`) and the host<->device data movement it implies.

A layout maps a host tensor onto device memory in 128-byte sticks: the stick dim is split into
(tile, element) device dims, the innermost device dim is always the in-stick elements, the
stick dim is padded to whole sticks and every other dim is left unpadded
(torch_spyre/csrc/spyre_tensor_impl.cpp `get_generic_stick_layout`,
docs/source/user_guide/tensors_and_layouts.md).

`stride_map` drives the DMA (host offset = dot(device coordinates, stride_map)); `device_dims`
names the host dim behind each device dim and is what a kernel uses to read its operands.
Keeping the two separate is deliberate: if an earlier stage gets one wrong, data lands in the
wrong place and the numbers change, as on hardware.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

STICK_BYTES = 128  # BYTES_IN_STICK, torch_spyre/csrc/spyre_tensor_impl.h
DTYPE_BYTES = {"f16": 2, "bool": 2, "f32": 4, "i32": 4}  # bool stored as SEN169_FP16
DEVICE_DTYPE_NAMES = {  # torch_spyre/csrc/types_mapping.h
    "f16": "SEN169_FP16", "bool": "SEN169_FP16", "f32": "IEEE_FP32", "i32": "IEEE_INT32",
}


def elems_per_stick(dtype: str) -> int:
    return STICK_BYTES // DTYPE_BYTES[dtype]


@dataclass(frozen=True, kw_only=True)
class TensorLayout:
    host_size: tuple[int, ...]
    dim_order: tuple[int, ...]  # host dims, outer to inner; the last one is the stick dim
    dtype: str
    device_size: tuple[int, ...]
    stride_map: tuple[int, ...]
    device_dims: tuple[str, ...]  # per device dim: "d<h>", "d<h>.tile" or "d<h>.elem"

    @property
    def stick_dim(self) -> int:
        return self.dim_order[-1]

    @property
    def nbytes(self) -> int:
        """Device bytes: whole sticks (get_device_size_in_bytes = 128 x prod(device_size[:-1]))."""
        return STICK_BYTES * math.prod(self.device_size[:-1])

    def to_text(self) -> str:
        return (
            f"host={list(self.host_size)} order={list(self.dim_order)} {self.dtype} "
            f"device_size={list(self.device_size)} stride_map={list(self.stride_map)} "
            f"dims={list(self.device_dims)} bytes={self.nbytes}"
        )

    def to_dict(self) -> dict:
        return {
            "host_size": list(self.host_size), "dim_order": list(self.dim_order),
            "dtype": self.dtype, "device_size": list(self.device_size),
            "stride_map": list(self.stride_map), "device_dims": list(self.device_dims),
        }

    @classmethod
    def from_dict(cls, data: dict) -> TensorLayout:
        return cls(
            host_size=tuple(data["host_size"]), dim_order=tuple(data["dim_order"]),
            dtype=data["dtype"],
            device_size=tuple(data["device_size"]), stride_map=tuple(data["stride_map"]),
            device_dims=tuple(data["device_dims"]),
        )


def stick_layout(
    host_size: tuple[int, ...], dtype: str = "f16", dim_order: tuple[int, ...] | None = None
) -> TensorLayout:
    """The generic stick layout for `host_size` with host dims visited in `dim_order`.

    For dim order (o0, ..., on-1) the device dims are [o1..on-2, tiles(on-1), o0, elems(on-1)]:
    middle dims first, then the stick dim's tile index, then the outermost host dim, then the
    in-stick elements. A scalar is laid out as a one-element vector.
    """
    host_size = tuple(int(s) for s in host_size)
    shape = host_size if host_size else (1,)
    order = tuple(range(len(shape))) if dim_order is None or not host_size else tuple(dim_order)
    if sorted(order) != list(range(len(shape))):
        raise ValueError(f"dim_order {order} is not a permutation of the dims of {host_size}")
    per_stick = elems_per_stick(dtype)
    host_strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    stick = order[-1]
    tiles = -(-shape[stick] // per_stick)
    sizes, strides, names = [], [], []
    for host_dim in order[1:-1]:
        sizes.append(shape[host_dim])
        strides.append(host_strides[host_dim])
        names.append(f"d{host_dim}")
    sizes.append(tiles)
    strides.append(per_stick * host_strides[stick])
    names.append(f"d{stick}.tile")
    if len(order) >= 2:
        sizes.append(shape[order[0]])
        strides.append(host_strides[order[0]])
        names.append(f"d{order[0]}")
    sizes.append(per_stick)
    strides.append(host_strides[stick])
    names.append(f"d{stick}.elem")
    return TensorLayout(host_size=host_size, dim_order=order, dtype=dtype, device_size=tuple(sizes),
                        stride_map=tuple(strides), device_dims=tuple(names))


def permuted_layout(layout: TensorLayout, perm: tuple[int, ...]) -> TensorLayout:
    """The layout of `x.permute(perm)` when x has `layout`: the same device memory, relabelled."""
    host_size = tuple(layout.host_size[p] for p in perm)
    dim_order = tuple(perm.index(h) for h in layout.dim_order)
    return stick_layout(host_size, layout.dtype, dim_order)


# --- host <-> device data movement -------------------------------------------------------


@functools.lru_cache(maxsize=512)
def _padding_mask(layout: TensorLayout) -> torch.Tensor | None:
    """True where a device element holds host data; None when nothing is padding."""
    shape = layout.host_size if layout.host_size else (1,)
    stick = layout.stick_dim
    per_stick = elems_per_stick(layout.dtype)
    if shape[stick] % per_stick == 0:
        return None
    tile_axis = layout.device_dims.index(f"d{stick}.tile")
    elem_axis = layout.device_dims.index(f"d{stick}.elem")
    coords = torch.zeros(layout.device_size, dtype=torch.int64)
    view = [1] * len(layout.device_size)
    view[tile_axis] = layout.device_size[tile_axis]
    coords = coords + torch.arange(layout.device_size[tile_axis]).reshape(view) * per_stick
    view = [1] * len(layout.device_size)
    view[elem_axis] = per_stick
    coords = coords + torch.arange(per_stick).reshape(view)
    return coords < shape[stick]


def _span(layout: TensorLayout) -> int:
    """Length of host storage the stride_map can touch (padding reads past the end)."""
    return 1 + sum((size - 1) * max(stride, 0) for size, stride in
                   zip(layout.device_size, layout.stride_map, strict=True))


def host_to_device(host: torch.Tensor, layout: TensorLayout) -> torch.Tensor:
    """DMA a contiguous host tensor into device memory following `stride_map`; padding is zero."""
    flat = host.reshape(-1)
    span = _span(layout)
    if span > flat.numel():
        flat = torch.cat([flat, flat.new_zeros(span - flat.numel())])
    strides = [max(s, 0) for s in layout.stride_map]
    device = flat.as_strided(layout.device_size, strides).clone()
    mask = _padding_mask(layout)
    if mask is not None:
        device = device.masked_fill(~mask, 0)
    return device


@functools.lru_cache(maxsize=512)
def _scatter_index(layout: TensorLayout) -> tuple[torch.Tensor, torch.Tensor | None]:
    span = _span(layout)
    strides = [max(s, 0) for s in layout.stride_map]
    index = torch.arange(span).as_strided(layout.device_size, strides)
    mask = _padding_mask(layout)
    return (index if mask is None else index[mask]), mask


def device_to_host(device: torch.Tensor, layout: TensorLayout) -> torch.Tensor:
    """DMA device memory back to a contiguous host tensor following `stride_map`."""
    if tuple(device.shape) != layout.device_size:
        raise ValueError(f"device buffer {list(device.shape)} != layout {list(layout.device_size)}")
    index, mask = _scatter_index(layout)
    values = device.reshape(-1) if mask is None else device[mask]
    numel = math.prod(layout.host_size)
    flat = device.new_zeros(max(_span(layout), numel))
    flat[index.reshape(-1)] = values.reshape(-1)
    return flat[:numel].reshape(layout.host_size)


@functools.lru_cache(maxsize=512)
def _logical_permutation(layout: TensorLayout) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Device-dim permutation into host order, and the stick-padded host shape."""
    shape = layout.host_size if layout.host_size else (1,)
    perm: list[int] = []
    padded: list[int] = []
    for host_dim in range(len(shape)):
        if host_dim == layout.stick_dim:
            tile = layout.device_dims.index(f"d{host_dim}.tile")
            elem = layout.device_dims.index(f"d{host_dim}.elem")
            perm += [tile, elem]
            padded.append(layout.device_size[tile] * layout.device_size[elem])
        else:
            axis = layout.device_dims.index(f"d{host_dim}")
            perm.append(axis)
            padded.append(layout.device_size[axis])
    return tuple(perm), tuple(padded)


def device_to_logical(device: torch.Tensor, layout: TensorLayout) -> torch.Tensor:
    """What a kernel sees: the device buffer read through `device_dims`, padding dropped."""
    perm, padded = _logical_permutation(layout)
    logical = device.permute(perm).reshape(padded)
    stick = layout.stick_dim
    shape = layout.host_size if layout.host_size else (1,)
    logical = logical.narrow(stick, 0, shape[stick])
    return logical.reshape(layout.host_size)


def logical_to_device(logical: torch.Tensor, layout: TensorLayout) -> torch.Tensor:
    """What a kernel writes: a logical tensor stored in device order, stick padded with zeros."""
    perm, padded = _logical_permutation(layout)
    shape = layout.host_size if layout.host_size else (1,)
    logical = logical.reshape(shape)
    stick = layout.stick_dim
    if padded[stick] != shape[stick]:
        pad = [0, 0] * (len(shape) - 1 - stick) + [0, padded[stick] - shape[stick]]
        logical = torch.nn.functional.pad(logical, pad)
    per_stick = layout.device_size[layout.device_dims.index(f"d{stick}.elem")]
    split = list(padded)
    split[stick: stick + 1] = [padded[stick] // per_stick, per_stick]
    in_host_order = logical.reshape(split)
    inverse = [0] * len(perm)
    for position, axis in enumerate(perm):
        inverse[axis] = position
    return in_host_order.permute(inverse).contiguous()
