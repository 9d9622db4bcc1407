"""Node user data: render it, decode it back (and what others wrote), run its shell, refuse bad input.

Recorded inputs live in tests/data/userdata/ (see its README.md); the eksctl-style cloud-config is
built here so its gzip and base64 layers are visible in the test. Every generated shell part goes
through `bash -n` and, where installed, shellcheck; the proxy boothook is also run against a
scratch root with stand-ins for curl (instance metadata) and systemctl.
"""

from __future__ import annotations

import base64
import gzip
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from amibuild.handoff.userdata import render as userdata
from amibuild.handoff.userdata import decode as userdata_decode
from amibuild.errors import SpecError, UsageError
from amibuild.errors import NotUserData
from amibuild.handoff.userdata.kubelet import KubeletSettings
from amibuild.handoff.userdata.render import CfnSignal, NodeConfig
from amibuild.handoff.userdata.decode import Part

DATA = Path(__file__).resolve().parent / "data" / "userdata"
BASH = shutil.which("bash") or "/bin/bash"
SHELLCHECK = shutil.which("shellcheck")
PROXY = "http://proxy.corp.example:3128"
FAKE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n").decode()
ENDPOINT = "https://0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com"


def al2_config(**changes) -> NodeConfig:
    values = {
        "cluster_name": "prod-eu",
        "proxy": PROXY,
        "region": "eu-west-1",
        "bootstrap_args": "--kubelet-extra-args '--node-labels=team=data,tier=batch' --use-max-pods false",
        "cfn_signal": CfnSignal("prod-eu-nodes", "NodeGroup", "eu-west-1"),
    }
    return NodeConfig(**{**values, **changes})


def al2023_config(**changes) -> NodeConfig:
    values = {
        "cluster_name": "prod-eu",
        "os": "al2023",
        "proxy": PROXY,
        "region": "eu-west-1",
        "api_server_endpoint": ENDPOINT,
        "certificate_authority": FAKE_CA,
        "service_cidr": "172.20.0.0/16",
        "kubelet_flags": ("--node-labels=team=data",),
    }
    return NodeConfig(**{**values, **changes})


# Recorded renders: any change to the generated user data shows up as a diff here.
RECORDED = {
    "render-al2-proxy.txt": al2_config,
    "render-al2023-proxy.txt": al2023_config,
}


def shell_of(part: Part) -> str:
    """The script cloud-init would run for a shell part (a boothook loses its first line)."""
    if part.body.startswith("#cloud-boothook\n"):
        return part.body.split("\n", 1)[1]
    return part.body


def bootstrap_line(script: str) -> list[str]:
    """The argv of the bootstrap.sh command in a rendered al2 script."""
    joined = script.replace("\\\n", " ")
    line = next(line for line in joined.splitlines() if line.startswith("/etc/eks/bootstrap.sh"))
    return shlex.split(line.removesuffix(" || status=$?"))


# ------------------------------------------------------------------------------- rendering


def test_al2_userdata_decodes_to_boothook_then_bootstrap_with_cfn_signal():
    text = userdata.render_userdata(al2_config())
    assert text.startswith('MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="')

    parts = userdata_decode.decode(text.encode())

    assert [p.content_type for p in parts] == ["text/cloud-boothook", "text/x-shellscript"]
    hook, script = parts
    assert f"proxy={PROXY}\n" in hook.body
    assert "units=(containerd docker kubelet)" in hook.body
    assert bootstrap_line(script.body) == [
        "/etc/eks/bootstrap.sh", "prod-eu",
        "--kubelet-extra-args", "--node-labels=team=data,tier=batch", "--use-max-pods", "false",
    ]
    signal = " ".join(script.body.replace("\\\n", " ").split())
    assert (
        '/opt/aws/bin/cfn-signal --exit-code "$status" --stack prod-eu-nodes --resource NodeGroup '
        f"--region eu-west-1 --https-proxy {PROXY}"
    ) in signal


@pytest.mark.parametrize(
    "encode, via",
    [
        (base64.b64encode, ("base64",)),
        (lambda data: base64.b64encode(gzip.compress(data, mtime=0)), ("base64", "gzip")),
        (lambda data: gzip.compress(data, mtime=0), ("gzip",)),
    ],
    ids=["base64", "gzip+base64", "gzip"],
)
def test_userdata_decodes_the_same_through_the_encodings_ec2_holds(encode, via):
    text = userdata.render_userdata(al2_config())

    parts = userdata_decode.decode(encode(text.encode()))

    assert parts == [Part(p.content_type, p.body, via=via) for p in userdata_decode.decode(text.encode())]


def test_mime_part_bodies_keep_non_ascii_text():
    data = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="b"\n\n--b\n'
        "Content-Type: text/x-shellscript; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n"
        "#!/bin/bash\necho 'grüße ✓'\n\n--b--\n"
    ).encode()

    assert userdata_decode.decode(data)[0].body == "#!/bin/bash\necho 'grüße ✓'\n"


def test_al2_userdata_without_proxy_is_only_the_bootstrap_script():
    parts = userdata_decode.decode(userdata.render_userdata(al2_config(proxy="", cfn_signal=None)).encode())

    assert [p.content_type for p in parts] == ["text/x-shellscript"]
    assert "cfn-signal" not in parts[0].body


def test_cfn_signal_goes_without_proxy_flag_when_there_is_no_proxy():
    script = userdata_decode.decode(userdata.render_userdata(al2_config(proxy="")).encode())[0].body

    assert "cfn-signal" in script
    assert "--https-proxy" not in script


def test_al2023_userdata_decodes_to_boothook_then_nodeconfig():
    parts = userdata_decode.decode(userdata.render_userdata(al2023_config()).encode())

    assert [p.content_type for p in parts] == ["text/cloud-boothook", "application/node.eks.aws"]
    assert "units=(containerd kubelet)" in parts[0].body
    assert yaml.safe_load(parts[1].body) == {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {
            "cluster": {
                "name": "prod-eu",
                "apiServerEndpoint": ENDPOINT,
                "certificateAuthority": FAKE_CA,
                "cidr": "172.20.0.0/16",
            },
            # nodeadm-config.service runs before cloud-init (so before the boothook): the proxy
            # must be in the NodeConfig for nodeadm's own first-boot calls.
            "instance": {"environment": {"default": {
                **{name: PROXY for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")},
                **{name: ",".join(userdata.no_proxy_entries(al2023_config())) for name in ("NO_PROXY", "no_proxy")},
            }}},
            "kubelet": {"flags": ["--node-labels=team=data"]},
        },
    }


def test_al2023_userdata_without_proxy_is_only_the_nodeconfig():
    parts = userdata_decode.decode(userdata.render_userdata(al2023_config(proxy="")).encode())

    assert [p.content_type for p in parts] == ["application/node.eks.aws"]


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_render_is_deterministic_and_matches_the_recorded_document(name):
    got = userdata.render_userdata(RECORDED[name]())

    assert got == userdata.render_userdata(RECORDED[name]())
    assert got == (DATA / name).read_text(), f"after an intended change: {sys.executable} -m tests.test_userdata"


def test_bootstrap_args_reach_bootstrap_sh_as_the_same_words_with_nothing_expanded():
    hostile = ("--docker-config-json '{\"a\": \"$(reboot)\"}' --pause-container-account '`id`;rm -rf /' "
               "--local-disks \"two words\"")

    script = userdata_decode.decode(userdata.render_userdata(al2_config(bootstrap_args=hostile)).encode())[1].body

    assert bootstrap_line(script)[2:] == [
        "--docker-config-json", '{"a": "$(reboot)"}', "--pause-container-account", "`id`;rm -rf /",
        "--local-disks", "two words",
    ]
    assert """'{"a": "$(reboot)"}'""" in script


def test_al2_derives_endpoint_ca_dns_ip_and_kubelet_flags_for_bootstrap_sh():
    cfg = al2_config(
        api_server_endpoint=ENDPOINT, certificate_authority=FAKE_CA, service_cidr="10.50.0.0/16",
        kubelet_flags=("--node-labels=a=b", "--max-pods=58"), bootstrap_args="",
    )

    assert userdata.bootstrap_argv(cfg) == [
        "prod-eu", "--apiserver-endpoint", ENDPOINT, "--b64-cluster-ca", FAKE_CA,
        "--dns-cluster-ip", "10.50.0.10", "--kubelet-extra-args", "--node-labels=a=b --max-pods=58",
    ]


SHELL_CONFIGS = {
    "al2 proxy + cfn-signal": al2_config,
    "al2 no proxy": lambda: al2_config(proxy="", cfn_signal=None),
    "al2 everything": lambda: al2_config(
        api_server_endpoint=ENDPOINT, certificate_authority=FAKE_CA, service_cidr="10.50.0.0/16",
        kubelet_flags=("--node-labels=a=b",), bootstrap_args="--use-max-pods false",
        proxy="http://user:p%40ss@proxy.corp.example:8080",
    ),
    "al2023 proxy": al2023_config,
}


@pytest.mark.parametrize("name", sorted(SHELL_CONFIGS))
def test_generated_shell_parts_are_valid_bash(name):
    parts = userdata_decode.decode(userdata.render_userdata(SHELL_CONFIGS[name]()).encode())
    shells = [p for p in parts if p.content_type in ("text/cloud-boothook", "text/x-shellscript")]
    assert shells

    for part in shells:
        script = shell_of(part)
        assert script.startswith("#!/bin/bash\n")
        checked = subprocess.run([BASH, "-n"], input=script, text=True, capture_output=True, check=False)
        assert checked.returncode == 0, f"{part.content_type}: {checked.stderr}"
        if SHELLCHECK:
            linted = subprocess.run(
                [SHELLCHECK, "-s", "bash", "-"], input=script, text=True, capture_output=True, check=False
            )
            assert linted.returncode == 0, f"{part.content_type}:\n{linted.stdout}"


def test_userdata_larger_than_ec2_accepts_is_refused():
    with pytest.raises(SpecError, match="at most 16384"):
        userdata.render_userdata(al2_config(bootstrap_args="--docker-config-json " + "y" * 17000))


def test_multipart_writes_bodies_as_given_with_the_fixed_boundary():
    long_line = "echo 'grüße ✓ " + "x" * 200 + "'"  # the email package's set_content would base64 this
    parts = [("text/x-shellscript", f"#!/bin/bash\n{long_line}\n\n"), ("application/node.eks.aws", "---\nkind: NodeConfig")]
    text = userdata.multipart(parts)

    assert text == userdata.multipart(parts)
    assert text.startswith(f'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="{userdata.BOUNDARY}"\n\n')
    assert text.endswith(f"\n--{userdata.BOUNDARY}--\n") and "Content-Transfer-Encoding" not in text
    assert [(p.content_type, p.body) for p in userdata_decode.decode(text.encode())] == [
        ("text/x-shellscript", f"#!/bin/bash\n{long_line}\n"), ("application/node.eks.aws", "---\nkind: NodeConfig\n")]
    with pytest.raises(SpecError, match="the MIME boundary amibuild uses"):
        userdata.multipart([("text/x-shellscript", f"echo --{userdata.BOUNDARY}\n")])


# --------------------------------------------------------------------- the boothook, run


FAKE_CURL = """#!/bin/bash
printf '%s\\n' "$*" >>"$FAKE_LOG"
for arg; do last=$arg; done
case $last in
    */latest/api/token) printf 'TOKEN123' ;;
    */meta-data/mac) printf '0a:1b:2c:3d:4e:5f' ;;
    */macs/0a:1b:2c:3d:4e:5f/vpc-ipv4-cidr-blocks) printf '10.0.0.0/16\\n100.64.0.0/16' ;;
    *) exit 22 ;;
esac
"""
FAKE_SYSTEMCTL = """#!/bin/bash
printf 'systemctl %s\\n' "$*" >>"$FAKE_LOG"
if [[ $1 == is-active ]]; then
    [[ " ${FAKE_ACTIVE:-} " == *" ${3%.service} "* ]]
fi
"""


class Node:
    """A scratch root and a PATH of stand-ins (curl, systemctl) plus the real tools the hook uses."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "root"
        (self.root / "etc" / "dnf").mkdir(parents=True)
        self.log = tmp_path / "calls.log"
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        for name, text in (("curl", FAKE_CURL), ("systemctl", FAKE_SYSTEMCTL)):
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        for tool in ("awk", "grep", "paste", "mkdir", "cat"):
            (self.bin / tool).symlink_to(shutil.which(tool))

    def run(self, hook: str, active: str = "") -> subprocess.CompletedProcess[str]:
        script = self.root.parent / "boothook.sh"
        script.write_text(hook)
        env = {"PATH": str(self.bin), "AMIBUILD_ROOT": str(self.root), "FAKE_LOG": str(self.log),
               "FAKE_ACTIVE": active}
        return subprocess.run([BASH, str(script)], env=env, capture_output=True, text=True, timeout=20, check=False)

    def read(self, path: str) -> str:
        return (self.root / path).read_text()


def boothook(cfg: NodeConfig) -> str:
    return shell_of(userdata_decode.decode(userdata.render_userdata(cfg).encode())[0])


def test_boothook_sets_proxy_for_yum_environment_and_units_with_vpc_cidrs_from_imds(tmp_path):
    node = Node(tmp_path)
    (node.root / "etc" / "yum.conf").write_text(
        "[main]\ngpgcheck=1\nproxy=http://old:1\ninstallonly_limit=3\n\n[amzn2-extra]\nproxy=_none_\n"
    )
    (node.root / "etc" / "environment").write_text("LANG=en_US.UTF-8\nexport HTTP_PROXY=http://old:1\n")
    proxy = "http://user:p%40ss@proxy.corp.example:8080"

    run = node.run(boothook(al2_config(proxy=proxy)), active="containerd")

    assert run.returncode == 0, run.stderr
    no_proxy = "10.0.0.0/16,100.64.0.0/16," + ",".join(userdata.no_proxy_entries(al2_config()))
    assert node.read("etc/yum.conf") == (
        f"[main]\nproxy={proxy}\ngpgcheck=1\ninstallonly_limit=3\n\n[amzn2-extra]\nproxy=_none_\n"
    )
    assert node.read("etc/environment") == (
        f"LANG=en_US.UTF-8\nHTTP_PROXY={proxy}\nHTTPS_PROXY={proxy}\nNO_PROXY={no_proxy}\n"
        f"http_proxy={proxy}\nhttps_proxy={proxy}\nno_proxy={no_proxy}\n"
    )
    for unit in ("containerd", "docker", "kubelet", "sandbox-image"):  # sandbox-image: its ECR login, not restarted
        dropin = node.read(f"etc/systemd/system/{unit}.service.d/http-proxy.conf")
        assert 'Environment="HTTPS_PROXY=http://user:p%%40ss@proxy.corp.example:8080"\n' in dropin
        assert f'Environment="NO_PROXY={no_proxy}"\n' in dropin
    calls = node.log.read_text().splitlines()
    assert "-H X-aws-ec2-metadata-token: TOKEN123 http://169.254.169.254/latest/meta-data/mac" in calls[1]
    assert all("--noproxy *" in line for line in calls if not line.startswith("systemctl"))
    assert [line for line in calls if line.startswith("systemctl") and "is-active" not in line] == [
        "systemctl daemon-reload",
        "systemctl --no-block restart containerd.service",
    ]


def test_boothook_run_twice_leaves_one_set_of_settings(tmp_path):
    node = Node(tmp_path)
    (node.root / "etc" / "dnf" / "dnf.conf").write_text("[main]\nbest=True\n")
    hook = boothook(al2023_config())

    first = node.run(hook)
    after_first = node.read("etc/dnf/dnf.conf"), node.read("etc/environment")
    second = node.run(hook)

    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert (node.read("etc/dnf/dnf.conf"), node.read("etc/environment")) == after_first
    assert node.read("etc/dnf/dnf.conf") == f"[main]\nproxy={PROXY}\nbest=True\n"
    assert not (node.root / "etc/systemd/system/docker.service.d").exists()


def test_boothook_fails_loudly_when_instance_metadata_is_unreachable(tmp_path):
    node = Node(tmp_path)
    (node.bin / "curl").write_text("#!/bin/bash\necho 'curl: (7) Failed to connect' >&2\nexit 7\n")

    run = node.run(boothook(al2_config()))

    assert run.returncode != 0
    assert not (node.root / "etc" / "environment").exists()


# ------------------------------------------------------------------------------ NO_PROXY


def test_no_proxy_holds_vpc_service_metadata_local_and_regional_endpoints():
    entries = userdata.no_proxy_entries(al2_config(), ["10.0.0.0/16"])

    assert entries == (
        "10.0.0.0/16", "10.100.0.0/16", "172.20.0.0/16",
        "169.254.169.254", "localhost", "127.0.0.1", ".internal",
        "eks.eu-west-1.amazonaws.com", "ec2.eu-west-1.amazonaws.com",
        "api.ecr.eu-west-1.amazonaws.com", "dkr.ecr.eu-west-1.amazonaws.com",
        "s3.eu-west-1.amazonaws.com", "sts.eu-west-1.amazonaws.com",
    )


@pytest.mark.parametrize("region, suffix", [("cn-north-1", "amazonaws.com.cn"), ("us-iso-east-1", "c2s.ic.gov"),
                                           ("us-isob-east-1", "sc2s.sgov.gov"), ("eusc-de-east-1", "amazonaws.eu")])
def test_no_proxy_uses_the_partition_suffix_of_the_region(region, suffix):
    entries = userdata.no_proxy_entries(al2_config(region=region, cfn_signal=None))

    assert f"dkr.ecr.{region}.{suffix}" in entries
    assert f"sts.{region}.{suffix}" in entries


def test_given_service_cidr_replaces_both_defaults_and_extra_entries_come_last():
    entries = userdata.no_proxy_entries(al2_config(service_cidr="10.50.0.0/16", no_proxy=("git.corp", ".corp")))

    assert "10.100.0.0/16" not in entries and "172.20.0.0/16" not in entries
    assert entries[0] == "10.50.0.0/16"
    assert entries[-2:] == ("git.corp", ".corp")


def test_bypass_none_leaves_only_the_local_entries_and_needs_no_region():
    cfg = userdata.config_from_flags(cluster="c1", proxy=PROXY, bypass=["none"])

    assert userdata.no_proxy_entries(cfg) == (*userdata.DEFAULT_SERVICE_CIDRS, *userdata.LOCAL_NO_PROXY)


def test_config_from_flags_splits_comma_lists_and_reads_the_cluster_ip():
    cfg = userdata.config_from_flags(
        cluster="c1", proxy=PROXY, region="us-east-1", no_proxy=["a.corp,b.corp", "c.corp"],
        bypass=["ecr,s3"], cluster_ip="172.20.0.1", cfn_stack="st", cfn_resource="Nodes",
    )

    assert cfg.no_proxy == ("a.corp", "b.corp", "c.corp")
    assert cfg.bypass == ("ecr", "s3")
    assert cfg.service_cidr == "172.20.0.0/16"
    assert cfg.cfn_signal == CfnSignal("st", "Nodes", "us-east-1")


@pytest.mark.parametrize(
    "cluster_ip, cidr", [("10.100.0.1", "10.100.0.0/16"), ("172.20.0.1", "172.20.0.0/16")]
)
def test_service_cidr_for_picks_the_eks_default_range_of_the_cluster_ip(cluster_ip, cidr):
    assert userdata.service_cidr_for(cluster_ip) == cidr


def test_service_cidr_for_refuses_an_address_outside_both_defaults():
    with pytest.raises(SpecError, match=r"--cluster-ip 10\.96\.0\.1: .*give --service-cidr"):
        userdata.service_cidr_for("10.96.0.1")


# ---------------------------------------------------------------------------- bad input

BAD_CONFIGS = [
    pytest.param(
        lambda: al2_config(proxy="ftp://proxy:21"),
        "--proxy 'ftp://proxy:21': must be an http:// or https:// URL",
        id="proxy ftp",
    ),
    pytest.param(
        lambda: al2_config(proxy="http://a b:1"),
        "--proxy",
        id="proxy with a space",
    ),
    pytest.param(
        lambda: al2_config(proxy="http://proxy:99999"),
        "--proxy 'http://proxy:99999': the port",
        id="proxy bad port",
    ),
    pytest.param(
        lambda: al2_config(proxy="http://proxy:3128/x"),
        "scheme, host and port only",
        id="proxy with a path",
    ),
    pytest.param(
        lambda: al2_config(service_cidr="10.100.0.1/16"),
        "--service-cidr '10.100.0.1/16'.*did you mean 10.100.0.0/16",
        id="service cidr host bits",
    ),
    pytest.param(
        lambda: al2_config(service_cidr="10.100.0.0/33"),
        "--service-cidr",
        id="service cidr junk",
    ),
    pytest.param(
        lambda: al2_config(service_cidr="10.100.0.0/29"),
        "--service-cidr '10.100.0.0/29': an EKS service range is /12 to /24",
        id="service cidr too small for the cluster DNS address",
    ),
    pytest.param(
        lambda: userdata.config_from_flags(cluster=""),
        "--cluster is required",
        id="cluster missing",
    ),
    pytest.param(
        lambda: al2_config(cluster_name="-bad name"),
        "--cluster '-bad name'",
        id="cluster name",
    ),
    pytest.param(
        lambda: al2_config(os="bottlerocket"),
        "--os 'bottlerocket'",
        id="os",
    ),
    pytest.param(
        lambda: al2_config(region=""),
        "--region is required",
        id="region missing with proxy",
    ),
    pytest.param(
        lambda: al2_config(region="Europe"),
        "--region 'Europe'",
        id="region junk",
    ),
    pytest.param(
        lambda: al2_config(no_proxy=("a b",)),
        "--no-proxy 'a b'",
        id="no-proxy entry",
    ),
    pytest.param(
        lambda: al2_config(proxy="", no_proxy=("git.corp",)),
        "--no-proxy: .*there is no proxy: give --proxy",
        id="no-proxy without a proxy",
    ),
    pytest.param(
        lambda: al2_config(bypass=("lambda",)),
        "--bypass 'lambda'",
        id="bypass unknown",
    ),
    pytest.param(
        lambda: al2_config(kubelet_flags=("max-pods=3",)),
        "--kubelet-flag 'max-pods=3'",
        id="kubelet flag",
    ),
    pytest.param(
        lambda: al2_config(bootstrap_args="--x 'open"),
        "--bootstrap-args",
        id="bootstrap quotes",
    ),
    pytest.param(
        lambda: al2_config(bootstrap_args="--x\nreboot"),
        "--bootstrap-args: '\\\\n'",
        id="bootstrap newline",
    ),
    pytest.param(
        lambda: al2_config(kubelet_flags=("--max-pods=3",)),
        "--bootstrap-args sets --kubelet-extra-args",
        id="bootstrap repeats a derived option",
    ),
    pytest.param(
        lambda: al2023_config(api_server_endpoint="http://x.eks.amazonaws.com"),
        "--api-server-endpoint",
        id="endpoint http",
    ),
    pytest.param(
        lambda: al2023_config(certificate_authority="bm90IGEgY2VydA=="),
        "--certificate-authority",
        id="ca not pem",
    ),
    pytest.param(
        lambda: al2023_config(api_server_endpoint="", service_cidr=None),
        "--api-server-endpoint, --service-cidr required for al2023",
        id="al2023 needs cluster details",
    ),
    pytest.param(
        lambda: al2023_config(bootstrap_args="--x"),
        "--bootstrap-args is for al2",
        id="al2023 bootstrap args",
    ),
    pytest.param(
        lambda: al2_config(api_server_endpoint=ENDPOINT),
        "go together",
        id="al2 endpoint without ca",
    ),
    pytest.param(
        lambda: al2_config(cfn_signal=CfnSignal("1stack", "R", "eu-west-1")),
        "--cfn-stack '1stack'",
        id="cfn stack",
    ),
]


@pytest.mark.parametrize("make, message", BAD_CONFIGS)
def test_bad_flags_are_refused_with_one_line_naming_the_flag(make, message):
    with pytest.raises(SpecError, match=message) as caught:
        make()

    assert "\n" not in str(caught.value)
    assert caught.value.exit_code == 2


def test_proxy_credentials_never_reach_an_error_message():
    with pytest.raises(SpecError) as caught:
        al2_config(proxy="ftp://admin:hunter2@proxy:21")

    assert "hunter2" not in str(caught.value)
    assert "ftp://***@proxy:21" in str(caught.value)


# ------------------------------------------------------------------------------ decoding


def eksctl_style_userdata() -> bytes:
    """A gzip+base64 #cloud-config shaped like eksctl's: write_files (one gzip+b64) and runcmd."""
    script = "#!/bin/bash\nset -euo pipefail\n/etc/eks/bootstrap.sh dev --kubelet-extra-args \"$KUBELET_EXTRA_ARGS\"\n"
    config = {
        "packages": None,
        "write_files": [
            {"path": "/etc/eksctl/kubelet.env", "owner": "root:root", "permissions": "0644",
             "content": "NODE_LABELS=alpha.eksctl.io/nodegroup-name=ng-1\n"},
            {"path": "/var/lib/cloud/scripts/eksctl/bootstrap.al2.sh", "permissions": "0755",
             "encoding": "gzip+base64",
             "content": base64.b64encode(gzip.compress(script.encode(), mtime=0)).decode()},
            {"path": "/etc/eksctl/kubelet-extra.json", "encoding": "b64",
             "content": base64.b64encode(b'{"maxPods": 29}').decode()},
        ],
        "runcmd": [
            "/var/lib/cloud/scripts/eksctl/bootstrap.al2.sh",
            ["systemctl", "restart", "kubelet"],
        ],
    }
    text = "#cloud-config\n" + yaml.safe_dump(config, sort_keys=False)
    # Unquoted octal, as hand-written cloud-config often has it: YAML 1.1 reads it as the number 420.
    text = text.replace("permissions: '0644'", "permissions: 0644")
    return base64.b64encode(gzip.compress(text.encode(), mtime=0))


def test_decodes_eksctl_gzip_base64_cloud_config_into_files_and_commands():
    parts = userdata_decode.decode(eksctl_style_userdata())

    assert [(p.content_type, p.path, p.permissions) for p in parts] == [
        ("text/cloud-config", "", ""),
        ("text/plain", "/etc/eksctl/kubelet.env", "0644"),
        ("text/x-shellscript", "/var/lib/cloud/scripts/eksctl/bootstrap.al2.sh", "0755"),
        ("text/plain", "/etc/eksctl/kubelet-extra.json", ""),
        ("cloud-config/runcmd", "", ""),
    ]
    config, env, script, extra, runcmd = parts
    assert config.via == ("base64", "gzip") and config.depth == 0
    assert yaml.safe_load(config.body) == {"packages": None}
    assert env.body == "NODE_LABELS=alpha.eksctl.io/nodegroup-name=ng-1\n" and env.owner == "root:root"
    assert script.body.startswith("#!/bin/bash\nset -euo pipefail\n/etc/eks/bootstrap.sh dev ")
    assert script.via == ("base64", "gzip", "base64", "gzip") and script.depth == 1
    assert extra.body == '{"maxPods": 29}'
    assert runcmd.body == "/var/lib/cloud/scripts/eksctl/bootstrap.al2.sh\nsystemctl restart kubelet\n"


def test_decodes_a_recorded_mime_proxy_document():
    parts = userdata_decode.decode((DATA / "proxy-mime.txt").read_bytes(), "proxy-mime.txt")

    assert [(p.content_type, p.path, p.via) for p in parts] == [
        ("text/cloud-boothook", "proxy.sh", ()),
        ("text/x-shellscript", "bootstrap.sh", ("base64",)),
    ]
    assert "NO_PROXY=$VPC_CIDR,localhost,127.0.0.1,169.254.169.254,.internal" in parts[0].body
    assert "--https-proxy http://10.20.0.15:3128" in parts[1].body


def test_decodes_plain_shell_as_one_script():
    data = (DATA / "plain-shell.sh").read_bytes()

    assert userdata_decode.decode(data) == [Part("text/x-shellscript", data.decode())]


def test_decodes_base64_of_plain_shell_with_line_breaks():
    data = (DATA / "plain-shell.sh").read_bytes()

    parts = userdata_decode.decode(base64.encodebytes(data))

    assert parts == [Part("text/x-shellscript", data.decode(), via=("base64",))]


def test_decodes_nested_multipart_with_a_gzip_part_and_cloud_config():
    parts = userdata_decode.decode((DATA / "nested-multipart.txt").read_bytes())

    assert [(p.content_type, p.path, p.depth, p.via) for p in parts] == [
        ("text/x-shellscript", "", 0, ()),
        ("text/x-shellscript", "", 1, ("base64", "gzip")),
        ("text/cloud-config", "", 1, ()),
        ("text/plain", "/etc/motd", 2, ()),
    ]
    assert parts[1].body == "#!/bin/sh\necho inner part\n"
    assert parts[3].body == "nested hello\n" and parts[3].permissions == "0644"


def test_decodes_userdata_from_ec2_json_and_a_cloudformation_template():
    from_ec2 = userdata_decode.decode((DATA / "describe-instance-attribute.json").read_bytes())
    from_cfn = userdata_decode.decode((DATA / "cfn-launch-template.yaml").read_bytes())

    assert from_ec2 == [Part("text/x-shellscript", (DATA / "plain-shell.sh").read_text(), via=("UserData", "base64"))]
    assert [p.content_type for p in from_cfn] == ["text/x-shellscript"]
    assert from_cfn[0].via == ("Resources.NodeLaunchTemplate.Properties.LaunchTemplateData.UserData",
                               "CloudFormation references: ClusterName AWS::StackName AWS::Region")
    assert "/etc/eks/bootstrap.sh ${ClusterName}\n" in from_cfn[0].body


def test_decodes_a_bare_nodeconfig():
    text = userdata_decode.decode(userdata.render_userdata(al2023_config(proxy="")).encode())[0].body

    assert userdata_decode.decode(text.encode()) == [Part("application/node.eks.aws", text)]


GARBAGE = {
    "random bytes": (DATA / "garbage.bin").read_bytes(),
    "plain prose": b"hello, this is not user data\n",
    "empty": b"  \n",
    "truncated gzip": gzip.compress(b"#!/bin/bash\necho hi\n")[:-12],
    "base64 of random bytes": base64.b64encode((DATA / "garbage.bin").read_bytes()),
    "cloud-config that is not yaml": b"#cloud-config\nwrite_files: [unclosed\n",
    "multipart without its boundary": b'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="x"\n\nno parts\n',
    "json without user data": json.dumps({"InstanceId": "i-1"}).encode(),
}


@pytest.mark.parametrize("data", list(GARBAGE.values()), ids=list(GARBAGE))
def test_garbage_is_refused_with_one_line_naming_the_source(data):
    with pytest.raises(NotUserData) as caught:
        userdata_decode.decode(data, "suspect.bin")

    message = str(caught.value)
    assert message.startswith("suspect.bin: not user data: ")
    assert "\n" not in message
    assert isinstance(caught.value, UsageError) and caught.value.exit_code == 2


def test_format_parts_prints_headers_and_bodies_with_control_characters_escaped():
    parts = [
        Part("text/cloud-config", ""),
        Part("text/x-shellscript", "#!/bin/bash\necho \x1b[31mred\n", path="/etc/eks/my script.sh",
             permissions="0755", owner="root:root", via=("base64", "gzip"), depth=1),
    ]

    assert userdata_decode.format_parts(parts) == (
        "--- part 1/2: text/cloud-config ---\n"
        "--- part 2/2: text/x-shellscript path='/etc/eks/my script.sh' mode=0755 owner=root:root "
        "depth=1 via=base64,gzip ---\n"
        "#!/bin/bash\necho \\x1b[31mred\n"
    )


# -------------------------------------------------------------------------- cluster side


def test_k8s_manifests_parse_as_configmap_and_daemonset_patches_with_envfrom():
    text = userdata.k8s_manifests(al2_config(service_cidr="172.20.0.0/16"), "10.0.0.0/16,10.1.0.0/16")

    configmap, *patches = [doc for doc in yaml.safe_load_all(text) if doc]
    assert configmap["kind"] == "ConfigMap"
    assert configmap["metadata"] == {"name": "proxy-environment-variables", "namespace": "kube-system"}
    assert configmap["data"]["HTTP_PROXY"] == configmap["data"]["HTTPS_PROXY"] == PROXY
    no_proxy = configmap["data"]["NO_PROXY"].split(",")
    assert no_proxy[:3] == ["10.0.0.0/16", "10.1.0.0/16", "172.20.0.0/16"]
    assert {"169.254.169.254", ".internal", "dkr.ecr.eu-west-1.amazonaws.com"} <= set(no_proxy)
    assert [(p["kind"], p["metadata"]["name"], p["metadata"]["namespace"]) for p in patches] == [
        ("DaemonSet", "aws-node", "kube-system"),
        ("DaemonSet", "kube-proxy", "kube-system"),
    ]
    for patch in patches:
        (container,) = patch["spec"]["template"]["spec"]["containers"]
        assert container == {
            "name": patch["metadata"]["name"],
            "envFrom": [{"configMapRef": {"name": "proxy-environment-variables"}}],
        }


def test_k8s_manifests_comments_hold_kubectl_patch_commands_matching_the_documents():
    text = userdata.k8s_manifests(al2_config(), ["10.0.0.0/16"])
    commands = [shlex.split(line[2:]) for line in text.splitlines() if line.startswith("# kubectl")]
    patches = [doc for doc in yaml.safe_load_all(text) if doc and doc["kind"] == "DaemonSet"]

    assert len(commands) == len(patches) == 2
    for argv, patch in zip(commands, patches, strict=True):
        assert argv[:6] == ["kubectl", "-n", "kube-system", "patch", "daemonset", patch["metadata"]["name"]]
        assert json.loads(argv[argv.index("--patch") + 1]) == {"spec": patch["spec"]}


@pytest.mark.parametrize(
    "cfg, vpc, message",
    [
        (al2_config(proxy="", cfn_signal=None), "10.0.0.0/16", "--k8s-manifests needs --proxy"),
        (al2_config(), "", "--vpc-cidr is required"),
        (al2_config(), "10.0.0.0/8,nonsense", "--vpc-cidr 'nonsense'"),
    ],
    ids=["no proxy", "no vpc cidr", "bad vpc cidr"],
)
def test_k8s_manifests_refuse_missing_or_bad_input(cfg, vpc, message):
    with pytest.raises(SpecError, match=message):
        userdata.k8s_manifests(cfg, vpc)


def test_aws_auth_entry_parses_with_the_node_groups_and_the_role_path_dropped():
    text = userdata.aws_auth_entry("arn:aws:iam::111122223333:role/eks/nodes/NodeInstanceRole-1AB")

    assert yaml.safe_load(text) == [{
        "rolearn": "arn:aws:iam::111122223333:role/NodeInstanceRole-1AB",
        "username": "system:node:{{EC2PrivateDNSName}}",
        "groups": ["system:bootstrappers", "system:nodes"],
    }]
    assert "/eks/nodes/ is left out" in text


def test_aws_auth_entry_keeps_the_partition_of_a_govcloud_role():
    entry = yaml.safe_load(userdata.aws_auth_entry("arn:aws-us-gov:iam::111122223333:role/Nodes"))

    assert entry[0]["rolearn"] == "arn:aws-us-gov:iam::111122223333:role/Nodes"


@pytest.mark.parametrize(
    "arn, hint",
    [
        ("arn:aws:iam::111122223333:instance-profile/Nodes", "not its instance profile"),
        ("arn:aws:sts::111122223333:assumed-role/Nodes/i-0abc", "not a session of it"),
        ("arn:aws:iam::1234:role/Nodes", "arn:aws:iam::ACCOUNT:role/NAME"),
        ("NodeInstanceRole", "arn:aws:iam::ACCOUNT:role/NAME"),
    ],
)
def test_aws_auth_entry_refuses_anything_but_a_role_arn(arn, hint):
    with pytest.raises(SpecError, match="--role-arn") as caught:
        userdata.aws_auth_entry(arn)

    assert hint in str(caught.value)


if __name__ == "__main__":
    # After an intended change to the generated user data, from the repository root:
    #   python -m tests.test_userdata
    for name, make in RECORDED.items():
        (DATA / name).write_text(userdata.render_userdata(make()))
        print(f"wrote {DATA / name}", file=sys.stderr)


@pytest.mark.parametrize(("kubelet", "flags", "message"), [
    (KubeletSettings.parse(max_pods=20), ("--max-pods=3",), "--kubelet-flag --max-pods and --max-pods both set it"),
    (KubeletSettings.parse(labels=["team=data"]), ("--node-labels=a=b",),
     "--kubelet-flag --node-labels and --node-label both set it"),
    (KubeletSettings.parse(max_pods_expression="default_enis * 10"), ("--max-pods=3",),
     "--kubelet-flag --max-pods and --max-pods-expression both set max pods"),
])
def test_kubelet_flags_merged_into_kubelet_settings_are_checked_with_them(kubelet, flags, message) -> None:
    # the same combination given as flags alone is refused by KubeletSettings.parse; merged, it is too
    with pytest.raises(SpecError, match=message):
        al2023_config(kubelet=kubelet, kubelet_flags=flags)


def test_kubelet_flags_merged_into_kubelet_settings_keep_the_settings() -> None:
    cfg = al2023_config(kubelet=KubeletSettings.parse(labels=["team=data"], max_pods=20),
                        kubelet_flags=("--image-gc-high-threshold=80",))
    assert cfg.kubelet == KubeletSettings.parse(flags=["--image-gc-high-threshold=80"], labels=["team=data"],
                                                max_pods=20)
    assert cfg.kubelet_flags == ("--image-gc-high-threshold=80",)


def test_a_max_pods_kubelet_flag_and_a_max_pods_expression_are_refused_together() -> None:
    # kubelet flags win over its config file, so nodeadm's maxPods from the expression would be ignored
    with pytest.raises(SpecError, match="--kubelet-flag --max-pods and --max-pods-expression both set max pods"):
        KubeletSettings.parse(flags=["--max-pods=3"], max_pods_expression="default_enis * 10")


def test_a_proxy_password_with_shell_characters_reaches_bootstrap_sh_as_written(tmp_path):
    """The boothook writes the proxy into /etc/environment; the AL2 script exports it for bootstrap.sh.
    `source` ran that file: `$b` was unbound under `set -u` and `&` started a command, so the node
    never joined. It is read as data now."""
    proxy = "http://u:a$b&c;d(e)@proxy.corp.example:3128"
    node = Node(tmp_path)
    cfg = al2_config(proxy=proxy)
    assert node.run(boothook(cfg), active="containerd").returncode == 0
    script = shell_of(userdata_decode.decode(userdata.render_userdata(cfg).encode())[1])
    head = script.split("status=0", 1)[0].replace("/etc/environment", str(node.root / "etc" / "environment"))
    run = subprocess.run([BASH, "-c", head + 'printf "%s|%s\\n" "$HTTPS_PROXY" "${LANG-unset}"'],
                         env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=20, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"{proxy}|unset\n"
