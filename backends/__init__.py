"""Compilers under test other than the simulated Spyre backend (`spyre_sim`).

A backend, in this project, is a compiler under test whose stages can be captured: a compile
of a workload writes one canonical text per stage in the stage-capture protocol (a
`compile-NNN` directory with `<n>-<stage>.txt` files and a versioned `stages.json`, written
by `spyre_sim.debug_capture`). Two builds' captures then diff line by line, and the stage
bisector (`regressions.bisection.stages`) names the first stage where they part, whichever
compiler wrote them.

`backends.inductor` reads PyTorch Inductor's own debug trace into that protocol.
"""
