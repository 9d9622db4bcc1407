"""What is inside an image: its packages, as a CycloneDX SBOM, compared image to image, and scanned.

    packages.py  `Package` (name, epoch:version-release.arch, repository, license), the inventory
                 step's output parsed, and rpm's version order (`compare_evr`)
    sbom.py      packages -> CycloneDX 1.5 JSON (cyclonedx-python-lib) and back; SPDX and a table
    diff.py      two images' packages, key versions and settings, side by side
    scan.py      the SBOM in batches for Inspector's ScanSbom, its findings, the `scanned` gate
Pure: the gateway (amibuild.aws) fetches and sends.
"""
