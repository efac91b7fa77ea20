"""Explain crash states: the one place that maps a device byte range to
its meaning (ext4 metadata, the jbd2 journal, files and their SQLite
pages, journal records and WAL frames; DHL pages and slot headers).

* :func:`harness.explain.state.explain_state` — a state's epoch, cut,
  marks, and every write of its epoch with what it hit;
* :mod:`harness.explain.ext4`, :mod:`~harness.explain.jbd2`,
  :mod:`~harness.explain.sqlitefile`, :mod:`~harness.explain.dhl` — the
  per-format explainers.
"""
