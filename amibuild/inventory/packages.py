"""An image's installed packages: the inventory step's output parsed, and rpm's version order. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cmp_to_key
from typing import Iterable

from amibuild.errors import AmibuildError

# The inventory step prints one package a line: name, epoch, version, release, arch, repository, license,
# separated by tabs (rpm's "(none)" for no epoch, "" for a repository dnf/yum does not know).
FIELDS = ("name", "epoch", "version", "release", "arch", "repo", "license")


class InventoryUnreadable(AmibuildError):
    """The inventory step's output is not what it prints."""


@dataclass(frozen=True, order=True)
class Package:
    name: str
    epoch: int
    version: str
    release: str
    arch: str
    repo: str = ""
    license: str = ""

    @property
    def evr(self) -> str:
        """epoch:version-release, the epoch left out when it is 0 (as rpm -q prints it)."""
        return f"{self.epoch}:{self.version}-{self.release}" if self.epoch else f"{self.version}-{self.release}"

    @property
    def key(self) -> tuple[str, str]:
        """What identifies a package across images: its name and arch (several arches can be installed)."""
        return self.name, self.arch

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "epoch": self.epoch, "version": self.version, "release": self.release,
                "arch": self.arch, "evr": self.evr, "repo": self.repo, "license": self.license}


def parse_inventory(text: str) -> tuple[Package, ...]:
    """The inventory step's lines -> packages, sorted; a malformed line is an error naming it."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(FIELDS):
            raise InventoryUnreadable(f"inventory line {number}: {len(fields)} fields, expected {len(FIELDS)} "
                                      f"({', '.join(FIELDS)})")
        name, epoch, version, release, arch, repo, license_ = fields
        if name == "gpg-pubkey" and arch == "(none)":  # rpm's entry for an imported signing key, no package
            continue
        if not name or not version:
            raise InventoryUnreadable(f"inventory line {number}: no name or version")
        if epoch in ("", "(none)"):
            epoch = "0"
        if not re.fullmatch(r"[0-9]{1,9}", epoch):
            raise InventoryUnreadable(f"inventory line {number}: epoch {epoch!r} is not a number")
        out.append(Package(name, int(epoch), version, release, arch, repo.lstrip("@"), license_))
    return tuple(sorted(set(out)))


# ------------------------------------------------------------------------------- rpm's order

_SEGMENT = re.compile(r"~|\^|[0-9]+|[A-Za-z]+", re.ASCII)


def rpmvercmp(a: str, b: str) -> int:
    """rpm's comparison of two version (or release) strings: -1, 0 or 1.

    Segments of digits compare as numbers, letters as text, a number beats letters; `~` sorts
    before anything (pre-releases), `^` after the end but before any other segment."""
    if a == b:
        return 0
    left, right = _SEGMENT.findall(a), _SEGMENT.findall(b)
    while left or right:
        x = left.pop(0) if left else None
        y = right.pop(0) if right else None
        if x == "~" or y == "~":
            if x != y:
                return -1 if x == "~" else 1
            continue
        if x is None:
            return -1
        if y is None:
            return 1
        if x == "^" or y == "^":
            if x != y:
                return -1 if x == "^" else 1
            continue
        if x.isdigit() != y.isdigit():
            return 1 if x.isdigit() else -1
        if x.isdigit():
            nx, ny = int(x), int(y)
            if nx != ny:
                return -1 if nx < ny else 1
        elif x != y:
            return -1 if x < y else 1
    return 0


def split_evr(evr: str) -> tuple[int, str, str]:
    """"1:2.3-4.amzn2023" -> (1, "2.3", "4.amzn2023"); no epoch is 0, no release is ""."""
    epoch, colon, rest = evr.partition(":")
    if not colon:
        epoch, rest = "0", evr
    version, _, release = rest.partition("-")
    return int(epoch or 0), version, release


def compare_evr(a: str, b: str) -> int:
    """rpm's order of two epoch:version-release strings: -1, 0 or 1 (a release left out matches any)."""
    ea, va, ra = split_evr(a)
    eb, vb, rb = split_evr(b)
    if ea != eb:
        return -1 if ea < eb else 1
    by_version = rpmvercmp(va, vb)
    if by_version or not ra or not rb:
        return by_version
    return rpmvercmp(ra, rb)


evr_key = cmp_to_key(compare_evr)


def by_key(packages: Iterable[Package]) -> dict[tuple[str, str], Package]:
    """{(name, arch): package}; with several versions of one (the kernel), the newest."""
    out: dict[tuple[str, str], Package] = {}
    for package in packages:
        kept = out.get(package.key)
        if kept is None or compare_evr(package.evr, kept.evr) > 0:
            out[package.key] = package
    return out
