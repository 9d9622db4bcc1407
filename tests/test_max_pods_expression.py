"""`--max-pods-expression`: nodeadm's CEL expression for max pods reaches the real nodeadm as given,
and an expression nodeadm could not use (which `nodeadm config check` lets through) is refused
with exit 2, as is the flag where it would do nothing: on AL2, beside --max-pods, and on
Karpenter's node classes, whose own NodeConfig sets maxPods.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from amibuild.handoff.userdata.kubelet import KubeletSettings
from amibuild.handoff.userdata.maxpods import SAMPLES, check_expression
from amibuild.errors import SpecError
from conftest import run_cli, needs_nodeadm
from test_kubelet_settings import AL2023, CLUSTER, ROOT, dump, nodeadm

EXPRESSION = "((default_enis - 1) * (ips_per_eni - 1)) + 2"  # upstream's e2e case custom-max-pods-expression


@needs_nodeadm
def test_expression_passes_the_real_nodeadm_and_its_dump_shows_it(tmp_path: Path) -> None:
    made = run_cli(ROOT, "userdata", *AL2023, "--max-pods-expression", EXPRESSION, "--node-label", "a=b",
                   binary="amibuild")
    assert made.returncode == 0, made.stderr
    path = tmp_path / "userdata"
    path.write_text(made.stdout)

    spec = dump(path)

    assert spec["kubelet"]["maxPodsExpression"] == EXPRESSION
    assert "config" not in spec["kubelet"]  # no fixed maxPods: it would win over the expression


@needs_nodeadm
def test_nodeadm_config_check_alone_accepts_a_broken_expression(tmp_path: Path) -> None:
    """Why amibuild compiles the expression itself: the real nodeadm only evaluates it at `init`."""
    path = tmp_path / "nodeconfig.yaml"
    path.write_text("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: c\n"
                    "    apiServerEndpoint: https://example.com\n    certificateAuthority: Y2E=\n"
                    "    cidr: 10.100.0.0/16\n  kubelet:\n    maxPodsExpression: \"((((\"\n")

    checked = nodeadm("check", path)

    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize(("expression", "named"), [
    pytest.param("((((", "does not parse", id="syntax"),
    pytest.param("enis * 2", "unknown variable enis", id="unknown variable"),
    pytest.param("true ? max_pods : bogus", "unknown variable bogus", id="unknown variable in a branch not taken"),
    pytest.param("max_pods > 3", "not a whole number", id="a bool"),
    pytest.param("max_pods / 0", "divide by zero", id="divide by zero"),
    pytest.param("max_pods - 100000", "no positive whole number", id="never positive"),
    pytest.param("max_pods\n+ 1", "one line", id="newline"),
])
def test_an_expression_nodeadm_could_not_use_exits_2_naming_the_flag(expression: str, named: str) -> None:
    result = run_cli(ROOT, "userdata", *AL2023, "--max-pods-expression", expression, binary="amibuild")

    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--max-pods-expression" in lines[0] and named in lines[0], result.stderr


def test_upstream_examples_are_accepted() -> None:
    # nodeadm's own documentation and e2e cases
    for expression in (EXPRESSION, "max_pods + 2", "max_pods < 30 ? max_pods : 30",
                       "((default_enis - 3) * (ips_per_eni - 1)) + 2"):
        assert check_expression(expression) == expression


def test_the_standard_value_matches_nodeadms_formula() -> None:
    # m5.large: 3 interfaces of 10 addresses -> 29 pods, as EKS's eni-max-pods table gives
    assert {s.instance_type: s.max_pods for s in SAMPLES}["m5.large"] == 29


def test_refused_on_al2_and_together_with_max_pods() -> None:
    on_al2 = run_cli(ROOT, "userdata", *CLUSTER, "--os", "al2", "--max-pods-expression", "max_pods",
                     binary="amibuild")
    both = run_cli(ROOT, "userdata", *AL2023, "--max-pods", "30", "--max-pods-expression", "max_pods",
                   binary="amibuild")

    assert on_al2.returncode == 2 and "--max-pods N" in on_al2.stderr, on_al2.stderr
    assert both.returncode == 2 and "fixed value win" in both.stderr, both.stderr


def test_the_stack_parameters_remember_the_expression() -> None:
    settings = KubeletSettings.parse(labels=["a=b"], max_pods_expression="max_pods + 2")

    assert settings.to_parameters()["MaxPodsExpression"] == "max_pods + 2"
    assert KubeletSettings.from_parameters(settings.to_parameters()) == settings
    with pytest.raises(SpecError):
        KubeletSettings.from_parameters({"MaxPods": "3", "MaxPodsExpression": "max_pods"})


def test_removing_one_way_to_size_pods_keeps_the_other_the_stack_has() -> None:
    from amibuild.handoff.node_settings import Asked

    fixed = Asked.parse(max_pods_expression="none").merge({"MaxPods": "40"}).kubelet
    expression = Asked.parse(max_pods="none").merge({"MaxPodsExpression": EXPRESSION}).kubelet

    assert (fixed.max_pods, fixed.max_pods_expression) == (40, "")
    assert (expression.max_pods, expression.max_pods_expression) == (None, EXPRESSION)
    assert Asked.parse(max_pods="30").merge({"MaxPodsExpression": EXPRESSION}).kubelet.max_pods_expression == ""


@needs_nodeadm
def test_a_node_group_stack_keeps_the_expression_and_a_fixed_value_replaces_it(sandbox, tmp_path) -> None:
    from amibuild.sandbox import SANDBOX_CLUSTER, seed_images
    from test_node_settings import nodeadm_spec
    from test_today_nodes import network, parameters_of

    image = seed_images()[0].image_id
    created = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-expr", "--cluster", SANDBOX_CLUSTER,
                      *network(sandbox), "--os", "al2023", "--parameter", f"NodeImageId={image}",
                      "--max-pods-expression", EXPRESSION)
    assert created.returncode == 0, created.stderr
    assert nodeadm_spec("ng-expr", tmp_path)["kubelet"] == {"maxPodsExpression": EXPRESSION}
    assert parameters_of("ng-expr")["MaxPodsExpression"] == EXPRESSION

    updated = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-expr", "--max-pods", "40")

    assert updated.returncode == 0, updated.stderr
    assert nodeadm_spec("ng-expr", tmp_path)["kubelet"] == {"config": {"maxPods": 40}}
    assert parameters_of("ng-expr")["MaxPodsExpression"] == ""


def test_node_group_refuses_a_bad_expression_and_al2_before_any_aws_call(tmp_path) -> None:
    bad = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng", "--os", "al2023",
                  "--max-pods-expression", "((((")
    al2 = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng", "--os", "al2", "--max-pods-expression", "max_pods")

    assert bad.returncode == 2 and "does not parse" in bad.stderr, bad.stderr
    assert al2.returncode == 2 and "--max-pods N" in al2.stderr, al2.stderr


def test_karpenter_refuses_the_flag_saying_why(tmp_path) -> None:
    result = run_cli(tmp_path, "karpenter", "--variant", "ceph", "--channel", "stable",
                     "--max-pods-expression", "max_pods + 2", binary="amibuild")

    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    assert "Karpenter's own NodeConfig sets kubelet maxPods" in result.stderr and "spec.kubelet.maxPods" in result.stderr
