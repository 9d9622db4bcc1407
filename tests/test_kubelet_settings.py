"""Kubelet settings reach the node as asked: the real nodeadm reads amibuild's AL2023 user data
(`config check`, `config dump`), AL2's arguments follow bootstrap.sh's own option table (read from
the real bootstrap.sh of the upstream snapshots), and values the kubelet would get split or
mangled are refused through the command line with exit 2 and one line naming the flag.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from amibuild.handoff.userdata import render as userdata
from amibuild.handoff.userdata.bootstrap_sh import OPTIONS
from amibuild.handoff.userdata.kubelet import KubeletSettings
from conftest import run_cli, shared_dir, NODEADM, needs_nodeadm

ROOT = Path(__file__).resolve().parent.parent
FAKE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n").decode()
ENDPOINT = "https://0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com"
PROXY = "http://proxy.corp.example:3128"
CLUSTER = ["--cluster", "prod-eu", "--region", "eu-west-1"]
AL2023 = [*CLUSTER, "--api-server-endpoint", ENDPOINT, "--certificate-authority", FAKE_CA,
          "--service-cidr", "172.20.0.0/16"]


SHARED = shared_dir("upstream")


def nodeadm(command: str, path: Path) -> subprocess.CompletedProcess[str]:
    assert NODEADM is not None
    return subprocess.run([str(NODEADM), "config", command, "--config-source", f"file://{path}"],
                          capture_output=True, text=True, timeout=60)


def dump(path: Path) -> dict:
    checked = nodeadm("check", path)
    assert checked.returncode == 0 and "Configuration is valid" in checked.stderr + checked.stdout, checked.stderr
    dumped = nodeadm("dump", path)
    assert dumped.returncode == 0, dumped.stderr
    return json.loads(dumped.stdout[: dumped.stdout.rindex("}") + 1])["spec"]


# -------------------------------------------------------------------- the real nodeadm reads it


@needs_nodeadm
def test_userdata_with_every_option_passes_nodeadm_and_dumps_exactly_what_was_asked(tmp_path: Path) -> None:
    made = run_cli(ROOT, "userdata", *AL2023, "--proxy", PROXY, "--no-proxy", "registry.corp.example",
                    "--kubelet-flag=--v=2", "--kubelet-flag=--eviction-hard=memory.available<100Mi",
                    "--node-label", "team=data", "--node-label", "example.com/tier=batch",
                    "--taint", "dedicated=ceph:NoSchedule", "--taint", "spot:PreferNoSchedule",
                    "--max-pods", "58", "--cfn-stack", "prod-nodes", "--cfn-resource", "NodeGroup",
                    "--private-endpoint", binary="amibuild")
    assert made.returncode == 0, made.stderr
    path = tmp_path / "userdata"
    path.write_text(made.stdout)

    spec = dump(path)

    assert spec["kubelet"] == {
        "config": {"maxPods": 58},
        "flags": ["--v=2", "--eviction-hard=memory.available<100Mi", "--node-labels=team=data,example.com/tier=batch",
                  "--register-with-taints=dedicated=ceph:NoSchedule,spot=:PreferNoSchedule"],
    }
    environment = spec["instance"]["environment"]
    assert list(environment) == ["default"]
    default = environment["default"]
    assert {k: default[k] for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")} == dict.fromkeys(
        ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"), PROXY)
    no_proxy = default["NO_PROXY"].split(",")
    assert default["no_proxy"] == default["NO_PROXY"]
    for entry in ("172.20.0.0/16", "169.254.169.254", "localhost", "127.0.0.1", ".internal",
                  "eu-west-1.eks.amazonaws.com", "registry.corp.example"):
        assert entry in no_proxy
    assert spec["cluster"] == {"name": "prod-eu", "apiServerEndpoint": ENDPOINT, "certificateAuthority": FAKE_CA,
                               "cidr": "172.20.0.0/16"}


@needs_nodeadm
def test_userdata_defaults_to_al2023_and_without_settings_nodeadm_gets_no_kubelet_or_environment(
        tmp_path: Path) -> None:
    made = run_cli(ROOT, "userdata", *AL2023, binary="amibuild")
    assert made.returncode == 0, made.stderr
    path = tmp_path / "userdata"
    path.write_text(made.stdout)

    spec = dump(path)

    assert "application/node.eks.aws" in made.stdout and "bootstrap.sh" not in made.stdout
    assert spec["kubelet"] == {}
    assert "environment" not in spec["instance"]


def test_al2_gets_every_setting_as_bootstrap_sh_arguments_it_knows() -> None:
    cfg = userdata.config_from_flags(cluster="prod-eu", os="al2", kubelet_flags=["--v=2"], node_labels=["a=b"],
                                     taints=["k=v:NoExecute"], max_pods="20")

    argv = userdata.bootstrap_argv(cfg)

    assert argv == ["prod-eu", "--kubelet-extra-args",
                    "--v=2 --node-labels=a=b --register-with-taints=k=v:NoExecute --max-pods=20",
                    "--use-max-pods", "false"]
    # every word after the cluster name is an option bootstrap.sh takes, then its value
    assert all(word in OPTIONS for word in argv[1::2])


def test_settings_survive_the_stack_parameters_that_remember_them() -> None:
    settings = KubeletSettings.parse(flags=["--v=2", "--cpu-manager-policy=static"], labels=["a=b", "x.io/c=d"],
                                     taints=["k=v:NoSchedule", "only:NoExecute"], max_pods=30)

    assert KubeletSettings.from_parameters(settings.to_parameters()) == settings
    assert KubeletSettings.from_parameters({}) == KubeletSettings()


# ------------------------------------------------------------------ bootstrap.sh's option table


def _bootstrap_options(text: str) -> set[str]:
    """The options of bootstrap.sh's argument `case` (labels such as `    --use-max-pods)`)."""
    loop = text[text.index("while [[ $# -gt 0 ]]"):]
    loop = loop[: loop.index("esac")]
    labels = re.findall(r"^\s+((?:-[-\w]+)(?:\s*\|\s*-[-\w]+)*)\)", loop, flags=re.M)
    return {name.strip() for label in labels for name in label.split("|")} - {"-h", "--help"}


@pytest.mark.skipif(SHARED is None, reason="../shared/upstream (amazon-eks-ami snapshots) is not here")
@pytest.mark.parametrize("archive", ["amazon-eks-ami-v20240615.tar.gz", "amazon-eks-ami-v20240117.tar.gz"])
def test_option_table_is_the_one_of_the_real_bootstrap_sh(archive: str) -> None:
    assert SHARED is not None
    with tarfile.open(SHARED / "upstream" / "amazon-eks-ami" / archive) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/bootstrap.sh"))
        text = tar.extractfile(member).read().decode()  # type: ignore[union-attr]

    found = _bootstrap_options(text)

    # the newest AL2 bootstrap.sh has exactly our table; an older one a subset of it
    if archive.endswith("v20240615.tar.gz"):
        assert found == OPTIONS
    else:
        assert found and found <= OPTIONS


# ---------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(("args", "named"), [
    pytest.param(["--kubelet-flag=--node-labels=a=b --max-pods=999"], "--kubelet-flag", id="flag with a space"),
    pytest.param(["--kubelet-flag=--node-labels=a='b'"], "--kubelet-flag", id="flag with a quote"),
    pytest.param(["--kubelet-flag=--node-labels=a=b\n--max-pods=9"], "--kubelet-flag", id="flag with a newline"),
    pytest.param(["--kubelet-flag=--v=$HOME"], "--kubelet-flag", id="flag with a dollar"),
    pytest.param(["--kubelet-flag=--v=2", "--kubelet-flag=--v=3"], "--kubelet-flag --v is given twice", id="twice"),
    pytest.param(["--kubelet-flag=--max-pods=9", "--max-pods", "9"], "--kubelet-flag --max-pods", id="both ways"),
    pytest.param(["--node-label", "a=b c"], "--node-label", id="label with a space"),
    pytest.param(["--node-label", "team"], "--node-label", id="label without value"),
    pytest.param(["--node-label", "node-role.kubernetes.io/worker=x"], "--node-label", id="restricted label"),
    pytest.param(["--node-label", "k8s.io/team=x"], "--node-label", id="restricted k8s.io label"),
    pytest.param(["--taint", "k=v:Never"], "--taint", id="taint effect"),
    pytest.param(["--taint", "k=a:NoSchedule", "--taint", "k=b:NoSchedule"], "--taint k with NoSchedule is given twice",
                 id="taint key and effect twice"),
    pytest.param(["--taint", "k=v'x:NoSchedule"], "--taint", id="taint with a quote"),
    pytest.param(["--max-pods", "lots"], "--max-pods", id="max pods"),
    pytest.param(["--os", "al2", "--bootstrap-args", "--use-max-pods=false"], "--use-max-pods=false",
                 id="bootstrap opt=value"),
    pytest.param(["--os", "al2", "--bootstrap-args", "--b64-cluster-ca"], "--b64-cluster-ca needs a value",
                 id="bootstrap option alone"),
    pytest.param(["--os", "al2", "--bootstrap-args", "--b64-cluster-ca --dns-cluster-ip 10.0.0.10"],
                 "--b64-cluster-ca needs a value", id="bootstrap option then option"),
    pytest.param(["--os", "al2", "--bootstrap-args", "--max-pods 9"], "'--max-pods' is not an option",
                 id="bootstrap unknown option"),
    pytest.param(["--os", "al2", "--bootstrap-args", "--kubelet-extra-args \"--node-labels=it's\""],
                 "--kubelet-extra-args holds", id="bootstrap kubelet args quote"),
    pytest.param(["--os", "al2", "--max-pods", "9", "--bootstrap-args", "--use-max-pods true"],
                 "--bootstrap-args sets --use-max-pods", id="bootstrap max pods twice"),
    pytest.param(["--bootstrap-args", "--use-max-pods false"], "--bootstrap-args is for al2", id="al2023 bootstrap"),
])
def test_values_the_kubelet_would_not_get_as_given_are_refused_naming_the_flag(args: list[str], named: str) -> None:
    result = run_cli(ROOT, "userdata", *AL2023, *args, binary="amibuild")

    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], result.stderr


def test_labels_the_kubelet_takes_are_accepted_as_its_own_rule_reads_them() -> None:
    # kubernetes.io / k8s.io means the namespace itself or a subdomain of it; the kubelet's allowed list
    # has the deprecated beta labels too
    labels = ["myk8s.io/team=a", "example-kubernetes.io/tier=b", "beta.kubernetes.io/arch=amd64",
              "failure-domain.beta.kubernetes.io/zone=eu-west-1a", "team.node.kubernetes.io/pool=c"]

    assert len(KubeletSettings.parse(labels=labels).labels) == len(labels)
