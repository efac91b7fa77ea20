"""One state from a log and its ID (``crashlab repro``)."""

from __future__ import annotations

from harness.errors import CrashlabError
from harness.logformat import LogReader
from harness.states.epochs import Epoch, iter_epochs, merge_epochs
from harness.states.model import State, check_valid, check_victim
from harness.states.stateid import parse_id


def state_from_id(reader: LogReader, state_id: str, log_order: str = "completion") -> State:
    """Exactly the state ``state_id`` names in ``reader``'s log (any state
    the model allows, whatever strategy produced the ID, its state faults
    included: a lost flush's epochs merged, the misdirected write and the
    flipped bits as the ID places them).  Raises :class:`CrashlabError`
    (one line) for a malformed ID or one the log cannot produce (under
    ``log_order``, the run's)."""
    key = parse_id(state_id)
    found: list[Epoch] = []
    last = -1
    for epoch in iter_epochs(reader, log_order):
        last = epoch.index
        if key.epoch <= epoch.index <= key.last_epoch:
            found.append(epoch)
        if epoch.index == key.last_epoch:
            merged = merge_epochs(found) if len(found) > 1 else found[0]
            check_valid(merged, key)
            state = State(key, merged)
            victim = state.victim(reader)
            if victim is not None:
                check_victim(key, victim, reader.sectorsize)
            return state
    raise CrashlabError(
        f"state {state_id}: {reader.path} has epochs 0..{last}, no epoch {key.last_epoch}"
    )
