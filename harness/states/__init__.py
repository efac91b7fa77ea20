"""Crash states: the one definition of a state and its ID, the enumeration
strategies, dedup and lookup by ID.  See README.md.  Turning a state into
a disk image is the next stage's (``harness/materialize/``)."""

from harness.states.enumerate import Enumeration, Stats, enumerate_states, resolve_window
from harness.states.epochs import Epoch, iter_epochs
from harness.states.lookup import state_from_id
from harness.states.model import Cut, State
from harness.states.stateid import StateIdError, StateKey, format_id, parse_id
from harness.states.strategies import STRATEGIES, TORN_PATTERNS, Options

__all__ = [
    "STRATEGIES",
    "TORN_PATTERNS",
    "Cut",
    "Enumeration",
    "Epoch",
    "Options",
    "State",
    "StateIdError",
    "StateKey",
    "Stats",
    "enumerate_states",
    "format_id",
    "iter_epochs",
    "parse_id",
    "resolve_window",
    "state_from_id",
]
