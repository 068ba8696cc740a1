"""The minimal upstream regression bundle: one folder and one .tar.gz per alert cluster.

    from reports import write_bundle
    folder = write_bundle(investigation, Path("reports-out"))   # + reports-out/<name>.tar.gz

`investigation` is the document the investigation side writes (docs/formats.md); the bundle's
contents and how to read them are in docs/reports.md.
"""

from reports.bundle import BUNDLE_VERSION, bundle_files, write_bundle
from reports.investigation import INVESTIGATION_VERSION, load_investigation, validate_investigation

__all__ = ["BUNDLE_VERSION", "INVESTIGATION_VERSION", "bundle_files", "load_investigation",
           "validate_investigation", "write_bundle"]
