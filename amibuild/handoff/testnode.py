"""The user data of a boot test's instance: the same render a node group's nodes get. Pure.

With a cluster (`test-ami --cluster C`, from DescribeCluster's facts) it is the node group's user
data (`amibuild.handoff.userdata.render`), plus the taint `TEST_TAINT`, so the test node joins C
but no workload is scheduled on it. Without a cluster its only job is to be checked:

    al2023   the NodeConfig part the node group gets, naming a cluster that does not exist
             (`CHECK_ONLY_*`): `nodeadm config check` on the instance reads and validates it as a
             node does at boot (the boot test's `nodeadm-config` check); nothing is joined
    al2      a script that runs nothing: bootstrap.sh is never started without a cluster; the
             boot test's `bootstrap-options` check asks the image's bootstrap.sh (its --help) for
             every option amibuild's user data passes it (`BOOTSTRAP_OPTIONS`)
"""

from __future__ import annotations

import base64
from typing import Any

from amibuild.handoff.cluster import ClusterFacts
from amibuild.handoff.userdata.config import NodeConfig
from amibuild.handoff.userdata.kubelet import KubeletSettings
from amibuild.handoff.userdata.render import render_userdata
from amibuild.imagetest.kube import TEST_TAINT
# A cluster that is nowhere: `.invalid` never resolves (RFC 6761), so a node that tried would fail at once.
CHECK_ONLY_CLUSTER = "amibuild-boot-test"
CHECK_ONLY_ENDPOINT = "https://amibuild-boot-test.invalid"
CHECK_ONLY_SERVICE_CIDR = "10.100.0.0/16"
_CHECK_ONLY_CA = base64.b64encode(
    b"-----BEGIN CERTIFICATE-----\nYW1pYnVpbGQgYm9vdCB0ZXN0OiBubyBjbHVzdGVy\n-----END CERTIFICATE-----\n").decode()
_AL2_CHECK_ONLY = """#!/bin/bash
# Written by amibuild for a boot test without a cluster: this node joins nothing, so bootstrap.sh
# is not run. The boot test checks the image's bootstrap.sh through SSM Run Command instead.
exit 0
"""


def boot_test_userdata(node_os: str, *, region: str, cluster: ClusterFacts | None = None) -> str:
    """The test instance's user data for a variant of ``node_os`` ("al2" or "al2023")."""
    kubelet = KubeletSettings.parse(taints=[TEST_TAINT])
    if cluster is not None:
        return render_userdata(NodeConfig(
            cluster_name=cluster.name, os=node_os, region=region, service_cidr=cluster.service_cidr or None,
            api_server_endpoint=cluster.endpoint if node_os == "al2023" else "",
            certificate_authority=cluster.certificate_authority if node_os == "al2023" else "",
            private_endpoint=cluster.private_endpoint, kubelet=kubelet))
    if node_os == "al2":
        return _AL2_CHECK_ONLY
    return render_userdata(NodeConfig(
        cluster_name=CHECK_ONLY_CLUSTER, os=node_os, region=region, service_cidr=CHECK_ONLY_SERVICE_CIDR,
        api_server_endpoint=CHECK_ONLY_ENDPOINT, certificate_authority=_CHECK_ONLY_CA, kubelet=kubelet))


def user_data_by_variant(variants: Any, *, region: str, cluster: ClusterFacts | None) -> dict[str, str]:
    """{variant name: its test instance's user data} for every variant given."""
    return {v.name: boot_test_userdata(v.os, region=region, cluster=cluster) for v in variants}
