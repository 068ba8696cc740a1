import spyre_sim
from benchmarks import workloads


def compile_workload(name, seq, width, **config):
    program, inputs = workloads.build(name, seq, width)
    compiled = spyre_sim.compile(program, inputs, spyre_sim.Config(**config))
    return compiled, program, inputs
