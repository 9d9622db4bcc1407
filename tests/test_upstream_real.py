"""The upstream base against the real awslabs/amazon-eks-ami repository, not look-alikes.

Snapshots of four refs (the 2020 root layout, the last root layout of 2024-01, the first
templates/ layout of 2024-06, today's AL2023-only HEAD) live in the shared upstream folder (see its
README); each test unpacks what it needs and skips with a reason when the folder is absent.
Kubernetes versions and build dates come from the sandbox's `amazon-eks` bucket, as upstream's
`make k8s=1.N` finds them in the real one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import boto3
import pytest

from amibuild import hcl
from amibuild.bake import prepare
from amibuild.errors import SpecError, UpstreamError
from amibuild.render.upstream import binaries as binaries_mod
from amibuild.render.upstream import hcl_document as upstream_document
from amibuild.render.upstream import load
from amibuild.sandbox import upstream as seed
from amibuild.pipeline import Overrides
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent


def _shared() -> Path | None:
    candidates = [Path(os.environ["AMIBUILD_SHARED"])] if os.environ.get("AMIBUILD_SHARED") else []
    candidates += [ROOT.parent / "shared", ROOT.parent.parent / "shared"]  # checkout, or a worktree
    return next((c for c in candidates if (c / "upstream" / "amazon-eks-ami").is_dir()), None)


SHARED = _shared()
pytestmark = [
    pytest.mark.skipif(SHARED is None, reason="no shared/upstream/ snapshots of amazon-eks-ami next to this checkout "
                                              "(set AMIBUILD_SHARED to the folder holding upstream/)"),
    pytest.mark.skipif(shutil.which("packer") is None, reason="no packer binary on PATH"),
]

# snapshot -> (os, Kubernetes minor to build)
SNAPSHOTS = {
    "v20201117": ("al2", "1.29"),
    "v20240117": ("al2", "1.29"),
    "v20240615": ("al2", "1.30"),
    "v20240615-al2023": ("al2023", "1.30"),
    "81fec2e8": ("al2023", "1.33"),
}
CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
SENTINEL = "SENTINELsecretKEY0123456789abcdefDONOTLEAK"


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Flags alone: the repository's own amibuild.hcl must not be picked up."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def checkouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """ref -> the unpacked snapshot's root (one unpack per module)."""
    assert SHARED is not None
    base = tmp_path_factory.mktemp("upstream")
    out = {}
    for archive in sorted((SHARED / "upstream" / "amazon-eks-ami").glob("amazon-eks-ami-*.tar.gz")):
        ref = archive.name[len("amazon-eks-ami-"):-len(".tar.gz")]
        with tarfile.open(archive) as tar:
            tar.extractall(base / ref, filter="data")
        inner = [p for p in (base / ref).iterdir() if p.is_dir()]
        out[ref] = inner[0] if len(inner) == 1 else base / ref
    # The 2024-06 snapshot leaves out nodeadm/ (its AL2023 template uploads it): a copy with an
    # empty folder in its place stands in for a full checkout of that tag.
    if "v20240615" in out:
        full = base / "v20240615-with-nodeadm"
        shutil.copytree(out["v20240615"], full, symlinks=True)
        (full / "nodeadm").mkdir()
        out["v20240615-al2023"] = full
    return out


def checkout_of(checkouts: dict[str, Path], snapshot: str) -> Path:
    return checkouts.get(snapshot) or checkouts[snapshot.split("-")[0]]


def options(root: Path, os_family: str, k8s: str, build_dir: Path, *, pipeline: Path | None = None,
            variables: tuple[str, ...] = ()) -> prepare.Options:
    overrides = Overrides(base="upstream", upstream=str(root), os=os_family, kubernetes_version=k8s,
                          extra_packages=("ceph-common",), variables=variables)
    return prepare.Options(pipeline_file=str(pipeline) if pipeline else None, overrides=overrides,
                            build_dir=str(build_dir))


def build_block(text: str) -> list[tuple[str, dict]]:
    build = hcl.loads(text)["build"][0]
    return [next(iter(p.items())) for p in build.get("provisioner", [])]


def credential_readers(template: Path) -> set[str]:
    """Scripts whose environment upstream's JSON template fills from the credential variables."""
    doc = json.loads(template.read_text())
    return {
        os.path.basename(p["script"]) for p in doc["provisioners"]
        if "script" in p and any("aws_access_key_id" in e for e in p.get("environment_vars", []))
    }


def script_name(settings: dict) -> str:
    return os.path.basename(str(settings.get("script", "")))


# --------------------------------------------------------------------------- render and validate


@pytest.mark.parametrize("snapshot", SNAPSHOTS)
def test_each_snapshot_renders_with_resolved_binaries_and_passes_packer_16(
        snapshot: str, checkouts: dict[str, Path], sandbox, tmp_path: Path) -> None:
    os_family, minor = SNAPSHOTS[snapshot]
    from amibuild.bake.packer import Packer

    result = prepare.render(options(checkout_of(checkouts, snapshot), os_family, minor, tmp_path / "build"))
    directory = result.directories[0]
    prepare.check_directory(Packer("packer"), directory)  # python-hcl2, packer validate, fmt -check

    values = hcl.loads((directory / "amibuild.auto.pkrvars.hcl").read_text())
    version, date = seed.newest_binaries(minor)
    assert (values["kubernetes_version"], values["kubernetes_build_date"]) == (version, date)
    assert values["extra_packages"] == ["ceph-common"]
    record = json.loads((directory / "render.json").read_text())
    assert any(f"{version}/{date}" in note for note in record["notes"])
    assert result.packer_version.startswith("1.6")
    text = (directory / "amibuild.pkr.hcl").read_text()
    assert "metadata_options" not in text  # Packer 1.6.6 refuses it ...
    if snapshot != "v20201117":  # ... and every later snapshot has it: the loss is said
        assert any("IMDSv2" in note and "metadata_options" in note for note in record["notes"])


def test_the_al2_only_root_layout_and_al2023_only_head_say_which_os_they_hold(checkouts: dict[str, Path]) -> None:
    with pytest.raises(UpstreamError, match=r"no al2 template .*removed .*2026-03.*--os al2023"):
        load(checkouts["81fec2e8"], os_family="al2")
    with pytest.raises(UpstreamError, match=r"no al2023 template, only al2: use --os al2 .*a newer --upstream-ref"):
        load(checkouts["v20240117"], os_family="al2023")


def test_the_last_root_layout_takes_the_makefiles_per_version_defaults(checkouts: dict[str, Path]) -> None:
    # its Makefile sets docker_version ?= none from Kubernetes 1.25 on; the variables file says 20.10.*
    root = checkouts["v20240117"]
    assert load(root, k8s="1.29").variables["docker_version"] == "none"
    assert load(root, k8s="1.24").variables["docker_version"] == "20.10.*"
    assert "containerd" in load(root, k8s="1.29").variables["ami_component_description"]
    assert "docker" not in load(root, k8s="1.29").variables["ami_component_description"]


def test_a_checkout_missing_what_the_template_uploads_is_refused_before_any_aws_work(
        checkouts: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(UpstreamError, match=r"uploads .*/nodeadm, which is not in the checkout"):
        load(checkouts["v20240615"], os_family="al2023", k8s="1.30")
    with pytest.raises(UpstreamError, match="nodeadm"):
        prepare.render(options(checkouts["v20240615"], "al2023", "1.30", tmp_path / "build"))
    assert not (tmp_path / "build").exists()


@pytest.mark.parametrize("snapshot", SNAPSHOTS)
def test_every_upload_comes_from_the_checkout_nodeadm_included(snapshot: str, checkouts: dict[str, Path]) -> None:
    os_family, minor = SNAPSHOTS[snapshot]
    root = checkout_of(checkouts, snapshot)
    text = upstream_document(load(root, os_family=os_family, k8s=minor))
    uploads = [p["source"] for kind, p in build_block(text) if kind == "file" and p.get("direction") != "download"]
    assert uploads
    for source in uploads:
        assert Path(source).is_absolute() and Path(source).resolve().is_relative_to(root), source
    if os_family == "al2023":
        assert str(root / "nodeadm") + "/" in uploads


@pytest.mark.parametrize("snapshot", ["v20240615", "81fec2e8"])
def test_variables_layer_default_then_minor_file_and_a_null_in_a_file_counts_as_set(
        snapshot: str, checkouts: dict[str, Path]) -> None:
    root = checkout_of(checkouts, snapshot)
    os_family = "al2" if snapshot == "v20240615" else "al2023"
    minor = "1.24" if snapshot == "v20240615" else "1.35"
    per_minor = json.loads((root / f"templates/{os_family}/variables-{minor}.json").read_text())
    default = json.loads((root / f"templates/{os_family}/variables-default.json").read_text())
    changed = sorted(k for k in per_minor if default.get(k) != per_minor[k] and "{{" not in str(per_minor[k]))
    assert changed, "the per-minor file should change something in this snapshot"

    t = load(root, os_family=os_family, k8s=minor)
    assert [p.name for p in t.var_files] == ["variables-default.json", f"variables-{minor}.json"]
    for name in changed:
        assert t.variables[name] == per_minor[name]
    assert load(root, os_family=os_family, k8s="1.99").variables[changed[0]] == default.get(changed[0])
    # user_data_file is null in the template and null in variables-default.json: set, not required
    assert "user_data_file" not in t.required and "ami_name" in t.required
    variable = {n: b for v in hcl.loads(hcl.dumps(list(t.declarations)))["variable"] for n, b in v.items()}
    assert variable["user_data_file"] == {"type": "string", "default": ""}
    assert variable["ami_name"] == {"type": "string"}


# ---------------------------------------------------------------------------------- credentials


@pytest.mark.parametrize("snapshot", SNAPSHOTS)
def test_credential_entries_stay_empty_and_upstream_credential_checks_pass_under_nounset(
        snapshot: str, checkouts: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What upstream's scripts see: its own `[[ -n "$AWS_ACCESS_KEY_ID" ]]` lines, run with
    `set -o nounset` and the environment entries Packer would pass, take the "no key" branch."""
    os_family, minor = SNAPSHOTS[snapshot]
    root = checkout_of(checkouts, snapshot)
    readers = credential_readers(load(root, os_family=os_family).template)
    assert "install-worker.sh" in readers
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SENTINEL)  # never carried into a file
    version, date = seed.newest_binaries(minor)
    result = prepare.render(options(root, os_family, version, tmp_path / "build",
                                     variables=(f"kubernetes_build_date={date}",)), resolve=False)
    text = (result.directories[0] / "amibuild.pkr.hcl").read_text()
    assert SENTINEL not in text
    provs = build_block(text)
    checked = 0
    for _, settings in provs:
        name = script_name(settings)
        if name not in readers:
            continue
        env = settings["environment_vars"]
        for var in CREDENTIAL_ENV:
            assert f"{var}=" in env, f"{name} lost its {var} entry"
        script = Path(settings["script"]).read_text()
        conditions = set(re.findall(r"\[\[ [^\]]*\$\{?AWS_(?:ACCESS_KEY_ID|SECRET_ACCESS_KEY|SESSION_TOKEN)[^\]]*\]\]",
                                    script))
        for condition in conditions:
            assignments = [e for e in env if e.split("=", 1)[0] in CREDENTIAL_ENV]
            probe = f"set -o nounset; if {condition}; then echo key; else echo no-key; fi"
            ok = subprocess.run(["env", "-i", *assignments, "bash", "-c", probe], capture_output=True, text=True)
            assert (ok.returncode, ok.stdout.strip()) == (0, "no-key"), (name, condition, ok.stderr)
            # without the entries (what amibuild used to render) the same line stops the script
            bad = subprocess.run(["env", "-i", "bash", "-c", probe], capture_output=True, text=True)
            assert bad.returncode != 0 and "unbound variable" in bad.stderr
            checked += 1
    if snapshot in ("v20201117", "v20240117", "v20240615"):
        assert checked >= 1  # these install-worker.sh versions test the key before downloading


# --------------------------------------------------------------------------------------- order


def test_order_proxy_first_packages_after_every_installer_user_scripts_last_before_cleanup(
        checkouts: dict[str, Path], tmp_path: Path) -> None:
    script = tmp_path / "site.sh"
    script.write_text("#!/usr/bin/env bash\necho site\n")
    for snapshot, (os_family, minor) in SNAPSHOTS.items():
        root = checkout_of(checkouts, snapshot)
        version, date = seed.newest_binaries(minor)
        pipeline = tmp_path / f"{snapshot}.hcl"
        pipeline.write_text(f"""
pipeline {{
  name    = "order"
  regions = ["us-west-2"]
}}
variant "up" {{
  base    = "upstream"
  upstream = {json.dumps(str(root))}
  os      = "{os_family}"
  kubernetes_version = "{version}"
  extra_packages = ["ceph-common"]
  scripts = [{json.dumps(str(script))}]
  proxy {{
    http = "http://proxy.example:3128"
  }}
  vars = {{ kubernetes_build_date = "{date}" }}
}}
""")
        opts = prepare.Options(pipeline_file=str(pipeline), build_dir=str(tmp_path / snapshot))
        result = prepare.render(opts, resolve=False)  # no endpoint: the order an instance sees
        provs = build_block((result.directories[0] / "amibuild.pkr.hcl").read_text())
        names = [script_name(p) or kind for kind, p in provs]
        assert names[0] == "configure-proxy.sh", snapshot
        packages = names.index("install-packages.sh")
        user = next(i for i, n in enumerate(names) if n.startswith("user-01-"))
        installers = [i for i, n in enumerate(names) if re.search(r"install|efa|nvidia|neuron", n)
                      and i not in (packages,) and not n.startswith("add-repos")]
        finishers = [i for i, n in enumerate(names) if re.search(r"cleanup|validate", n)]
        assert max(installers) < packages < user < min(finishers), (snapshot, names)
        notes = json.loads((result.directories[0] / "render.json").read_text())["notes"]
        order = next(n for n in notes if n.startswith("provisioner order on the instance: "))
        assert order.index("[amibuild] configure-proxy.sh") < order.index("install-worker.sh") \
            < order.index("[amibuild] install-packages.sh"), order


def test_upstreams_cleanup_and_the_steps_after_it_keep_their_order_ours_go_before_and_the_hygiene_checks_last(
        checkouts: dict[str, Path], tmp_path: Path) -> None:
    script = tmp_path / "site.sh"
    script.write_text("#!/usr/bin/env bash\necho site\n")
    for snapshot, (os_family, minor) in SNAPSHOTS.items():
        root = checkout_of(checkouts, snapshot)
        version, date = seed.newest_binaries(minor)
        pipeline = tmp_path / f"{snapshot}.hcl"
        pipeline.write_text(f"""
pipeline {{
  name    = "order"
  regions = ["us-west-2"]
}}
variant "up" {{
  base    = "upstream"
  upstream = {json.dumps(str(root))}
  os      = "{os_family}"
  kubernetes_version = "{version}"
  extra_packages = ["htop"]
  scripts = [{json.dumps(str(script))}]
  vars = {{ kubernetes_build_date = "{date}" }}
}}
""")
        opts = prepare.Options(pipeline_file=str(pipeline), build_dir=str(tmp_path / snapshot))
        result = prepare.render(opts, resolve=False)  # no endpoint: the order an instance sees
        provs = build_block((result.directories[0] / "amibuild.pkr.hcl").read_text())
        ours = [str(p.get("script", "")).startswith("${path.root}/") or "yum clean all" in str(p.get("inline", ""))
                or str(p.get("destination", "")).startswith("${path.root}/")  # stage 1's package list, brought back
                for _, p in provs]
        names = [script_name(p) or kind for kind, p in provs]
        template = load(root, os_family=os_family, k8s=minor)
        upstream_names = [n for n, mine in zip(names, ours, strict=True) if not mine]
        # every upstream step is there, in upstream's order
        assert upstream_names == [(label.split(", ")[0] if label.endswith(".sh") else kind) for label, kind in
                                  zip(template.labels, (b.labels[0] for b in template.provisioners), strict=True)], snapshot
        # ours (packages, the user's script, the stage-1 checks, the caches, the clean-up) sit together right before
        # upstream's first finishing step; the checks of the clean-up come after every upstream step
        assert names[-1] == "amibuild-hygiene.sh", (snapshot, names)
        block = [i for i, mine in enumerate(ours[:-1]) if mine and names[i] != "configure-proxy.sh"]
        assert block == list(range(block[0], block[-1] + 1)), (snapshot, names)
        assert [names[i] for i in block][-5:] == ["amibuild-checks.sh", "inventory.sh", "file", "shell", "cleanup.sh"], (
            snapshot, names)  # the checks, the package list and its download, the caches, the clean-up
        first_finisher = names[block[-1] + 1]
        assert re.search(r"cleanup|validate", first_finisher) and not ours[block[-1] + 1], (snapshot, names)
        tail = [n for n, mine in zip(names[block[-1] + 1:], ours[block[-1] + 1:], strict=True) if not mine]
        if "cleanup.sh" in upstream_names:  # 2024 on: upstream's own clean-up, then validate, version info, SELinux
            assert tail[0] == "cleanup.sh" and "validate.sh" in tail, (snapshot, tail)
        notes = json.loads((result.directories[0] / "render.json").read_text())["notes"]
        order = next(n for n in notes if n.startswith("provisioner order on the instance: "))
        assert order.endswith("[amibuild] cleanup.sh -> " + " -> ".join(
            template.labels[template.insert_at:]) + " -> [amibuild] amibuild-hygiene.sh"), (snapshot, order)


# ------------------------------------------------------------------------------ sandbox builds


@pytest.mark.parametrize("snapshot", ["v20240117", "81fec2e8"])
def test_build_ami_builds_one_al2_and_one_al2023_snapshot_in_the_sandbox(
        snapshot: str, checkouts: dict[str, Path], sandbox, tmp_path: Path) -> None:
    os_family, minor = SNAPSHOTS[snapshot]
    result = run_cli(tmp_path, "build-ami", "--json", "--base", "upstream",
                     "--upstream", str(checkout_of(checkouts, snapshot)), "--os", os_family, "--k8s", minor,
                     "--extra-pkg", "ceph-common")
    assert result.returncode == 0, result.stderr
    (variant,) = json.loads(result.stdout)["variants"]
    assert variant["status"] == "built"
    ami = variant["amis"]["us-west-2"]
    image = boto3.client("ec2", region_name="us-west-2").describe_images(ImageIds=[ami])["Images"][0]
    tags = {t["Key"]: t["Value"] for t in image.get("Tags", [])}
    version, date = seed.newest_binaries(minor)
    assert tags["kubernetes"] == f"{version}/{date}/bin/linux/x86_64"  # upstream's own tag
    wanted = "amzn2-ami-minimal-hvm-" if os_family == "al2" else "al2023-ami-minimal-"
    assert tags["source_ami_name"].startswith(wanted)  # upstream's filter found the seeded image


# ----------------------------------------------------------------------------- without AWS access


def test_without_aws_access_an_unpinned_version_says_both_ways(checkouts: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        prepare.render(options(checkouts["v20240117"], "al2", "1.29", tmp_path / "build"))
    message = str(caught.value)
    assert "\n" not in message
    assert "configure AWS credentials" in message and "--var kubernetes_build_date=" in message
    assert "--k8s 1.29.P" in message
    assert not (tmp_path / "build").exists()


def test_listing_the_sandbox_bucket_matches_upstreams_version_sort(sandbox) -> None:
    from amibuild.aws import Aws

    listed = Aws().list_eks_binaries(seed.BINARY_BUCKET, seed.BINARY_BUCKET_REGION, "1.30.")
    assert listed == ["1.30.10", "1.30.2", "1.30.9"]  # as S3 lists them: a string order
    assert binaries_mod.newest(listed, "1.30") == "1.30.10"
    assert Aws().list_eks_binaries(seed.BINARY_BUCKET, seed.BINARY_BUCKET_REGION, "1.30.10/") == \
        ["2024-06-20", "2024-07-03"]


@pytest.mark.parametrize("snapshot", ["v20201117", "v20240117"])
def test_copy_to_reaches_templates_with_and_without_an_ami_regions_variable(
        snapshot: str, checkouts: dict[str, Path], tmp_path: Path) -> None:
    pipeline = tmp_path / "amibuild.hcl"
    pipeline.write_text('pipeline {\n  regions = ["us-west-2"]\n  copy_to = ["eu-west-1", "us-east-1"]\n}\n')
    result = prepare.render(options(checkouts[snapshot], "al2", "1.29.2", tmp_path / "build", pipeline=pipeline,
                                     variables=("kubernetes_build_date=2024-01-04",)), resolve=False)
    directory = result.directories[0]
    source = hcl.loads((directory / "amibuild.pkr.hcl").read_text())["source"][0]["amazon-ebs"]["us-west-2"]
    values = hcl.loads((directory / "amibuild.auto.pkrvars.hcl").read_text())
    if snapshot == "v20201117":  # no ami_regions anywhere in that template: set on the source
        assert source["ami_regions"] == ["eu-west-1", "us-east-1"]
    else:
        assert source["ami_regions"] == '${compact(split(",", var.ami_regions))}'
        assert values["ami_regions"] == "eu-west-1,us-east-1"
