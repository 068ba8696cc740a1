"""An Inductor-based torch.compile backend for the CPU: the shape of torch-spyre's pipeline
(Dynamo, AOT Autograd, Inductor's passes, scheduling and code generation) with the parts such
a project owns - its config defaults, its decompositions, its FX passes - in one small package,
so that spyre-regress has a compiler it did not write to benchmark, bisect and report on.

    import torch
    from inductor_example import backend
    compiled = torch.compile(model, backend=backend.compile_with_defaults)
"""

__version__ = "0.1.0"
