"""Matrices of runs: which cells a sweep records and checks
(``matrix.py``), what each cell expects and how that decides the exit code
(``expectations.py``), and the sweep itself (``sweep.py``)."""
