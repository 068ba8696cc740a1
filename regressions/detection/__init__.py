"""detection."""
