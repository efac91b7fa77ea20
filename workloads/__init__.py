"""crashlab: workloads."""
