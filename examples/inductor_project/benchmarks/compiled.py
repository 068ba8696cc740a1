"""What every benchmark of this suite shares: the workload compiled with the project's backend
as a user would (`torch.compile(backend=compile_with_defaults)`), once per process.

The FX graph cache is off, so every compile runs Inductor's stages (a hit would load the
module a cached build made); the C++ kernel cache stays on, keyed by each kernel's source, so
an unchanged kernel is not rebuilt. Torch runs on one thread: the machine is shared.
"""

from __future__ import annotations

import torch
from torch._inductor import compile_fx  # noqa: F401  (imported for the forkserver, below)
from torch._inductor.cpu_vec_isa import pick_vec_isa

from benchmarks import workloads

# asv's forkserver imports the suite once per commit, then forks a process per benchmark:
# Inductor's modules and its probe of the CPU's vector instructions (a small C++ build) are
# paid here once instead of in every benchmark's first compile (about 5 s each, measured on
# a 2-core machine: 6.2-8.9 s to a first compile without this, 2.0-2.1 s with it).
pick_vec_isa()
NO_FX_CACHE = {"fx_graph_cache": False, "fx_graph_remote_cache": False}
_compiled: dict[tuple, tuple] = {}


def backend():
    """The project's backend at this commit (imported late: asv lists the suite first)."""
    from inductor_example import backend as project_backend
    return project_backend


def compile_workload(name: str, seq: int, width: int | None = None):
    """(program, compiled callable, inputs): compiled and called once in this process."""
    from torch._inductor import config

    key = (name, seq, width)
    if key not in _compiled:
        torch.set_num_threads(1)
        program, inputs = workloads.build(name, seq, width)
        torch._dynamo.reset()
        compiled = torch.compile(program, backend=backend().compile_with_defaults,
                                 dynamic=False)
        with config.patch(NO_FX_CACHE), torch.no_grad():
            compiled(*inputs)
        _compiled[key] = (program, compiled, inputs)
    return _compiled[key]
