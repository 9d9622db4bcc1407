"""The one AWS gateway: every boto3 call amibuild makes goes through `Aws`.

It owns the boto3 session (standard credential chain, profile, region), caches one client per
service and region, sets botocore's retry mode and short connect timeouts (an unreachable endpoint
is reported in seconds, not after minutes of retries), honours endpoint overrides
(`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_<SERVICE>`; botocore reads them itself), and turns botocore's
errors into amibuild's at this boundary (`mapped_errors`). Callers get typed methods, not raw clients.
"""

from __future__ import annotations

from amibuild.aws.cfn import CfnCalls
from amibuild.aws.ec2 import Ec2Calls, Image
from amibuild.aws.eks import EksCalls
from amibuild.aws.events import EventCalls
from amibuild.aws.error_map import mapped_errors
from amibuild.aws.image_lifecycle import ImageLifecycleCalls
from amibuild.aws.kms import KmsCalls
from amibuild.aws.inspector import InspectorCalls
from amibuild.aws.kms_mac import KmsMacCalls
from amibuild.aws.s3 import S3Calls
from amibuild.aws.session import CONNECT_ATTEMPTS, Session, give_up_on_dead_endpoint, beside, fan_out
from amibuild.aws.ssm import Parameter, SsmCalls, answered_at

__all__ = [
    "Aws", "CONNECT_ATTEMPTS", "Image", "Parameter", "give_up_on_dead_endpoint", "mapped_errors", "answered_at", "beside",
    "fan_out",
]


class Aws(SsmCalls, S3Calls, KmsCalls, KmsMacCalls, Ec2Calls, ImageLifecycleCalls, CfnCalls, EksCalls, InspectorCalls,
          EventCalls, Session):
    """`Session` with every service's typed calls (grouped per service in the modules beside this one)."""
