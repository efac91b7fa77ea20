"""crashlab: harness."""
