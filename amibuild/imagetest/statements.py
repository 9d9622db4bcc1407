"""The test statement of a boot test (test-ami, build-ami --boot-test): every check with its
result, the run, the instance, the times and the verdict, signed and stored about the image in
every region it was tagged in (`amibuild.attest`)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping

from amibuild.attest import predicates
from amibuild.attest.sign import Attestor, Stored
from amibuild.attest.statement import TEST


def says_something(result: Mapping[str, Any]) -> bool:
    """Whether a boot test's result is worth a statement: an instance was launched from the image, and
    the test did not end on what says nothing about it (the cluster's API unreadable, `says_nothing`);
    otherwise nothing is known of the image, and no statement is made."""
    return bool(result.get("instance_id")) and not result.get("says_nothing")


def test_statement(attestor: Attestor, result: Mapping[str, Any], amis: Mapping[str, str]) -> Stored:
    """Sign and store the statement of ``result`` (`BootTestResult.to_dict()`) about ``amis`` ({region: ami})."""
    finished = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    return attestor.make(amis, TEST, predicates.test(result, finished=finished), str(result.get("run_id", "")))

