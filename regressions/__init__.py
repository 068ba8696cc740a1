"""Finding, bisecting and explaining regressions across commits of a compiler backend."""
