"""An image's packages as an SBOM: CycloneDX JSON through cyclonedx-python-lib, SPDX 2.3, a table. Pure.

CycloneDX 1.5 is the form kept (Inspector's ScanSbom takes only 1.5); 1.6 is made from the same
packages on demand. Each component is an rpm with its package URL, which vulnerability matching
uses: ``pkg:rpm/amazon/NAME@VERSION-RELEASE?arch=ARCH&distro=amazon-2023`` (``epoch=N`` when the
epoch is not 0), with the repository it came from and the license rpm gives as properties.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Iterable, Mapping

from cyclonedx.model import Property
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.license import DisjunctiveLicense
from cyclonedx.output.json import JsonV1Dot5, JsonV1Dot6
from packageurl import PackageURL

from amibuild.inventory.packages import Package

SPEC_VERSIONS = {"1.5": JsonV1Dot5, "1.6": JsonV1Dot6}
DISTRO = {"al2023": "amazon-2023", "al2": "amazon-2"}
REPO_PROPERTY = "amibuild:rpm:repository"
EPOCH_PROPERTY = "amibuild:rpm:epoch"
RELEASE_PROPERTY = "amibuild:rpm:release"
ARCH_PROPERTY = "amibuild:rpm:arch"


def purl(package: Package, os_name: str) -> PackageURL:
    qualifiers = {"arch": package.arch, "distro": DISTRO.get(os_name, os_name)}
    if package.epoch:
        qualifiers["epoch"] = str(package.epoch)
    return PackageURL("rpm", "amazon", package.name, f"{package.version}-{package.release}", qualifiers)


def cyclonedx(packages: Iterable[Package], *, os_name: str, image: str = "", created: datetime | None = None,
              spec_version: str = "1.5") -> str:
    """The CycloneDX JSON document of ``packages`` (an operating system's rpm list), ``image`` its subject."""
    bom = Bom()
    if created is not None:
        bom.metadata.timestamp = created
    root = Component(name=image, type=ComponentType.OPERATING_SYSTEM, bom_ref=f"image:{image}") if image else None
    if root is not None:
        bom.metadata.component = root
    components = []
    for package in packages:
        url = purl(package, os_name)
        properties = [Property(name=ARCH_PROPERTY, value=package.arch),
                      Property(name=RELEASE_PROPERTY, value=package.release)]
        if package.epoch:
            properties.append(Property(name=EPOCH_PROPERTY, value=str(package.epoch)))
        if package.repo:
            properties.append(Property(name=REPO_PROPERTY, value=package.repo))
        components.append(Component(
            name=package.name, version=f"{package.version}-{package.release}", type=ComponentType.LIBRARY,
            purl=url, bom_ref=url.to_string(), properties=properties,
            licenses=[DisjunctiveLicense(name=package.license)] if package.license else None))
    bom.components.update(components)
    if root is not None:  # the image holds every package: a complete dependency graph
        bom.register_dependency(root, components)
    return SPEC_VERSIONS[spec_version](bom).output_as_string(indent=None)


def packages_of(document: str | Mapping[str, Any]) -> tuple[Package, ...]:
    """The packages a CycloneDX document of `cyclonedx` lists (for a stored SBOM)."""
    data = json.loads(document) if isinstance(document, str) else document
    out = []
    for component in data.get("components", []):
        properties = {p.get("name"): p.get("value", "") for p in component.get("properties", [])}
        version, _, release = str(component.get("version", "")).partition("-")
        release = properties.get(RELEASE_PROPERTY, release)
        if release and str(component.get("version", "")).endswith("-" + release):
            version = str(component["version"])[: -len(release) - 1]
        licenses = [entry.get("license", {}).get("name") or entry.get("expression", "")
                    for entry in component.get("licenses", [])]
        out.append(Package(component.get("name", ""), int(properties.get(EPOCH_PROPERTY, "0") or 0), version,
                           release, properties.get(ARCH_PROPERTY, ""), properties.get(REPO_PROPERTY, ""),
                           " AND ".join(x for x in licenses if x)))
    return tuple(sorted(out))


def spdx(packages: Iterable[Package], *, os_name: str, image: str, created: datetime) -> str:
    """An SPDX 2.3 JSON document of the same packages (the rpm purls as external references)."""
    items = [{
        "SPDXID": f"SPDXRef-Package-{index}", "name": package.name,
        "versionInfo": package.evr, "downloadLocation": "NOASSERTION",
        "licenseDeclared": "NOASSERTION", "licenseComments": package.license or "",
        "supplier": "Organization: Amazon Web Services", "filesAnalyzed": False,
        "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                          "referenceLocator": purl(package, os_name).to_string()}],
    } for index, package in enumerate(packages, start=1)]
    document = {
        "spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"amibuild image {image}", "documentNamespace": f"https://amibuild.invalid/spdx/{image}",
        "creationInfo": {"created": created.strftime("%Y-%m-%dT%H:%M:%SZ"), "creators": ["Tool: amibuild"]},
        "packages": items,
        "relationships": [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                           "relatedSpdxElement": item["SPDXID"]} for item in items],
    }
    return json.dumps(document, indent=2, sort_keys=True)


def table(packages: Iterable[Package]) -> list[str]:
    rows = [(p.name, p.evr, p.arch, p.repo or "-", p.license or "-") for p in packages]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(("NAME", "VERSION", "ARCH", "REPOSITORY"))]
    head = ("NAME", "VERSION", "ARCH", "REPOSITORY", "LICENSE")
    out = ["  ".join(h.ljust(w) for h, w in zip(head[:4], widths, strict=True)) + "  " + head[4]]
    out += ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4] for r in rows]
    return out
