"""Explain crash states: the one place that maps a device byte range to
its meaning (ext4 metadata, the jbd2 journal, files and their SQLite
pages, journal records and WAL frames; DHL pages and slot headers).

* :func:`harness.explain.state.explain_state` — a state's epoch, cut,
  marks, and every write of its epoch with what it hit (handed the file
  system object: the file systems import this package, never the reverse);
* :mod:`harness.explain.context` — what an explainer is and is given;
* :mod:`~harness.explain.sqlitefile`, :mod:`~harness.explain.dhl` — the
  database files' formats; each file system's own explainer (ext4 blocks
  and the jbd2 journal, xfs through ``xfs_db``) lives with its object in
  ``harness/fs/``.
"""
