"""`amibuild diff` of two images with 1,500 packages each: the comparison itself, in process.

Two inventories of 1,500 rpms (names, epochs, versions and releases of the shapes Amazon Linux
uses), the second with 40 packages upgraded, 10 removed and 10 added; each parsed from the
inventory step's text, turned into a CycloneDX 1.5 SBOM (as stored), read back, and compared.
Fastest of 5 runs of the diff (parse + compare), and of the SBOM round trip on its own.
"""

from __future__ import annotations

import time

from benchmarks.common import Report, Row, Target

NAME = "diff_packages"
DESCRIPTION = "diff of two images with 1,500 packages each (target <= 1 s)"
RUNS = 5


def _inventory(count: int, *, changed: int = 0, removed: int = 0, added: int = 0) -> str:
    lines = []
    for i in range(count - removed):
        version = f"{1 + i % 7}.{i % 13}.{i % 5}"
        release = f"{2 + (i < changed)}.amzn2023.0.{i % 4}"
        epoch = "(none)" if i % 9 else str(i % 3)
        lines.append(f"pkg-{i:04d}\t{epoch}\t{version}\t{release}\tx86_64\t@amazonlinux\tMIT")
    lines += [f"new-{i:03d}\t(none)\t1.0\t1.amzn2023\tnoarch\t@amazonlinux\tMIT" for i in range(added)]
    return "\n".join(lines) + "\n"


def _fastest(action) -> float:
    samples = []
    for _ in range(RUNS):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return min(samples)


def run() -> Report:
    from amibuild.inventory import diff
    from amibuild.inventory.packages import parse_inventory
    from amibuild.inventory.sbom import cyclonedx, packages_of

    old_text = _inventory(1500)
    new_text = _inventory(1500, changed=40, removed=10, added=10)
    old_doc = cyclonedx(parse_inventory(old_text), os_name="al2023")
    new_doc = cyclonedx(parse_inventory(new_text), os_name="al2023")
    result = []

    def compare() -> None:
        result[:] = [diff.diff(diff.Side("stable", "ami-1", packages_of(old_doc)),
                               diff.Side("recommended", "ami-2", packages_of(new_doc)))]

    seconds = _fastest(compare)
    round_trip = _fastest(lambda: packages_of(cyclonedx(parse_inventory(new_text), os_name="al2023")))
    counts = result[0].counts()
    return Report(
        rows=[
            Row("diff of two stored SBOMs of 1,500 packages (read back + compare)", round(seconds * 1000), "ms",
                Target(1000)),
            Row("  inventory -> CycloneDX 1.5 -> packages, one image", round(round_trip * 1000), "ms"),
        ],
        setup=f"in process, fastest of {RUNS}",
        notes=[f"the diff found {counts['added']} added, {counts['removed']} removed, {counts['upgraded']} upgraded "
               "(of 40 + 10 + 10 made)"],
    )
