"""What changed between two images: packages, the node's key versions, settings, vulnerabilities. Pure.

`diff` takes each side's facts (its packages, its fingerprint inputs, its scan findings, if any)
and says what a team reviews before it promotes: packages added, removed and changed with their
versions; the kernel, kubelet, containerd and nodeadm versions; the settings that differ; the
vulnerabilities the newer image fixes and the ones it brings.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from amibuild.inventory.packages import Package, by_key, compare_evr, evr_key

# The packages whose versions make a node what it is, in the order a reviewer reads them.
KEY_PACKAGES = {"kernel": ("kernel",), "kubelet": ("kubelet", "kubernetes-kubelet"),
                "containerd": ("containerd",), "nodeadm": ("nodeadm", "amazon-eks-nodeadm")}


@dataclass(frozen=True)
class Side:
    """One image as the diff sees it."""

    label: str  # what the user named: a channel, an AMI, a run id
    image: str
    packages: tuple[Package, ...]
    inputs: Mapping[str, Any] = field(default_factory=dict)  # the fingerprint's inputs
    findings: tuple[str, ...] | None = None  # vulnerability ids found in its scan (None: never scanned)


@dataclass(frozen=True)
class Change:
    name: str
    arch: str
    old: str  # "" when added
    new: str  # "" when removed

    @property
    def kind(self) -> str:
        if not self.old:
            return "added"
        if not self.new:
            return "removed"
        return "upgraded" if compare_evr(self.new, self.old) > 0 else "downgraded"


@dataclass(frozen=True)
class ImageDiff:
    old: Side
    new: Side
    packages: tuple[Change, ...]
    key_versions: Mapping[str, tuple[str, str]]  # what -> (old, new), "" where the image has none
    settings: Mapping[str, tuple[Any, Any]]  # fingerprint input -> (old, new), only those that differ
    fixed: tuple[str, ...] | None  # None: a side was not scanned
    introduced: tuple[str, ...] | None

    def counts(self) -> dict[str, int]:
        kinds = Counter(change.kind for change in self.packages)
        return {kind: kinds[kind] for kind in ("added", "removed", "upgraded", "downgraded")}

    def summary(self) -> str:
        """One line, for `promote`."""
        c = self.counts()
        parts = [f"{c['added']} added, {c['removed']} removed, {c['upgraded'] + c['downgraded']} changed"]
        keys = [f"{what} {old or '-'} -> {new or '-'}" for what, (old, new) in self.key_versions.items() if old != new]
        if keys:
            parts.append(", ".join(keys))
        if self.settings:
            parts.append(f"{len(self.settings)} setting(s) differ")
        if self.fixed is not None and self.introduced is not None:
            parts.append(f"{len(self.fixed)} vulnerabilities fixed, {len(self.introduced)} introduced")
        return f"{self.old.image} -> {self.new.image}: packages " + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"from": {"label": self.old.label, "image": self.old.image},
                "to": {"label": self.new.label, "image": self.new.image},
                "packages": [{"name": c.name, "arch": c.arch, "change": c.kind, "from": c.old or None,
                              "to": c.new or None} for c in self.packages],
                "counts": self.counts(),
                "versions": {k: {"from": o or None, "to": n or None} for k, (o, n) in self.key_versions.items()},
                "settings": {k: {"from": o, "to": n} for k, (o, n) in self.settings.items()},
                "vulnerabilities": None if self.fixed is None else {"fixed": list(self.fixed),
                                                                    "introduced": list(self.introduced or ())}}


def diff(old: Side, new: Side) -> ImageDiff:
    before, after = by_key(old.packages), by_key(new.packages)
    changes = []
    for key in sorted(before.keys() | after.keys()):
        a, b = before.get(key), after.get(key)
        if a is not None and b is not None and compare_evr(a.evr, b.evr) == 0:
            continue
        changes.append(Change(key[0], key[1], a.evr if a else "", b.evr if b else ""))
    settings = {k: (old.inputs.get(k), new.inputs.get(k)) for k in sorted(old.inputs.keys() | new.inputs.keys())
                if old.inputs.get(k) != new.inputs.get(k)}
    fixed = introduced = None
    if old.findings is not None and new.findings is not None:
        fixed = tuple(sorted(set(old.findings) - set(new.findings)))
        introduced = tuple(sorted(set(new.findings) - set(old.findings)))
    return ImageDiff(old, new, tuple(changes), _key_versions(old.packages, new.packages), settings, fixed, introduced)


def _key_versions(old: Sequence[Package], new: Sequence[Package]) -> dict[str, tuple[str, str]]:
    def newest(packages: Sequence[Package], names: tuple[str, ...]) -> str:
        return max((p.evr for p in packages if p.name in names), key=evr_key, default="")

    return {what: (newest(old, names), newest(new, names)) for what, names in KEY_PACKAGES.items()}


def named(label: str, ami: str) -> str:
    """An image as the user named it, with its AMI id when the name is not the id: `stable (ami-...)`."""
    return ami if label == ami else f"{label} ({ami})"


def lines(result: ImageDiff) -> list[str]:
    out = [f"{named(result.old.label, result.old.image)} -> {named(result.new.label, result.new.image)}"]
    out += [f"  {what:<10} {o or '-'}" + ("" if o == n else f" -> {n or '-'}") for what, (o, n) in result.key_versions.items()]
    c = result.counts()
    out.append(f"  packages: {c['added']} added, {c['removed']} removed, {c['upgraded']} upgraded, "
               f"{c['downgraded']} downgraded")
    for change in result.packages:
        sign = {"added": "+", "removed": "-"}.get(change.kind, "~")
        out.append(f"    {sign} {change.name}.{change.arch} " + (
            change.new if change.kind == "added" else change.old if change.kind == "removed"
            else f"{change.old} -> {change.new}"))
    out += [f"  setting {key}: {o!r} -> {n!r}" for key, (o, n) in result.settings.items()]
    if result.fixed is None:
        out.append("  vulnerabilities: not compared (scan both images: `amibuild scan`)")
    else:
        out.append(f"  vulnerabilities: {len(result.fixed)} fixed" + (f" ({', '.join(result.fixed)})" if result.fixed else "")
                   + f", {len(result.introduced or ())} introduced"
                   + (f" ({', '.join(result.introduced or ())})" if result.introduced else ""))
    return out


def markdown(result: ImageDiff) -> str:
    out = [f"### {result.old.label} → {result.new.label}", "",
           f"`{result.old.image}` → `{result.new.image}`", "", "| | from | to |", "|---|---|---|"]
    out += [f"| {what} | {o or '-'} | {n or '-'} |" for what, (o, n) in result.key_versions.items()]
    c = result.counts()
    out += ["", f"**Packages:** {c['added']} added, {c['removed']} removed, {c['upgraded']} upgraded, "
                f"{c['downgraded']} downgraded", ""]
    if result.packages:
        out += ["| package | change | from | to |", "|---|---|---|---|"]
        out += [f"| {ch.name}.{ch.arch} | {ch.kind} | {ch.old or '-'} | {ch.new or '-'} |" for ch in result.packages]
    if result.settings:
        out += ["", "**Settings:**", ""] + [f"- `{k}`: `{o!r}` → `{n!r}`" for k, (o, n) in result.settings.items()]
    if result.fixed is not None:
        out += ["", f"**Vulnerabilities:** {len(result.fixed)} fixed, {len(result.introduced or ())} introduced"]
    return "\n".join(out) + "\n"
