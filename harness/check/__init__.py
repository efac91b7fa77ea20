"""The check stage: every crash state of one recorded run, materialised,
recovered and judged (``check.py``: enumeration, workers, resume, the
run's result; ``window.py``: the states it asks for; ``pool.py`` and
``cluster.py``: the worker processes, local or a Dask cluster's;
``worker.py``: one state, by a path chosen once — ``filepath.py`` or the
raw tier's ``rawpath.py`` — over the run's ``context.py``; ``records.py``:
the lines written; ``runlevel.py``: what is judged once per run — the
write trace, REC-CRASHSAFE; ``multicrash.py``: crash, recover, continue and
crash again)."""
