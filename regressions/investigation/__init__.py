"""investigation."""
