"""Probing: measurements taken inside one build of the compiler under test.

The probe child (`probe`, run in a subprocess with one commit's checkout on its path), the
measurement it shares with the reproducers (`harness`), the typed answers read back from it
(`answers`), the prober that runs it per commit (`prober`, with the git history), the same
commands run in-process on emulated builds (`emulated`), and where a repository keeps its
suite and workload catalogue (`suite`).
"""
