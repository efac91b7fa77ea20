"""The materialise stage: disk images from a base image and a log.

* ``replay.py`` — a prefix of the log, with xfstests' ``replay-log``
  semantics (``crashlab replay``; the run's final image);
* ``durable.py`` — what the checks use: a durable image that moves forward
  through the log and a scratch copy per crash state with its overlay;
* ``state.py`` — one crash state's image the simplest way (the reference
  the tests hold ``durable.py`` to);
* ``faults.py`` — a misdirected write's two places in a state's image.
"""

from harness.materialize.durable import DurableImage, sparse_copy
from harness.materialize.faults import misdirect_extents
from harness.materialize.replay import apply_entry, replay
from harness.materialize.state import write_state_image

__all__ = [
    "DurableImage",
    "apply_entry",
    "misdirect_extents",
    "replay",
    "sparse_copy",
    "write_state_image",
]
