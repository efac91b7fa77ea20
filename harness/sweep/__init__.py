"""Matrices of runs: which cells a sweep records and checks (``matrix.py``,
``matrixfile.py``), what one cell is and expects (``cell.py``), how that
decides the exit code (``expectations.py``), and the sweep itself
(``sweep.py``)."""
