"""Recording: run a workload on a block device whose every write is logged
in the dm-log-writes format (backends ``dm`` and ``fuse``).  See README.md
in this folder."""

from harness.record.backends import select_backend
from harness.record.recorder import RecordRequest, record

__all__ = ["RecordRequest", "record", "select_backend"]
