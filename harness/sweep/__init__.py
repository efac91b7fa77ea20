"""Checking recorded runs: every crash state of a run (``check``), and
matrices of runs (``sweep``)."""
