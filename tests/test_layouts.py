"""Stick layouts: torch-spyre's worked examples and the DMA that follows stride_map."""

import dataclasses

import pytest
import torch

from spyre_sim.layouts import (
    device_to_host,
    device_to_logical,
    host_to_device,
    logical_to_device,
    permuted_layout,
    stick_layout,
)


@pytest.mark.parametrize(
    "host, dtype, device_size, stride_map, nbytes",
    [
        # torch-spyre csrc/spyre_tensor_impl.cpp and docs/source/user_guide/
        # tensors_and_layouts.md, and that doc's own [5,100,150] example
        ((1024, 4096), "f16", (64, 1024, 64), (64, 4096, 1), 8_388_608),
        ((127, 4096), "f16", (64, 127, 64), (64, 4096, 1), 1_040_384),
        ((4096, 127), "f16", (2, 4096, 64), (64, 127, 1), 1_048_576),
        ((1024, 4096), "f32", (128, 1024, 32), (32, 4096, 1), 16_777_216),
        ((5, 100, 150), "f16", (100, 3, 5, 64), (150, 64, 15000, 1), 192_000),
    ],
)
def test_worked_examples(host, dtype, device_size, stride_map, nbytes):
    layout = stick_layout(host, dtype)
    assert layout.device_size == device_size
    assert layout.stride_map == stride_map
    assert layout.nbytes == nbytes


@pytest.mark.parametrize("shape", [(5, 100, 150), (4096, 127), (3,), (), (2, 3, 5, 70), (7, 1)])
def test_dma_round_trip_and_kernel_view(shape):
    x = torch.randn(shape)
    layout = stick_layout(shape)
    device = host_to_device(x, layout)
    assert tuple(device.shape) == layout.device_size
    assert torch.equal(device_to_host(device, layout), x)
    assert torch.equal(device_to_logical(device, layout), x)
    assert torch.equal(logical_to_device(x, layout), device)


def test_padding_is_zero_on_device():
    layout = stick_layout((3, 70))
    device = host_to_device(torch.ones(3, 70), layout)
    # 70 elements take two sticks (128 slots); 58 of them per row are padding
    assert device.sum().item() == 3 * 70
    assert device.numel() == 3 * 128


def test_permute_is_the_same_device_memory():
    x = torch.randn(6, 130)
    layout = stick_layout(x.shape)
    transposed = permuted_layout(layout, (1, 0))
    assert transposed.device_size == layout.device_size
    assert transposed.stick_dim == 0
    assert torch.equal(host_to_device(x.t().contiguous(), transposed), host_to_device(x, layout))


def test_a_wrong_stride_map_moves_data():
    x = torch.arange(2 * 128, dtype=torch.float32).reshape(2, 128)
    layout = stick_layout(x.shape)
    wrong = dataclasses.replace(layout, stride_map=(64, 1, 128))
    assert not torch.equal(device_to_logical(host_to_device(x, wrong), wrong), x)
