"""The layouts an amazon-eks-ami checkout has had (`LAYOUTS`, `detect`), the variable files and Makefile
defaults of each, the JSON template read, and the converted `UpstreamTemplate`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amibuild import hcl
from amibuild.errors import UpstreamError


# os -> [(layout, template, variables file)], relative to the checkout root, newest layout first.
# The templates layout also has per-minor files beside variables-default.json (see `makefile_var_files`).
LAYOUTS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "al2": (
        ("templates", "templates/al2/template.json", "templates/al2/variables-default.json"),
        ("root", "eks-worker-al2.json", "eks-worker-al2-variables.json"),
    ),
    "al2023": (
        ("templates", "templates/al2023/template.json", "templates/al2023/variables-default.json"),
    ),
}


@dataclass(frozen=True)
class UpstreamTemplate:
    """An upstream template, converted; `hcl_document` writes it out."""

    root: Path
    layout: str  # "root" | "templates"
    template: Path  # the JSON template file
    variables: dict[str, Any]  # name -> JSON default after the variable files (None = null)
    dropped: tuple[str, ...]  # credential variables removed
    declarations: tuple[hcl.Block, ...]  # `variable` blocks, then `locals` for derived defaults
    source: tuple[Any, ...]  # hcl.Attr / hcl.Block items of the amazon-ebs source
    provisioners: tuple[hcl.Block, ...]
    insert_at: int  # where amibuild's packages and user scripts go: after every installer
    remote: tuple[bool, ...]  # per provisioner: needs a connection to the instance
    notes: tuple[str, ...]  # what was dropped or skipped and why, for the file header
    os: str = "al2"
    required: frozenset[str] = frozenset()  # null in the template and set by no variable file
    var_files: tuple[Path, ...] = ()  # the variable files applied, in order
    labels: tuple[str, ...] = ()  # per provisioner: a short name for the order shown by render


def detect(root: Path, os_family: str = "al2") -> tuple[str, Path, Path]:
    """(layout, template, variables-default file) for ``os_family`` in the checkout at ``root``."""
    root = Path(root)
    for layout, template, defaults in LAYOUTS.get(os_family, ()):
        if (root / template).is_file():
            return layout, root / template, root / defaults
    others = [os_ for os_ in LAYOUTS if os_ != os_family and any((root / t).is_file() for _, t, _ in LAYOUTS[os_])]
    if others:
        why = " (upstream removed its AL2 template in 2026-03)" if os_family == "al2" else ""
        ref = "an older" if os_family == "al2" else "a newer"  # AL2023 arrived in 2024, AL2 left in 2026
        raise UpstreamError(
            f"the amazon-eks-ami checkout {root} has no {os_family} template{why}, only "
            f"{', '.join(others)}: use --os {others[0]} (os = \"{others[0]}\"), or {ref} --upstream-ref"
        )
    wanted = " or ".join(t for _, t, _ in LAYOUTS.get(os_family, ()))
    raise UpstreamError(f"{root} holds no {wanted}: point at an awslabs/amazon-eks-ami checkout")


def makefile_var_files(layout: str, defaults_file: Path, k8s: str | None) -> list[Path]:
    """The variable files upstream's Makefile passes with -var-file, in its order."""
    files = [defaults_file] if defaults_file.is_file() else []
    minor = ".".join(k8s.split(".")[:2]) if k8s else ""
    if layout == "templates" and minor:
        per_minor = defaults_file.with_name(f"variables-{minor}.json")
        if per_minor.is_file():
            files.append(per_minor)
    return files


# The last root-layout Makefiles (2023 to 2024-01) set some variables by Kubernetes version:
#   ifeq ($(call vercmp,$(kubernetes_version),gteq,1.25.0), true)
#       docker_version ?= none
#   endif
# (the templates layout moved such settings into variables-1.N.json).
_MAKE_VERSION_BLOCK = re.compile(
    r"^ifeq \(\$\(call vercmp,\$\(kubernetes_version\),gteq,([0-9.]+)\), true\)\n(.*?)^endif", re.M | re.S
)
_MAKE_DEFAULT = re.compile(r"^\s*([a-z_][a-z0-9_]*) \?= (.*?)\s*$", re.M | re.ASCII)


def makefile_defaults(root: Path, k8s: str | None) -> dict[str, str]:
    """Variables upstream's Makefile sets for this Kubernetes version (``?=``: yours still win)."""
    makefile = Path(root) / "Makefile"
    if not k8s or not makefile.is_file():
        return {}
    wanted = tuple(int(p) for p in (k8s.split(".") + ["0"])[:3])
    out: dict[str, str] = {}
    for since, body in _MAKE_VERSION_BLOCK.findall(makefile.read_text(encoding="utf-8", errors="replace")):
        if wanted >= tuple(int(p) for p in since.split(".")):
            out.update(_MAKE_DEFAULT.findall(body))
    return out


def read_json_object(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UpstreamError(f"cannot read {path}: {exc.strerror}; check the checkout") from exc
    except ValueError as exc:
        raise UpstreamError(f"{path} is not valid JSON ({exc}): check the checkout") from exc
    return json_object(doc, path, "the file")


def json_object(value: Any, path: Path, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UpstreamError(f"{path}: {what} is not a JSON object: check the checkout")
    return value


def amazon_ebs_builder(doc: dict[str, Any], path: Path) -> tuple[str, dict[str, Any]]:
    ebs = [b for b in doc.get("builders") or [] if isinstance(b, dict) and b.get("type") == "amazon-ebs"]
    if len(ebs) != 1:
        raise UpstreamError(
            f"{path} has {len(ebs)} amazon-ebs builders, amibuild needs exactly one: "
            "check the checkout and ref"
        )
    return str(ebs[0].get("name") or "amazon-ebs"), ebs[0]
