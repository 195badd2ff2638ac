"""Which byte strings a device can send as a string metric's value, for the discovery walk.

The SDK sends :func:`client_sdk.mechanisms.strings.normalise` of a text: NFC, valid UTF-8,
truncated at a character boundary, then NUL padding to the end. So every prefix of a sent
value is a valid UTF-8 *prefix* (its last character may be cut) whose complete
characters are NFC text, followed by NULs only. Discovery extends only such prefixes and
tests only such complete values: a candidate no device can send cannot be present, and
testing it would only add a chance of a false discovery and a hypothesis to correct for.

Validity is a byte automaton (:data:`TRANSITIONS`: the well-formed UTF-8 sequences of
the Unicode Standard, Table 3-7, plus the padding), run on whole columns of candidates;
NFC is checked when a prefix's last multi-byte character completes (an ASCII character
never combines with the text before it). A prefix of an NFC text at a character boundary
is NFC, so checking each completed prefix loses no value a device can send.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import numpy.typing as npt

__all__ = ["BOUNDARY", "DEAD", "PADDING", "TRANSITIONS", "advance", "complete_nfc", "states"]

BOUNDARY, PADDING, DEAD = 0, 8, 9
"""Automaton states: at a character boundary; inside the NUL padding; no device sends it.
States 1–7 are inside a multi-byte character (how many continuation bytes are left and,
for E0, ED, F0, F4, the narrower range of the next one)."""


def _transitions() -> npt.NDArray[np.int8]:
    t = np.full((10, 256), DEAD, dtype=np.int8)
    t[BOUNDARY, 0x00] = PADDING
    t[BOUNDARY, 0x01:0x80] = BOUNDARY
    t[BOUNDARY, 0xC2:0xE0] = 1
    t[BOUNDARY, 0xE0] = 4
    t[BOUNDARY, 0xE1:0xED] = 2
    t[BOUNDARY, 0xED] = 5
    t[BOUNDARY, 0xEE:0xF0] = 2
    t[BOUNDARY, 0xF0] = 6
    t[BOUNDARY, 0xF1:0xF4] = 3
    t[BOUNDARY, 0xF4] = 7
    t[1, 0x80:0xC0] = BOUNDARY  # the last continuation byte
    t[2, 0x80:0xC0] = 1
    t[3, 0x80:0xC0] = 2
    t[4, 0xA0:0xC0] = 1  # E0: no overlong three-byte form
    t[5, 0x80:0xA0] = 1  # ED: no surrogate
    t[6, 0x90:0xC0] = 2  # F0: no overlong four-byte form
    t[7, 0x80:0x90] = 2  # F4: nothing above U+10FFFF
    t[PADDING, 0x00] = PADDING
    return t


TRANSITIONS = _transitions()
"""TRANSITIONS[state, byte]: the state after reading ``byte``."""


def advance(state: npt.NDArray[np.int8], byte: npt.NDArray[np.uint8]) -> npt.NDArray[np.int8]:
    """The states after one more byte (elementwise)."""
    return TRANSITIONS[state, byte]


def states(values: npt.NDArray[np.uint8]) -> npt.NDArray[np.int8]:
    """The state of each row of an (N, l) byte matrix after all its bytes."""
    state = np.zeros(len(values), dtype=np.int8)
    for j in range(values.shape[1]):
        state = advance(state, values[:, j])
    return state


def complete_nfc(rows: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    """Per row of bytes that end at a character boundary (no NUL inside), whether it is NFC
    text (one :func:`unicodedata.is_normalized` each: call it on the few rows whose last
    character is multi-byte)."""
    return np.array(
        [unicodedata.is_normalized("NFC", row.tobytes().decode("utf-8")) for row in rows],
        dtype=bool,
    )
