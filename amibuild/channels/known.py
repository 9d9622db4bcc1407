"""Which channel names a command may use: declared, conventional, or already there.

A channel is known when a ``channel "NAME"`` block declares it (or names it in ``from``), when it
is the pipeline's default channel or one of the conventional `CONVENTIONAL`, or when an SSM
parameter of it already exists for the variant. Any other name is a typo until said otherwise
(``--new-channel`` or a ``channel`` block): ``promote --to stabel`` would otherwise make a new
channel beside the gated ``stable``. `decide` is pure (the name and the facts); `require` runs it,
and asks AWS whether the channel exists only when the pure answer is `Known.LOOK`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from amibuild.aws import Aws, fan_out
from amibuild.channels import read
from amibuild.errors import SpecError
from amibuild.pipeline.naming import DEFAULT_CHANNEL, check_channel, parameter_name
from amibuild.suggest import suggest

CONVENTIONAL = (DEFAULT_CHANNEL, "candidate", "stable")


class Known(enum.StrEnum):
    DECLARED = "declared"  # a channel block names it, the default channel, or a conventional name
    EXISTS = "exists"  # a parameter of it exists for the variant
    NEW = "new"  # --new-channel: the caller means a new name
    LOOK = "look"  # not known from the file: whether it exists decides
    UNKNOWN = "unknown"  # none of the above: refused


def declared(pipeline: Any) -> tuple[str, ...]:
    """Every channel name the pipeline file vouches for, conventional ones first."""
    gates = getattr(pipeline, "gates", {}) or {}
    named = [*CONVENTIONAL, getattr(pipeline, "default_channel", "") or DEFAULT_CHANNEL, *gates,
             *(g.source for g in gates.values() if getattr(g, "source", ""))]
    return tuple(dict.fromkeys(n for n in named if n))


def decide(name: str, *, declared: Iterable[str], existing: Iterable[str] | None = None,
           new_channel: bool = False) -> Known:
    """Whether ``name`` may be used. Pure. ``existing``: the channels that exist for the variant
    (None: not looked at yet, so a name the file does not vouch for asks `Known.LOOK`)."""
    if name in set(declared):
        return Known.DECLARED
    if new_channel:
        return Known.NEW
    if existing is None:
        return Known.LOOK
    return Known.EXISTS if name in set(existing) else Known.UNKNOWN


def refusal(name: str, *, flag: str, declared: Sequence[str], existing: Sequence[str], where: str,
            can_create: bool) -> SpecError:
    """The exit-2 line for an unknown channel name: the near miss, what is known, how to add one."""
    known = list(dict.fromkeys([*declared, *sorted(existing)]))
    how = (f"declare it with a channel \"{name}\" {{ }} block in the pipeline file, or pass --new-channel to "
           "create it" if can_create else "publish to it first (`amibuild publish --new-channel` or a channel block)")
    return SpecError(f"{flag} {name}: no such channel{suggest(name, known)}: it is not declared in the pipeline "
                     f"file and does not exist for {where}; known channels: {', '.join(known)}; nothing was "
                     f"written. To make a new channel, {how}")


@dataclass(frozen=True)
class Asked:
    """One channel name a command was given: the flag that named it, and whether it may be new."""

    name: str
    flag: str = "--channel"
    new_channel: bool = False  # --new-channel was given
    can_create: bool = False  # the command writes the channel (publish, promote --to, build-ami)


def require(aws: Aws, pipeline: Any, variants: Sequence[Any], *asked: Asked, every: bool = True,
            regions: Sequence[str] | None = None) -> dict[str, Known]:
    """Refuse (`SpecError`, exit 2) any channel name that is neither declared, conventional nor there.

    Every pure answer comes first, with no AWS call; only names the file does not vouch for are
    looked up: their parameter for each of ``variants`` in ``regions`` (default: the pipeline's
    target regions), ten names a call. ``every``: it must exist for every variant (a write to
    each); else for any of them (a read that filters by channel). Name -> how it is known."""
    for one in asked:
        try:
            check_channel(one.name)
        except SpecError as exc:
            raise SpecError(f"{one.flag}: {exc}") from None
    vouched = declared(pipeline)
    answers = {a.name: decide(a.name, declared=vouched, new_channel=a.new_channel) for a in asked}
    looked = [a for a in asked if answers[a.name] is Known.LOOK]
    if not looked:
        return answers
    where = tuple(regions or pipeline.target_regions)
    names = {parameter_name(pipeline, v, a.name): (a.name, v.name) for a in looked for v in variants}
    found = fan_out(where, lambda region: aws.get_parameters(list(names), region))
    holding = {names[n] for region in where for n in found[region]}
    for one in looked:
        have = {v.name for v in variants if (one.name, v.name) in holding}
        exists = bool(variants) and (len(have) == len(variants) if every else bool(have))
        answers[one.name] = decide(one.name, declared=vouched, existing=[one.name] if exists else [])
        if answers[one.name] is Known.UNKNOWN:
            lacking = sorted({v.name for v in variants} - have) if every else []
            what = f"variant {', '.join(lacking)}" if lacking else "any variant"
            raise refusal(one.name, flag=one.flag, declared=vouched,
                          existing=_others(aws, pipeline, variants, where), where=f"{what} in {', '.join(where)}",
                          can_create=one.can_create)
    return answers


def _others(aws: Aws, pipeline: Any, variants: Sequence[Any], regions: Sequence[str]) -> list[str]:
    """The channels that do exist for these variants: what a near miss is compared with (on the way
    to the error only)."""
    wanted = {v.name for v in variants}
    return sorted({e.channel for e in read.channels(aws, pipeline=pipeline, regions=regions)
                   if e.variant in wanted and e.ami})
