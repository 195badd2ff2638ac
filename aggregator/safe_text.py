"""Device-controlled text made safe to show people: visible escapes and CSV cells.

Values of string metrics are whatever enough devices reported, and labels whatever an
admin typed: a zero-width space, a bidi override or a control character would hide or
reorder what an operator reads, and a cell starting with ``=`` is a live formula in a
spreadsheet. :func:`visible` writes every character that does not print as an escape
(``pay\\u200bpal.com``); :func:`visible_parts` splits the same way for styled output (the
CLI's tables); :func:`csv_text` adds OWASP's rule for CSV injection. JSON and Parquet
keep the raw text. The dashboard's twin is ``LDP.visible`` in ``web/static/ldp.js``
(the same characters, the same escapes; a browser test holds the two together).
:func:`comma_list` reads a list that people typed (``?fields=``, an environment variable),
and :func:`not_among` quotes the items of one that are not allowed, shortened.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Container, Iterable

__all__ = [
    "FORMULA_STARTS",
    "comma_list",
    "not_among",
    "csv_text",
    "escape",
    "is_hidden",
    "visible",
    "visible_parts",
]

HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn", "Cs", "Zl", "Zp"})
"""Controls, format characters (zero-width, bidi embeddings, overrides and isolates, tag
characters, the BOM), private use, unassigned and surrogates, line and paragraph
separators: none of them prints a glyph of its own."""

HIDDEN_EXTRA = frozenset("\u034f\u115f\u1160\u180b\u180c\u180d\u180f\u3164\uffa0")
"""Blank characters of other categories: the combining grapheme joiner, the Hangul
fillers and the Mongolian free variation selectors (U+180E is Cf already)."""

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""First characters a spreadsheet reads as a formula (OWASP, "CSV Injection")."""


def is_hidden(char: str) -> bool:
    """Whether one character prints nothing visible of its own."""
    return char in HIDDEN_EXTRA or unicodedata.category(char) in HIDDEN_CATEGORIES


def escape(char: str) -> str:
    """``\\u200b`` (four hex digits) or, beyond the BMP, ``\\U000e0041`` (eight)."""
    point = ord(char)
    return f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}"


def visible(text: str) -> str:
    """``text`` with each hidden character (:func:`is_hidden`) written as its escape."""
    if text.isprintable() and not any(c in HIDDEN_EXTRA for c in text):
        return text  # the common case, without a per-character walk
    return "".join(escape(c) if is_hidden(c) else c for c in text)


def visible_parts(text: str) -> list[tuple[str, bool]]:
    """``text`` as runs of (text, is an escape), for output that styles the escapes."""
    parts: list[tuple[str, bool]] = []
    run: list[str] = []
    for c in text:
        if is_hidden(c):
            if run:
                parts.append(("".join(run), False))
                run = []
            parts.append((escape(c), True))
        else:
            run.append(c)
    if run:
        parts.append(("".join(run), False))
    return parts


def csv_text(text: str) -> str:
    """A text cell for a CSV file: hidden characters escaped (:func:`visible`), and a
    single quote before a first character a spreadsheet would take for a formula.

    Only for cells of text (values, labels): a number's minus sign must stay.
    """
    shown = visible(text)
    return "'" + shown if shown.startswith(FORMULA_STARTS) else shown


def comma_list(raw: str) -> tuple[str, ...]:
    """The items of a comma-separated list, each stripped, the empty ones left out:
    ``" a, ,b,"`` is ``("a", "b")``."""
    return tuple(filter(None, (part.strip() for part in raw.split(","))))


def not_among(items: Iterable[str], allowed: Container[str]) -> list[str]:
    """The ``items`` not in ``allowed``, each cut to 40 characters (to be quoted in a
    refusal, whatever length was sent)."""
    return [item[:40] for item in items if item not in allowed]
