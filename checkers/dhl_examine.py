"""What the DHL checker (checkers/dhl.py) takes of one crash image, the
facts (checkers/dhl_facts.py) its verdicts are judged on
(checkers/dhl_judge.py).  ``examine`` looks at the crash image twice:

* **before DHL recovery**, read-only (the image as a reader would see it):
  DHL-T1 (every page reachable in the committed state keeps a committed slot
  header), the read-rule digest for DHL-READ, and the newest commit record
  with its count of slot headers (a short count is what CC-ROLLBACK is
  about);
* **after DHL recovery**, on a copy in memory (recovery writes): DB-OPEN,
  DB-INTEGRITY (``dhl_check``), the content digest for DB-ATOMIC/DURABLE/
  PREFIX, DHL-INV (no slot header above the FCC), CC-COUNT (headers with
  TID == FCC vs the recorded transaction size), CC-ROLLBACK, and
  REC-IDEMPOTENT (recover a copy of the recovered copy: no byte changes).

The image is read once; every open, recovery and re-recovery runs on
in-memory copies through libdhl's ``dhl_mem_io`` (:class:`MemIO`), labelled
with the scratch paths the file-based procedure used, so error messages
name the same files.  Slot headers come from one ``dhl_image_headers`` call
per image; pages whose headers are all zero are left out of the lists below
(they hold no TID, so no count or search changes).

Slot headers are decoded by libdhl (``dhl_image_headers``), the tree walk is
``dhl_reachable``: this module never restates the page layout.  The facts
are independent of the crash point's marks (cacheable).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import xxhash

from checkers import dhl_native
from checkers.dhl_facts import (
    After,
    Before,
    DhlFacts,
    newest_commit,
    open_image,
    pagecount_at,
    pages_with,
    previous_commit,
    stored_headers,
)
from checkers.dhl_format import read_committed
from checkers.protocol import NativeExaminer
from dhl.binding import Database, DhlError, MemIO
from harness.materialize.durable import Loadable
from workloads.oracle import digest_rows

WORK = "dhl-check"  # the (virtual) scratch folder beside the examined file: labels only


# The image (recovered in place once its unrecovered facts are taken) and
# the re-recovered copy of examine(), reused from state to state: fresh
# megabyte buffers cost more in page faults than all the checking (one
# process examines one image at a time).
_IMAGE, _AGAIN = MemIO(), MemIO()


def refused(why: str) -> DhlFacts:
    """The facts of a database not read, for ``why`` (it is a link of the
    recovered tree): DB-OPEN fails with it, nothing is read before recovery."""
    return DhlFacts(exists=True, before=Before(error=why), after=After(error=why))


def content_key(files: Path, db_name: str) -> bytes:
    """A digest of the extracted database file (DHL has no sidecar files)."""
    p = files / db_name
    if not p.exists():
        h = xxhash.xxh3_128()
        h.update(b"\1")
        return h.digest()
    with _IMAGE.read_file(p).view() as v:
        return image_key(v)


def image_key(image: bytes | memoryview) -> bytes:
    """:func:`content_key` of a database file whose bytes are ``image``."""
    return xxhash.xxh3_128(image).digest()


def _err(e: Exception) -> str:
    return str(e)


def examine_before(image: Path, data: MemIO | None = None) -> tuple[Before, bool]:
    """Read the crash image without recovery (``readonly``: nothing is
    written).  ``data``: the image already read into memory.  Returns the
    facts and whether it is a NOLOG database."""
    if data is None:
        data = MemIO().read_file(image)
    try:
        db, nolog = open_image(image, readonly=True, io=data)
    except DhlError as e:
        return Before(error=_err(e)), False
    with db:
        info = db.info()
        hs = stored_headers(db, data)
        by_page = {h.pgno: h for h in hs}
        newest, size, count = newest_commit(hs) if not nolog else (info.fcc, 0, 0)
        fcc = info.fcc
        missing = []
        reached = db.reachable()
        for r in reached:
            if r.slot == -2:
                continue  # a committed slot exists but is impossible: DB-INTEGRITY's business
            h = by_page.get(r.pgno)
            t = h.tid if h is not None else (0, 0)
            if not any(x and x <= fcc for x in (t if not nolog else t[:1])):
                missing.append((r.pgno, r.parent, t[0], t[1]))
        try:
            digest, read_error = db.digest(), None
        except DhlError as e:
            digest, read_error = None, _err(e)
    with data.view() as v:
        indep = read_committed(v)
    return Before(
        fcc=fcc,
        newest=newest,
        newest_size=size,
        newest_count=count,
        newest_pages=pages_with(hs, newest, data.size) if newest else (),
        indep_fcc=indep.fcc,
        indep_error=indep.error,
        indep_digest=digest_rows(indep.rows) if indep.rows is not None else None,
        indep_no_committed=tuple(sorted(indep.no_committed)),
        previous=previous_commit(hs, newest) if not nolog else 0,
        above_newest=sum(t > newest for h in hs for t in h.tid) if not nolog else 0,
        t1_missing=tuple(missing),
        reached=len(reached),
        digest=digest,
        read_error=read_error,
    ), nolog


def examine_after(
    image: Path,
    recovered: Path,
    before: Before,
    nolog: bool,
    *,
    recover: bool = True,
    idempotence: bool = True,
    data: MemIO | None = None,
    work: tuple[MemIO, MemIO] | None = None,
) -> After:
    """Recover a copy of ``image`` (in memory; ``recovered`` names it, no
    file is written) and look at the result.  ``data``: the image already in
    memory; ``work``: two buffers to reuse for the copies (the first may be
    ``data`` itself, recovered in place when the caller is done with it).  With
    ``recover=False``, the file ``recovered`` is taken as some recovery's
    output as is (tests feed it the output of a deliberately broken
    recovery): it is then opened read-only and the DB-level facts are what a
    reader sees.

    The image-level facts come from the stored slot headers, not from the
    engine's choice: the FCC after recovery is the newest commit record left
    in the image (what the next open will trust), its transaction size is
    the one recorded there."""
    mem, again = work if work is not None else (MemIO(), MemIO())
    if not recover:
        mem.read_file(recovered)
    elif data is None:
        mem.read_file(image)
    elif data is not mem:
        with data.view() as v:
            mem.load(v)
    try:
        db = Database(recovered, "auto", readonly=not recover, io=mem)
    except DhlError as e:
        return After(error=_err(e))
    with db:
        info, rec = db.info(), db.recovery()
        try:
            db.check()
            integrity = "ok"
        except DhlError as e:
            integrity = _err(e)
        try:
            digest, scan_error = db.digest(), None
        except DhlError as e:
            digest, scan_error = None, _err(e)
        hs = stored_headers(db, mem)
    fcc, size, _ = newest_commit(hs) if not nolog else (info.fcc, 0, 0)
    above = tuple((h.pgno, s, h.tid[s]) for h in hs for s in range(2) if h.tid[s] > fcc)
    count_fcc = pages_with(hs, fcc, pagecount_at(hs, fcc)) if fcc else ()
    fcc_pages = pages_with(hs, fcc, mem.size) if fcc else ()
    count_newest = pages_with(hs, before.newest, mem.size) if before.newest > fcc else ()
    changed: tuple[int, ...] | None = None
    idem_error = None
    if idempotence and not nolog:  # run even when recovery wrote nothing: a check, not a guess
        changed, idem_error = _second_recovery(recovered, mem, again, info.page_size)
    return After(
        fcc=fcc,
        txn_size=size,
        engine_fcc=info.fcc,
        rolled_back=bool(rec.rolled_back),
        integrity=integrity,
        digest=digest,
        scan_error=scan_error,
        above_fcc=above,
        count_fcc=count_fcc,
        fcc_pages=fcc_pages,
        count_newest=count_newest,
        idempotent_changed=changed,
        idempotent_error=idem_error,
    )


def _second_recovery(
    recovered: Path, mem: MemIO, again: MemIO, page_size: int
) -> tuple[tuple[int, ...] | None, str | None]:
    """Recover a copy (``again``, labelled ``<recovered>.again``) of the
    recovered image ``mem``: which pages changed."""
    again.load_copy(mem)
    try:
        Database(recovered.with_name(recovered.name + ".again"), "auto", io=again).close()
    except DhlError as e:
        return None, _err(e)
    if not again.writes or again.same_as(mem):
        return (), None
    return _changed_pages(mem.data, again.data, page_size), None


def _changed_pages(a: bytes, b: bytes, page_size: int) -> tuple[int, ...]:
    """Pages (of ``page_size`` bytes; the last may be partial) that differ."""
    n = -(-max(len(a), len(b)) // page_size)
    return tuple(
        p
        for p in range(n)
        if a[p * page_size : (p + 1) * page_size] != b[p * page_size : (p + 1) * page_size]
    )


def examine(db_path: Path, *, blockdev: bool = False, vfs: str = "") -> DhlFacts:
    """Examine the crash image ``db_path`` before and after DHL recovery.
    ``db_path`` is read once and not modified: recovery runs on in-memory
    copies, labelled as files of a scratch folder beside it (``dhl-check/``)
    that is never created.  ``blockdev``: the image is the block device the
    SUT ran on, and the engine sees it as one (as the SUT's recovery did).
    ``vfs`` plays no part (DHL has no VFS layer)."""
    if not db_path.exists():
        return DhlFacts(exists=False)
    _IMAGE.read_file(db_path)
    return _examine_loaded(db_path, blockdev)


def examine_image(
    image: Callable[[Loadable], object], db_path: Path, *, blockdev: bool = False
) -> DhlFacts:
    """:func:`examine` of a database file that is not written anywhere:
    ``image(buffer)`` loads its bytes into ``buffer`` (``MemIO.load`` and
    ``MemIO.write``), and ``db_path`` only names it in messages (as if it
    were there: the facts are those :func:`examine` gives for such a file).
    The raw tier's fast path (harness/check/rawpath.py): a crash state's
    image goes from the durable image to the checks without a file."""
    image(_IMAGE)
    return _examine_loaded(db_path, blockdev)


def _examine_loaded(db_path: Path, blockdev: bool) -> DhlFacts:
    """:func:`examine` once the image of ``db_path`` is in ``_IMAGE``."""
    _IMAGE.blockdev = _AGAIN.blockdev = blockdev
    before, nolog = examine_before(db_path, _IMAGE)
    after = examine_after(
        db_path,
        db_path.parent / WORK / "recovered.db",
        before,
        nolog,
        data=_IMAGE,
        work=(_IMAGE, _AGAIN),
    )
    return DhlFacts(exists=True, nolog=nolog, before=before, after=after)


def native_examiner(durable: Path) -> NativeExaminer[DhlFacts] | None:
    """The native twin of :func:`examine_image` for a worker whose durable
    image is the file ``durable`` (``checkers/dhl_native.py``), or None when
    it is not built."""
    return dhl_native.NativeExaminer(durable) if dhl_native.available() else None
