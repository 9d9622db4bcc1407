"""Text an image or a check printed, made safe to print, log or put in JSON: control characters shown.

A check's output is data the checked machine wrote: an ESC sequence in it would clear the
operator's screen, set the terminal's title (OSC) or hide a line (CR, backspace). `printable`
shows every control character as an escape (``\\x1b``, ``\\r``, ``\\u202e``), keeping only newline
and tab. Pure.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, the C1 controls (CSI is 0x9b), and the Unicode format
# characters that reorder or hide what a terminal shows (bidi overrides and isolates, zero widths).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
_NAMED = {"\r": "\\r", "\b": "\\b", "\f": "\\f", "\v": "\\v", "\0": "\\0"}


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab written as a visible escape."""
    return _CONTROL.sub(_shown, text)
