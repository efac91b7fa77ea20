"""State IDs: canonical printing, parse ↔ print round trips, bad IDs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import CrashlabError
from harness.states import StateIdError, StateKey, format_id, parse_id
from harness.states.stateid import format_ranges, mask_runs


@pytest.mark.parametrize(
    ("key", "text"),
    [
        (StateKey(0, 0), "e0.p0"),
        (StateKey(17, 0b1111), "e17.p4"),
        (StateKey(17, 0b101111), "e17.k0-3,5"),
        (StateKey(17, 0b1111, ((4, 0b111),)), "e17.p4.t4:0-2"),
        (StateKey(17, 0b101111, ((4, 0b111),)), "e17.k0-3,5.t4:0-2"),
        (StateKey(3, 0b10, ((0, 0b1), (2, 0b1010))), "e3.k1.t0:0.t2:1,3"),
        (StateKey(2, 1 << 9), "e2.k9"),
        (StateKey(123456, 0), "e123456.p0"),
        (StateKey(16, 0b1111100000, last=17), "e16-17.k5-9"),
        (StateKey(16, 0, last=19), "e16-19.p0"),
        (StateKey(17, 0b1111, misdirect=(1234, 8200)), "e17.p4.m1234@8200"),
        (StateKey(17, 0b1111, corrupt=(8211, 1 << 5 | 1 << 4000)), "e17.p4.c8211:5,4000"),
        (StateKey(3, 0b10, ((0, 1),), 4, (1, 7), (9, 0b111)), "e3-4.k1.t0:0.m1@7.c9:0-2"),
    ],
)
def test_examples(key, text):
    assert format_id(key) == text
    assert parse_id(text) == key
    assert str(key) == text


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "expected e<epoch>"),
        ("e", "expected"),
        ("e1", "expected"),
        ("e1.", "expected"),
        ("e1.k", "expected"),
        ("x1.p0", "expected"),
        ("e01.p0", "expected"),
        ("e1.p01", "expected"),
        ("e1.k00", "expected"),
        ("e1.k0-3,5 ", "expected"),
        ("E1.p0", "expected"),
        ("e1.p0.t", "expected"),
        ("e1.p0.t3", "expected"),
        ("e1.p0.t3:", "expected"),
        ("e-1.p0", "expected"),
        ("e1.k0-1,2", "adjacent"),
        ("e1.k3,1", "ascend"),
        ("e1.k1-1", "first < last"),
        ("e1.k3-1", "first < last"),
        ("e1.k0-3", "written 'e1.p4'"),
        ("e1.k0", "written 'e1.p1'"),
        ("e1.p4.t2:0", "both kept and torn"),
        ("e1.p0.t3:0.t2:0", "torn writes must ascend"),
        ("e1.p0.t3:0.t3:1", "torn writes must ascend"),
        ("e1.p0.t3:2,1", "ascend"),
        ("e2-2.p0", "must ascend"),
        ("e3-1.p0", "must ascend"),
        ("e1.p2.m@5", "expected"),
        ("e1.p2.c5:4096", "out of range"),
        ("e1.p2.c5:3,1", "ascend"),
        ("e1.p2.c5:1.m0@3", "expected"),
        ("e1-2.k0-1", "written 'e1-2.p2'"),
        ("e1.k99999999999", "out of range"),
        ("e1.p99999999999", "out of range"),
        ("e1.p0.t99999999999:0", "out of range"),
        ("e1.p0.t1:0-99999999999", "out of range"),
    ],
)
def test_bad_ids_rejected_in_one_line(text, why):
    with pytest.raises(StateIdError) as info:
        parse_id(text)
    msg = str(info.value)
    assert why in msg and "\n" not in msg
    assert isinstance(info.value, CrashlabError)


masks = st.integers(min_value=0, max_value=(1 << 40) - 1)
nonzero_masks = st.integers(min_value=1, max_value=(1 << 20) - 1)


@st.composite
def keys(draw):
    epoch = draw(st.integers(min_value=0, max_value=10**9))
    kept = draw(masks)
    torn_writes = draw(st.sets(st.integers(min_value=0, max_value=60), max_size=4))
    torn = tuple((w, draw(nonzero_masks)) for w in sorted(torn_writes) if not kept >> w & 1)
    last = draw(st.one_of(st.none(), st.integers(min_value=epoch + 1, max_value=epoch + 3)))
    mis = None
    if draw(st.booleans()):
        mis = (
            draw(st.integers(min_value=0, max_value=10**9)),
            draw(st.integers(min_value=0, max_value=(1 << 40) - 1)),
        )
    cor = draw(
        st.one_of(
            st.none(),
            st.tuples(
                st.integers(min_value=0, max_value=(1 << 40) - 1),
                st.integers(min_value=1, max_value=(1 << 4096) - 1),
            ),
        )
    )
    return StateKey(epoch, kept, torn, last, mis, cor)


@settings(max_examples=500, deadline=None)
@given(keys())
def test_round_trip(key):
    text = format_id(key)
    assert parse_id(text) == key
    assert format_id(parse_id(text)) == text
    assert text.isascii() and text.isprintable() and " " not in text


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="ekptmc@.:,-0123456789", max_size=24))
def test_any_string_either_canonical_or_rejected(text):
    try:
        key = parse_id(text)
    except StateIdError as e:
        assert "\n" not in str(e)
    else:
        assert format_id(key) == text


@settings(max_examples=300, deadline=None)
@given(masks)
def test_ranges_cover_exactly_the_mask(mask):
    rebuilt = 0
    for a, b in mask_runs(mask):
        assert a <= b
        rebuilt |= ((1 << (b + 1)) - 1) ^ ((1 << a) - 1)
    assert rebuilt == mask
    assert format_ranges(mask) == ",".join(
        f"{a}" if a == b else f"{a}-{b}" for a, b in mask_runs(mask)
    )


def test_key_rejects_non_canonical_construction():
    with pytest.raises(ValueError):
        StateKey(1, 0b1, ((0, 1),))  # torn and kept
    with pytest.raises(ValueError):
        StateKey(1, 0, ((2, 1), (1, 1)))  # not ascending
    with pytest.raises(ValueError):
        StateKey(1, 0, ((2, 0),))  # empty torn
