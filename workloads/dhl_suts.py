"""The DHL SUTs (engine "dhl", workloads/runner/engine_dhl.c): ``dhl-tc``,
``dhl-cc``, ``dhl-tc-opt``, ``dhl-cc-opt``, the thesis's own ``dhl-tc-thesis``
and ``dhl-cc-thesis`` (one commit record in place; TC recovered by the FCC
alone, CC restored by recovery) and the unsafe ``dhl-nolog``, each
on the database file in the recorded file system, and a ``…-raw`` twin
(``raw=True``) that runs on the recorded block device itself with no file
system (``crashlab record --fs raw``; the fast tier of the sweep).  Their
guarantees cite the DHL thesis as dhl/DESIGN.md and dhl/FORMAT.md restate
it; the registry is workloads/suts.py."""

from __future__ import annotations

from workloads.guarantee import DOC_CRASHLAB, PREFIX_RULE, Guarantee, safe, unsafe
from workloads.sut import PAGE_SIZE, Sut

DOC_DHL = "DHL thesis §III (Doubleheader Logging); dhl/DESIGN.md"
_DHL_TC = (
    "DHL traditional commit (thesis §3.2-3.3, Fig. 4): dirty pages are written "
    "with the new slot header beside the committed one, fsync, then the header page "
    "with FCC = T, fsync; 'if the system crashes after we flush the dirty page but "
    "before the transaction commits ... a recovery process must ... invalidate the "
    "updated slot-header whose TID is greater than the FCC'"
)
_DHL_CC = (
    "DHL counting commit (thesis §3.4): dirty pages and the commit record (FCC = T "
    "and the transaction size) are written with one fsync and no ordering; recovery "
    "counts the slot headers with TID = FCC and 'will rollback to the previous "
    "consistent state' when the count is short"
)
_DHL_TC_THESIS = (
    "DHL traditional commit as the thesis writes it (§3.2-3.3, Fig. 4): one FCC in "
    "the header page, overwritten in place after the fsync that orders the dirty "
    "pages before it; recovery trusts that FCC alone (no transaction size, no "
    "count): 'a commit mark must be written after all other dirty pages in the "
    "transaction are flushed' (dhl-tc counts as well: a strengthening)"
)
_DHL_CC_THESIS = (
    "DHL counting commit as the thesis writes it (§3.4, Fig. 5): one FCC and "
    "transaction size in the header page, overwritten in place, one fsync; on a "
    "short count recovery 'restore[s] the database header page by decreasing the "
    "FCC by one and restoring the transaction size' (dhl-cc keeps the previous "
    "commit record in a second meta slot instead)"
)
_DHL_OPT = (
    "; metadata embedding (thesis §IV, after Kim et al.): FCC and the transaction "
    "size live in the most recently updated data page and recovery scans every page "
    "for the largest FCC"
)
_DHL_DURABLE = (
    "dhl_commit returns only after the sync that makes the commit record durable "
    "(the last of TC's two syncs, CC's only one), and recovery never rolls back "
    "a complete commit record (T+1 never overwrites T's slot headers: dhl/DESIGN.md)"
)
_DHL_NOLOG = (
    "DHL NOLOG, the thesis's OFF_OPT lower bound (§IV, Fig. 7-8): pages are "
    "rewritten in place through one slot header, the header page after them, one "
    "fsync, and there is no recovery (dhl/FORMAT.md: 'unsafe by design'); a power "
    "loss mid-transaction can leave some pages of it, a split's parent pointing "
    "past the stored page count, or a torn page"
)
# In place, no recovery: a crash between the page writes of a multi-page
# transaction leaves part of it, or a parent that points past the stored page
# count (then it does not open: on ext4, app:gmail prefix showed only DB-OPEN
# failures, 79 of 104 states).
_DHL_NOLOG_SHOWS = ("DB-ATOMIC", "DB-OPEN", "DB-INTEGRITY")
_DHL_NOLOG_DURABLE = (
    "NOLOG syncs every page of a transaction before dhl_commit returns, "
    "and with no log there is nothing that can undo a durable page"
)


_DHL_ERR_NOACK = (
    "dhl_commit returns DHL_EIO when a write or sync fails and then poisons the "
    "handle: nothing more is committed through it (dhl/DESIGN.md, 'After an I/O "
    "error'); the runner acknowledges only a commit that returned DHL_OK and stops"
)
_DHL_ERR_ATOMIC = (
    "the failed transaction is left exactly as a power loss at that point would "
    "leave it, and the recovery that makes power loss atomic resolves it"
)
_DHL_ERR_DURABLE = (
    "fail-stop: after an error nothing more is acknowledged, so there is no "
    "later transaction to lose"
)


def _dhl_errors(guarantees: list[Guarantee]) -> tuple[Guarantee, ...]:
    """DHL under device faults: fail-stop, so ERR-NOACK and ERR-DURABLE
    always; ERR-ATOMIC where recovery makes power loss atomic."""
    atomic = next(g for g in guarantees if g.invariant == "DB-ATOMIC")
    return (
        Guarantee("ERR-NOACK", True, _DHL_ERR_NOACK, DOC_DHL),
        Guarantee(
            "ERR-ATOMIC",
            atomic.promised,
            _DHL_ERR_ATOMIC if atomic.promised else atomic.rule,
            DOC_DHL,
        ),
        Guarantee("ERR-DURABLE", True, _DHL_ERR_DURABLE, DOC_DHL),
    )


def _dhl(
    name: str, mode: str, description: str, guarantees: list[Guarantee], *, raw: bool = False
) -> Sut:
    guarantees.append(Guarantee("DB-PREFIX", True, PREFIX_RULE, DOC_CRASHLAB))
    where = (
        "on the raw recorded block device, no file system"
        if raw
        else "on a file in the recorded file system"
    )
    return Sut(
        name=name + ("-raw" if raw else ""),
        engine="dhl",
        description=f"{description}, {where}",
        runner_options=(("--dhl-mode", mode), ("--sync", "fsync"), ("--page-size", str(PAGE_SIZE))),
        guarantees=tuple(guarantees),
        error_guarantees=_dhl_errors(guarantees),
        raw=raw,
        commit_after_sync=mode in ("tc", "tc_opt", "tc_thesis"),
        mode=mode,
        recovery=mode != "nolog",
        torn_safe=mode in ("tc", "nolog", "tc_thesis"),
        in_place=mode == "nolog",
        weaknesses=_DHL_NOLOG_SHOWS if mode == "nolog" else (),
    )


def dhl_suts() -> list[Sut]:
    """Every DHL SUT, file and raw."""
    modes = [
        ("dhl-tc", "tc", "DHL, traditional commit (two syncs per transaction)", _DHL_TC),
        ("dhl-cc", "cc", "DHL, counting commit (one sync per transaction)", _DHL_CC),
        (
            "dhl-tc-opt",
            "tc_opt",
            "DHL, traditional commit with metadata embedding",
            _DHL_TC + _DHL_OPT,
        ),
        (
            "dhl-cc-opt",
            "cc_opt",
            "DHL, counting commit with metadata embedding",
            _DHL_CC + _DHL_OPT,
        ),
        (
            "dhl-tc-thesis",
            "tc_thesis",
            "DHL, the thesis's traditional commit (recovery by the FCC alone)",
            _DHL_TC_THESIS,
        ),
        (
            "dhl-cc-thesis",
            "cc_thesis",
            "DHL, the thesis's counting commit (one FCC and size, restored in place)",
            _DHL_CC_THESIS,
        ),
    ]
    out = []
    for raw in (False, True):
        for name, mode, desc, rule in modes:
            out.append(
                _dhl(
                    name,
                    mode,
                    desc,
                    safe(rule, DOC_DHL, Guarantee("DB-DURABLE", True, _DHL_DURABLE, DOC_DHL)),
                    raw=raw,
                )
            )
        out.append(
            _dhl(
                "dhl-nolog",
                "nolog",
                "DHL without logging: in place, no recovery (UNSAFE)",
                unsafe(
                    _DHL_NOLOG, DOC_DHL, Guarantee("DB-DURABLE", True, _DHL_NOLOG_DURABLE, DOC_DHL)
                ),
                raw=raw,
            )
        )
    return out
