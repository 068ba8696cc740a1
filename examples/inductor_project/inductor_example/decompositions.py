"""The decompositions this backend registers on top of Inductor's own table.

A backend decomposes an op it has no good kernel for into ops it has; the table is passed to
`compile_fx` (see `backend.compile_graph`), so what it changes shows first in the AOT graph.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

aten = torch.ops.aten


def table() -> dict[object, Callable]:
    """Op -> decomposition, for the ops this backend lowers its own way (none yet)."""
    return {}
