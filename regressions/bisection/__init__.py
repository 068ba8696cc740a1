"""Bisection: from an alert to its cause.

The first bad commit with sequential same/different/unknown verdicts (`commits`), the first
compiler stage whose artifact or work differs (`stages`), the knob whose other value is a
local workaround (`knobs`), and the smallest program that keeps the regression
(`minimize`). Each takes its measurements injected, so the same search runs on probes of
real commits and on synthetic histories.
"""
