"""Finding, bisecting and explaining regressions across commits of a compiler backend.

Rooms by role: `detection` (is something worse, and where), `bisection` (which commit, which
stage, which knob, which ops), `probing` (measurements inside one build), `investigation`
(the process that joins the bisections, and the typed record it leaves), `records` (what is
kept between runs), `night` (one night's sequence) and `groundtruth` (known answers, for
tests, scripts and the demo only). Shared at the top: the metric table (`metrics`), the
statistics (`stats`), the codec (`codec`), the error type, and the two modules that run
other programs: `git` and `processes`.
"""
