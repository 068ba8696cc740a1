"""The minimal upstream regression bundle: one folder and one .tar.gz per investigation.

    from reports import write_bundle
    folder = write_bundle(investigation, Path("reports-out"))   # + reports-out/<name>.tar.gz

`investigation` is a `regressions.investigation.Investigation`; this package renders it and
imports nothing of `regressions` but its types. The bundle's contents and how to read them are
in docs/how-to/read-a-report.md, the file formats in docs/reference/formats.md.
"""

from reports.bundle import BUNDLE_VERSION, bundle_files, scrub_investigation, write_bundle

__all__ = ["BUNDLE_VERSION", "bundle_files", "scrub_investigation", "write_bundle"]
