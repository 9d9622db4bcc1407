"""The one "did you mean" of amibuild's error lines: `suggest(word, choices)`, and `check_fields`, the
"unknown field" refusal of a block's fields that uses it (with `one_block`, the body of a single block).

A leaf beside `tags.py`, so every layer (the gateway's region check, the pipeline's field checks,
the hand-off's channel names) words a near miss the same way.
"""

from __future__ import annotations

from typing import Any, Iterable
import difflib

from amibuild.errors import SpecError

CUTOFF = 0.6  # difflib's own default: close enough that the suggestion is usually the one meant


def suggest(word: str, choices: Iterable[str], *, cutoff: float = CUTOFF) -> str:
    """" (did you mean 'x'?)" for the closest of ``choices``, or "" when none is close enough."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_fields(block: Iterable[str], known: Iterable[str], where: str, has: str = "") -> None:
    """Refuse the first field of ``block`` not among ``known``: "WHERE: unknown field `KEY`", the near
    miss, and ``has`` (what the block does have) after a "; " when given."""
    for key in block:
        if key not in known:
            raise SpecError(f"{where}: unknown field `{key}`{suggest(key, known)}" + (f"; {has}" if has else ""))


def one_block(value: Any, where: str, usage: str) -> dict[str, Any]:
    """The body of a block written once (python-hcl2 gives a list of one); else "WHERE: write one block: USAGE"."""
    blocks = value if isinstance(value, list) else [value]
    if len(blocks) != 1 or not isinstance(blocks[0], dict):
        raise SpecError(f"{where}: write one block: {usage}")
    return blocks[0]
