"""probing."""
