"""The one error type a user can fix: caught once in `spyre_regress.cli`, printed as one line."""


class SpyreRegressError(Exception):
    """A problem with the user's input or environment; the message names it and the fix."""
