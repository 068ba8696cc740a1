"""Benchmark suites this tool ships for projects that keep none of their own.

Each folder is an asv suite that measures an external checkout, the way django-asv measures
django: its `asv.conf.json` names the checkout (`repo`), its `benchmarks/` the measurements.
`spyre-regress suite NAME --repo CHECKOUT --out DIR` writes one out for a checkout, with the
backend module it measures through beside it; every other command then takes `--repo DIR`
(the history is the checkout's, read from the suite's asv.conf.json).
"""
