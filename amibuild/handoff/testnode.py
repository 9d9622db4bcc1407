"""The user data of a boot test's instance: the same render a node group's nodes get. Pure.

With a cluster it is the node group's user data plus the taint `TEST_TAINT`; without one, a
check-only NodeConfig (al2023) or a script that runs nothing (al2). Either way it carries the
variant's node proxy; a proxy URL with a password of its own is refused (`SpecError`).

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from amibuild import secrets
from amibuild.errors import SpecError
from amibuild.handoff.cluster import ClusterFacts, read_cluster
from amibuild.handoff.userdata import decode
from amibuild.handoff.userdata.config import NodeConfig
from amibuild.handoff.userdata.kubelet import KubeletSettings
from amibuild.handoff.userdata.render import multipart, render_userdata
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


def node_proxy(variant: Any) -> dict[str, Any]:
    """The variant's ``proxy { ... }`` as `NodeConfig` keywords for its nodes' user data ({}: no proxy);
    SpecError naming the variant for a URL with credentials of its own (they would be in the
    instance's user data)."""
    proxy = variant.proxy
    url = proxy.https or proxy.http
    if not url:
        return {}
    with_credentials = next((u for u in (proxy.https, proxy.http) if u and secrets.credentials(u)), "")
    if with_credentials:
        raise SpecError(
            f"variant {variant.name}: proxy {secrets.mask(with_credentials)} carries user:password, which the boot "
            "test instance's user data would hold in the clear (ec2:DescribeInstanceAttribute shows it): give the "
            "URL without them and store user:password as an SSM SecureString named by proxy { credentials_parameter "
            "= \"/amibuild/proxy-creds\" }, which the node reads at boot")
    entries = tuple(e.strip() for e in proxy.no_proxy.split(",") if e.strip())
    return {"proxy": url, "no_proxy": entries, "proxy_credentials_parameter": proxy.credentials_parameter}


def boot_test_userdata(node_os: str, *, region: str, cluster: ClusterFacts | None = None,
                       proxy: Mapping[str, Any] | None = None) -> str:
    """The test instance's user data for a variant of ``node_os`` ("al2" or "al2023"); `proxy` as
    `node_proxy` gives it."""
    kubelet = KubeletSettings.parse(taints=[TEST_TAINT])
    proxied = proxy or {}
    if cluster is not None:
        return render_userdata(NodeConfig(
            cluster_name=cluster.name, os=node_os, region=region, service_cidr=cluster.service_cidr or None,
            api_server_endpoint=cluster.endpoint if node_os == "al2023" else "",
            certificate_authority=cluster.certificate_authority if node_os == "al2023" else "",
            private_endpoint=cluster.private_endpoint, kubelet=kubelet, **proxied))
    if node_os == "al2":
        if not proxied:
            return _AL2_CHECK_ONLY
        # the node group's proxy boothook, and a script that starts nothing in place of bootstrap.sh's
        joined = render_userdata(NodeConfig(cluster_name=CHECK_ONLY_CLUSTER, os=node_os, region=region,
                                            service_cidr=CHECK_ONLY_SERVICE_CIDR, kubelet=kubelet, **proxied))
        boothooks = [(p.content_type, p.body) for p in decode.decode(joined.encode(), "the test user data")
                     if p.content_type == "text/cloud-boothook"]
        return multipart([*boothooks, ("text/x-shellscript", _AL2_CHECK_ONLY)])
    return render_userdata(NodeConfig(
        cluster_name=CHECK_ONLY_CLUSTER, os=node_os, region=region, service_cidr=CHECK_ONLY_SERVICE_CIDR,
        api_server_endpoint=CHECK_ONLY_ENDPOINT, certificate_authority=_CHECK_ONLY_CA, kubelet=kubelet, **proxied))


def user_data_by_variant(variants: Any, *, region: str, cluster: ClusterFacts | None) -> dict[str, str]:
    """{variant name: its test instance's user data} for every variant given."""
    out = {}
    for v in variants:
        proxy = node_proxy(v)
        try:
            out[v.name] = boot_test_userdata(v.os, region=region, cluster=cluster, proxy=proxy)
        except SpecError as exc:  # a value of the variant's proxy block that node user data cannot take
            raise SpecError(f"variant {v.name}: the boot test's user data (the node group's, with the variant's "
                            f"proxy): {exc}") from None
    return out


def user_data(aws: Any, variants: Any, *, region: str, cluster: str) -> dict[str, str]:
    """{variant: its test instance's user data}: the node group's for ``cluster`` (DescribeCluster in
    ``region``, the build region), tainted; without a cluster, user data that is only checked."""
    facts = None
    if cluster:
        facts = read_cluster(aws, cluster, region)
        if facts is None:
            raise SpecError(f"--cluster {cluster}: no such EKS cluster in {region} (the pipeline's build region, "
                            "where the test instance runs)")
    return user_data_by_variant(variants, region=region, cluster=facts)
