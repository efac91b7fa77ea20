"""``crashlab paper``: the seed papers' evaluation measured on this machine
in one run (``build.py`` measures through ``volume.py`` and
``throughput.py``; ``compare.py`` puts the papers' numbers beside ours;
``render.py`` writes the folder).  The systems are harness/report/systems.py's.

The package imports harness/report/, never the reverse: where a sweep's
report finds the page is the report's (harness/report/load.py, ``page_in``)."""

# throughput repeats per point (``--repeats``): a full run, and ``--quick``
REPEATS = 5
QUICK_REPEATS = 2
