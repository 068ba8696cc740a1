"""Detection: from asv results to alerts.

Change points of each series (`changepoints`, with `segmentation` for the interior and
`outliers` for one-commit excursions), one false-discovery-rate family across a run
(`detect`), regressions grouped by root cause into alerts (`alerts`), and the plan of what to
measure again when detection is unsure (`remeasure`). Pure functions of the series: nothing
here reads files or starts processes.
"""
