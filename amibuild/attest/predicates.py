"""The predicates of amibuild's statements, as plain data, and the readers of their fields. Pure.

`provenance`: a SLSA v1 provenance (https://slsa.dev/provenance/v1) of one variant's build.
``buildDefinition.externalParameters`` holds what the user chose (the pipeline file and its
digest, the variant, the regions); ``internalParameters`` what amibuild derived (the fingerprint
and its inputs, the Packer version); ``resolvedDependencies`` the source AMI and the git commit;
``runDetails`` the builder (amibuild's version), the run id and the times, and in ``byproducts``
the digest of the image's package list once a build records one (`package_list_digest`).

`test`: in-toto's Test Result predicate (result PASSED / WARNED / FAILED and the tests by
outcome) with amibuild's own fields beside it: ``verdict`` (amibuild's word for the whole test),
every check with its result, exit status and seconds, the run, the instance and the times.
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping, Sequence

from amibuild.attest.image_record import canonical_json, image_arn

BUILD_TYPE = "urn:amibuild:build-ami:v1"
BUILDER_ID = "urn:amibuild:build-ami"
PACKAGE_LIST = "package-list"


def provenance(*, amibuild_version: str, pipeline: str, pipeline_file: str | None, pipeline_digest: str | None,
               git_commit: str | None, variant: str, fingerprint: str, inputs: Mapping[str, Any],
               source_amis: Mapping[str, str], account: str, packer_version: str, run_id: str, regions: Sequence[str],
               started: str, finished: str, package_list_digest: str | None = None) -> dict[str, Any]:
    dependencies: list[dict[str, Any]] = [
        {"name": "source-ami", "uri": image_arn(region, "", ami),  # a public image: no account in its ARN
         "annotations": {"region": region, "imageId": ami}}
        for region, ami in sorted(source_amis.items()) if ami
    ]
    if git_commit:
        dependencies.append({"name": "pipeline-repository", "digest": {"gitCommit": git_commit}})
    byproducts = ([{"name": PACKAGE_LIST, "digest": {"sha256": package_list_digest}}] if package_list_digest else [])
    return {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": {
                "pipeline": {"name": pipeline, "file": pipeline_file,
                             "digest": {"sha256": pipeline_digest} if pipeline_digest else None},
                "variant": variant,
                "regions": list(regions),
            },
            "internalParameters": {"fingerprint": fingerprint, "fingerprintInputs": dict(inputs),
                                   "packerVersion": packer_version, "account": account},
            "resolvedDependencies": dependencies,
        },
        "runDetails": {
            "builder": {"id": BUILDER_ID, "version": {"amibuild": amibuild_version, "packer": packer_version}},
            "metadata": {"invocationId": run_id, "startedOn": started or None, "finishedOn": finished or None},
            "byproducts": byproducts,
        },
    }


_RESULTS = {"passed": "PASSED", "failed": "FAILED", "not run": "FAILED"}  # anything else: WARNED


def test(result: Mapping[str, Any], *, finished: str) -> dict[str, Any]:
    """The test predicate of a boot test's result (`imagetest.boot.BootTestResult.to_dict()`)."""
    checks = [{"name": c.get("name"), "stage": c.get("stage"), "result": c.get("result"),
               "exitStatus": c.get("exit_status"), "seconds": c.get("seconds")} for c in result.get("checks", [])]

    def named(outcome: str) -> list[str]:
        return [str(c["name"]) for c in checks if _RESULTS.get(str(c["result"]), "WARNED") == outcome]

    verdict = str(result.get("result", ""))
    configuration = hashlib.sha256(canonical_json([[c["name"], c["stage"]] for c in checks])).hexdigest()
    return {
        "result": _RESULTS.get(verdict, "WARNED"),
        "configuration": [{"name": "checks", "digest": {"sha256": configuration}}],
        "passedTests": named("PASSED"), "warnedTests": named("WARNED"), "failedTests": named("FAILED"),
        "verdict": verdict,
        "checks": checks,
        "run": result.get("run_id"),
        "variant": result.get("variant"),
        "instance": {"id": result.get("instance_id"), "region": result.get("region"), "image": result.get("image_id"),
                     "terminated": result.get("terminated")},
        "startedOn": result.get("started"),
        "finishedOn": finished,
        "seconds": result.get("seconds"),
        "error": result.get("error"),
    }


# ------------------------------------------------------------------------------- reading them back
# Each reader gives "" (or an empty mapping) for a field the predicate lacks.


def _at(predicate: Mapping[str, Any], *path: str) -> Mapping[str, Any]:
    for key in path:
        predicate = predicate.get(key) or {}
    return predicate


def external(provenance_predicate: Mapping[str, Any]) -> Mapping[str, Any]:
    return _at(provenance_predicate, "buildDefinition", "externalParameters")


def internal(provenance_predicate: Mapping[str, Any]) -> Mapping[str, Any]:
    return _at(provenance_predicate, "buildDefinition", "internalParameters")


def fingerprint_of(provenance_predicate: Mapping[str, Any]) -> str:
    return str(internal(provenance_predicate).get("fingerprint") or "")


def pipeline_of(provenance_predicate: Mapping[str, Any]) -> str:
    return str((external(provenance_predicate).get("pipeline") or {}).get("name") or "")


def variant_of(provenance_predicate: Mapping[str, Any]) -> str:
    return str(external(provenance_predicate).get("variant") or "")


def run_of(provenance_predicate: Mapping[str, Any]) -> str:
    return str(_at(provenance_predicate, "runDetails", "metadata").get("invocationId") or "")


def amibuild_version_of(provenance_predicate: Mapping[str, Any]) -> str:
    return str(_at(provenance_predicate, "runDetails", "builder", "version").get("amibuild") or "")


def source_amis_of(provenance_predicate: Mapping[str, Any]) -> dict[str, str]:
    """{region: the source AMI the build started from}."""
    return {d.get("annotations", {}).get("region"): d.get("annotations", {}).get("imageId")
            for d in _at(provenance_predicate, "buildDefinition").get("resolvedDependencies", [])
            if isinstance(d, Mapping) and d.get("name") == "source-ami"}


def package_list_digest_of(provenance_predicate: Mapping[str, Any]) -> str:
    """The sha256 of the image's package list (its SBOM) the statement signs."""
    for item in _at(provenance_predicate, "runDetails").get("byproducts") or []:
        if item.get("name") == PACKAGE_LIST:
            return str((item.get("digest") or {}).get("sha256") or "")
    return ""


def verdict_of(test_predicate: Mapping[str, Any]) -> str:
    """amibuild's verdict in a test statement ("passed", "failed", "not testable here", ...)."""
    return str(test_predicate.get("verdict") or "")
