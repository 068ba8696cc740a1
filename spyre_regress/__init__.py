"""spyre-regress: the orchestration on top — the CLI, the nightly loop and the demo.

The one layer that calls both `regressions` (detection, bisection, investigation) and
`reports` (the bundle): spyre_sim <- benchmarks <- regressions <- reports <- spyre_regress.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("spyre-regress")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "unknown"
