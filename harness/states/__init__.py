"""Crash states: the one definition of a state and its ID, the enumeration
strategies, dedup, lookup by ID and overlay application.  See README.md."""

from harness.states.enumerate import Enumeration, Stats, enumerate_states, resolve_window
from harness.states.epochs import Epoch, iter_epochs
from harness.states.lookup import state_from_id
from harness.states.model import Cut, State
from harness.states.overlay import OverlayImage, write_state_image
from harness.states.stateid import StateIdError, StateKey, format_id, parse_id
from harness.states.strategies import STRATEGIES, TORN_PATTERNS, Options

__all__ = [
    "STRATEGIES",
    "TORN_PATTERNS",
    "Cut",
    "Enumeration",
    "Epoch",
    "Options",
    "OverlayImage",
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
    "write_state_image",
]
