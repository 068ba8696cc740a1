"""The backend: Inductor's `compile_fx` with this project's config defaults, decompositions
and post-grad pass.

spyre-regress measures it through its Inductor backend module, which applies `CONFIG` (with
any knob it is trying on top) and calls `compile_graph` where Inductor's own `compile_fx`
would be called; `compile_with_defaults` is the same as a `torch.compile` backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._inductor import config
from torch._inductor.compile_fx import compile_fx
from torch._inductor.decomposition import select_decomp_table

from inductor_example import decompositions, passes

# This backend's `torch._inductor.config` defaults (the knobs it decides differently from
# Inductor's own defaults).
CONFIG: dict[str, Any] = {}


def compile_graph(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]
                  ) -> Callable:
    """Compile one Dynamo graph: Inductor with this backend's decompositions and pass, under
    whatever `torch._inductor.config` the caller has set (`CONFIG` by default)."""
    with config.patch(post_grad_custom_post_pass=passes.DropMultiplyByOne()):
        return compile_fx(graph_module, list(example_inputs),
                          decompositions={**select_decomp_table(), **decompositions.table()})


def compile_with_defaults(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]
                          ) -> Callable:
    """`compile_graph` under `CONFIG`: the backend as `torch.compile(backend=...)` takes it."""
    with config.patch(CONFIG):
        return compile_graph(graph_module, example_inputs)
