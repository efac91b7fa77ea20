"""Triage of failing crash states: each shrunk to a smallest state of the
same run that still fails the same invariant (README.md)."""
