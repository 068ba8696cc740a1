"""The FX pass this backend runs after Inductor's post-grad passes.

`post_grad_custom_post_pass` takes a `CustomGraphPass`: Inductor calls it on the post-grad
graph and keys its FX graph cache on `uuid()`, so a change to the pass must change the uuid
(here: the hash of the class's source).
"""

from __future__ import annotations

import hashlib
import inspect

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

aten = torch.ops.aten


def multiplies_by_one(node: torch.fx.Node) -> bool:
    return (node.op == "call_function" and node.target is aten.mul.Tensor
            and len(node.args) == 2 and node.args[1] == 1.0)


def verify(graph: torch.fx.Graph) -> None:
    """The graph is well formed and still generates Python code."""
    graph.lint()
    graph.python_code("self")


class DropMultiplyByOne(CustomGraphPass):
    """Removes `x * 1.0`: a scale of one that a model's frontend leaves in the graph."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        for node in list(graph.nodes):
            if multiplies_by_one(node):
                node.replace_all_uses_with(node.args[0])
                graph.erase_node(node)
            verify(graph)  # after every node, while the pass is new

    def uuid(self) -> str:
        return hashlib.sha256(inspect.getsource(type(self)).encode()).hexdigest()
