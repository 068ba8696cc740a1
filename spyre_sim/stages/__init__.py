"""The eight compile stages, one module each; `spyre_sim.pipeline` calls them in this order.

The names are fixed: every tool, benchmark and report uses them. Defined here, free of torch,
so a tool can read them without importing the compiler.
"""

STAGES = ("dynamo", "decompose", "lower", "layout", "kernel", "sdsc", "backend", "runtime")
# Stages whose artifact can be executed (runtime executes the compiled binary).
EXECUTABLE_STAGES = ("decompose", "lower", "layout", "kernel", "runtime")
