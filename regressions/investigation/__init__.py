"""Investigation: the process that explains one alert, and the typed record of it.

`investigator.Investigator` bisects the commit, confirms the culprit against its parent,
captures the stages, searches the knobs, minimizes and times; `model` holds the
`Investigation` it produces - every figure a report quotes, computed once, with what it was
measured on - and its JSON form; `evidence` turns what an investigation measured into the
record's `Evidence`, which the lifecycle (`records`, below) judges.
"""
