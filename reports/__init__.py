"""The minimal upstream regression bundle."""
