"""qemu guests: the pinned Debian kernel (``kernel.py``), a byte-reproducible
initramfs (``cpio.py``, ``initramfs.py``), the guest's scripts (``guest/``)
and booting one guest for one job (``vm.py``).  Used by the ``qemu``
recording backend (harness/record/qemu.py)."""
