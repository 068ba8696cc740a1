"""groundtruth."""
