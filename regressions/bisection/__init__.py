"""bisection."""
