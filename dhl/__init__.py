"""The DHL (Doubleheader Logging) storage engine: a C library (``dhl/src``,
API and on-disk format in ``dhl/include/dhl.h``, bytes explained in
``dhl/FORMAT.md``) and this Python binding over ``dhl/build/libdhl.so``."""

from dhl.binding import (
    MODES,
    Database,
    DhlError,
    PageInfo,
    SlotHeader,
    library_path,
    open_db,
    valid_slot,
)

__all__ = [
    "MODES",
    "Database",
    "DhlError",
    "PageInfo",
    "SlotHeader",
    "library_path",
    "open_db",
    "valid_slot",
]
