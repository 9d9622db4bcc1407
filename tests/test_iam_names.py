"""IAM role / instance profile names and Karpenter's discovery value take AWS's shapes (issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest

from amibuild.errors import SpecError
from amibuild.handoff import karpenter
from amibuild.pipeline import iam_names
from amibuild.pipeline.imagetests import boot_test_settings
from conftest import run_cli

PIPELINE = """
pipeline {
  name    = "karp"
  regions = ["us-west-2"]
}
variant "ceph" {
  os                 = "al2023"
  kubernetes_version = "1.33"
}
"""
BAD = {
    "a newline": "nodes\n",
    "a newline inside": "nodes\nrole: admin",
    "a hash": "nodes#x",
    "braces": "{{nodes}}",
    "a space": "node role",
    "non-ASCII letters": "nödes",
    "Arabic-Indic digits": "nodes\u0661\u0662",
    "a slash (an ARN's)": "arn:aws:iam::123456789012:role/nodes",
    "a tab": "nodes\t",
}


def node_class(**given: str) -> dict:
    return karpenter.node_class(name="ceph-stable", parameter="/amibuild/karp/ceph/stable", region="us-west-2",
                                os_family="al2023", cluster="prod", pipeline="karp", variant="ceph",
                                channel="stable", **given)


@pytest.mark.parametrize("value", BAD.values(), ids=BAD.keys())
@pytest.mark.parametrize("flag", ["role", "instance_profile", "discovery"])
def test_the_node_class_refuses_a_name_iam_or_karpenter_would_not_take(flag: str, value: str) -> None:
    with pytest.raises(SpecError, match=f"^--{flag.replace('_', '-')} "):
        node_class(**{flag: value})


def test_lengths_are_iams() -> None:
    assert node_class(role="r" * 64)["spec"]["role"] == "r" * 64
    with pytest.raises(SpecError, match="an IAM role name is 1 to 64"):
        node_class(role="r" * 65)
    assert node_class(instance_profile="p" * 128)["spec"]["instanceProfile"] == "p" * 128
    with pytest.raises(SpecError, match="an IAM instance profile name is 1 to 128"):
        node_class(instance_profile="p" * 129)


def test_every_iam_character_is_taken() -> None:
    name = "Az09+=,.@_-"
    spec = node_class(role=name, discovery=name)["spec"]
    assert spec["role"] == name and spec["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": name}}]


def test_the_default_role_is_checked_too() -> None:
    """KarpenterNodeRole-CLUSTER must fit IAM's 64 characters."""
    with pytest.raises(SpecError, match=r"^--cluster c{50}: the default role 'KarpenterNodeRole-c{50}': an IAM role "
                                        r"name is 1 to 64"):
        karpenter.node_class(name="n", parameter="/p", region="us-west-2", os_family="al2023", cluster="c" * 50,
                             pipeline="karp", variant="ceph", channel="stable")


def test_a_cluster_with_a_newline_is_refused_before_it_reaches_role_selectors_or_user_data() -> None:
    with pytest.raises(SpecError, match=r"^--cluster 'prod\\n': an EKS cluster name"):
        karpenter.node_class(name="n", parameter="/p", region="us-west-2", os_family="al2023", cluster="prod\n",
                             pipeline="karp", variant="ceph", channel="stable")


def test_the_message_shows_a_newline_rather_than_printing_it() -> None:
    with pytest.raises(SpecError) as caught:
        iam_names.role("nodes\nrole: admin", "--role")
    assert "\n" not in str(caught.value) and "'nodes\\nrole: admin'" in str(caught.value)


def test_karpenter_refuses_a_role_with_a_newline_with_exit_2_and_one_line(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    result = run_cli(tmp_path, "karpenter", "--variant", "ceph", "--channel", "stable", "--role", "nodes\n")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "amibuild: error: --role 'nodes\\n': an IAM role name is 1 to 64 ASCII letters, digits and + = , . @ _ - "
        "(the name, not its ARN; no spaces, line breaks or braces)"]
    assert result.stdout == ""


@pytest.mark.parametrize(("flag", "value"), [("--instance-profile", "p#1"), ("--discovery", "{{prod}}"),
                                             ("--discovery", "prod\n"), ("--role", "rôle")])
def test_karpenter_refuses_other_bad_names_with_exit_2(tmp_path: Path, flag: str, value: str) -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    result = run_cli(tmp_path, "karpenter", "--variant", "ceph", "--channel", "stable", flag, value)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"amibuild: error: {flag} ") and len(result.stderr.strip().splitlines()) == 1


def test_the_boot_test_role_and_profile_are_held_to_the_same_shapes(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"test.instance_profile 'p\\n'"):
        boot_test_settings({"instance_profile": "p\n"}, "test")
    with pytest.raises(SpecError, match=r"test.role 'r\\xe9': an IAM role name"):
        boot_test_settings({"instance_profile": "p", "role": "r\u00e9"}, "test")
