"""Per-region KMS keys and shared encrypted images through the command line (no AWS): the
refusals at load (a key of another region, a copy region without a key, a shared image on aws/ebs),
the render Packer validates, and `iam-policy --task share` in both forms."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import run_cli

BUILD = "123456789012"
CONSUMERS = ("210987654321", "333344445555")
WEST2 = f"arn:aws:kms:us-west-2:{BUILD}:key/11111111-2222-3333-4444-555555555555"
EU = f"arn:aws:kms:eu-west-1:{BUILD}:key/66666666-2222-3333-4444-555555555555"
EAST1 = f"arn:aws:kms:us-east-1:{BUILD}:key/77777777-2222-3333-4444-555555555555"
DEAD_ENDPOINT = "http://127.0.0.1:9"  # the tripwire: an AWS call would fail, not be refused with exit 2


def pipeline(tmp_path: Path, variant: str, *, users: tuple[str, ...] = (), copy_to: str = '["eu-west-1"]') -> Path:
    shared = f"\n  ami_users = {json.dumps(list(users))}" if users else ""
    (tmp_path / "amibuild.hcl").write_text(f"""
pipeline {{
  name    = "keys"
  regions = ["us-west-2"]
  copy_to = {copy_to}{shared}
}}
variant "ceph" {{
  os                 = "al2023"
  kubernetes_version = "1.33"
  encrypted          = true
{variant}
}}
""")
    return tmp_path


def amibuild(cwd: Path, *args: str):
    return run_cli(cwd, *args, binary="amibuild", env={"AWS_ENDPOINT_URL": DEAD_ENDPOINT, "AWS_REGION": "us-west-2",
                                                        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "x"})


def last_line(result) -> str:
    return result.stderr.strip().splitlines()[-1]


COMMANDS = (("render",), ("validate",), ("build-ami", "--dry-run"))


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_us_east_1_key_for_an_eu_west_1_copy_is_refused_with_exit_2(tmp_path: Path, command) -> None:
    work = pipeline(tmp_path, f'  kms_key_id = "{WEST2}"\n  region_kms_key_ids = {{ "eu-west-1" = "{EAST1}" }}')
    done = amibuild(work, *command)
    assert done.returncode == 2, done.stdout + done.stderr
    line = last_line(done)
    assert line.startswith('amibuild: error: amibuild.hcl: variant "ceph": region_kms_key_ids["eu-west-1"]: '), line
    assert f"key {EAST1} belongs to us-east-1, but it would encrypt the image in eu-west-1" in line
    assert "Traceback" not in done.stderr and not (work / "build").exists()  # nothing written


def test_a_build_regions_key_of_another_region_names_kms_key_id(tmp_path: Path) -> None:
    work = pipeline(tmp_path, f'  kms_key_id = "{EAST1}"\n  region_kms_key_ids = {{ "eu-west-1" = "{EU}" }}')
    done = amibuild(work, "render")
    assert done.returncode == 2
    assert 'variant "ceph": kms_key_id: key' in last_line(done) and "in us-west-2" in last_line(done)


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_an_encrypted_copy_region_without_a_key_is_refused_naming_it(tmp_path: Path, command) -> None:
    work = pipeline(tmp_path, f'  kms_key_id = "{WEST2}"', copy_to='["eu-west-1", "eu-central-1"]')
    done = amibuild(work, *command)
    assert done.returncode == 2, done.stdout + done.stderr
    line = last_line(done)
    assert "encrypted copy_to region eu-west-1 has no KMS key, while us-west-2 has one" in line, line
    assert 'add "eu-west-1" = "arn:aws:kms:eu-west-1:ACCOUNT:key/..." to region_kms_key_ids' in line
    assert not (work / "build").exists()


@pytest.mark.parametrize("key", ["", 'kms_key_id = "alias/aws/ebs"',
                                 f'kms_key_id = "{WEST2}"\n  region_kms_key_ids = {{ "eu-west-1" = "alias/aws/ebs" }}'],
                         ids=["no-key", "alias", "one-region-on-aws-ebs"])
@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_sharing_an_image_on_the_aws_ebs_key_is_refused_before_any_aws_call(tmp_path: Path, key: str, command) -> None:
    work = pipeline(tmp_path, f"  {key}", users=CONSUMERS)
    done = amibuild(work, *command)
    assert done.returncode == 2, done.stdout + done.stderr
    line = last_line(done)
    regions = "eu-west-1" if "region_kms_key_ids" in key else "us-west-2, eu-west-1"
    assert f"pipeline.ami_users shares variant 'ceph', whose image in {regions} would be encrypted with the " \
           "AWS-managed key aws/ebs" in line, line
    assert "amibuild iam-policy --task share" in line
    assert "127.0.0.1:9" not in done.stderr and not (work / "build").exists()


def test_the_same_pipeline_unshared_may_use_aws_ebs(tmp_path: Path) -> None:
    done = amibuild(pipeline(tmp_path, "", copy_to="[]"), "render")
    assert done.returncode == 0, done.stderr


def keyed(tmp_path: Path, users: tuple[str, ...] = CONSUMERS) -> Path:
    return pipeline(tmp_path, f'  kms_key_id = "{WEST2}"\n  region_kms_key_ids = {{ "eu-west-1" = "{EU}" }}',
                    users=users)


def test_region_kms_key_ids_is_rendered_each_source_with_its_regions_key(tmp_path: Path) -> None:
    work = keyed(tmp_path)
    done = amibuild(work, "render")
    assert done.returncode == 0, done.stderr
    text = (work / "build" / "ceph" / "amibuild.pkr.hcl").read_text()
    assert f'us-west-2 = "{WEST2}"' in text and f'eu-west-1 = "{EU}"' in text  # the variable's default
    assert 'kms_key_id                  = lookup(var.region_kms_key_ids, "us-west-2", "")' in text
    assert 'region_kms_key_ids          = { for r, k in var.region_kms_key_ids : r => k if r != "us-west-2" }' in text
    record = json.loads((work / "build" / "ceph" / "render.json").read_text())
    assert record["inputs"]["region_kms_key_ids"] == {"eu-west-1": EU}  # as written: in the fingerprint
    assert record["values"]["region_kms_key_ids"] == {"eu-west-1": EU, "us-west-2": WEST2}  # every region's key


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_the_rendered_keys_pass_the_real_packer_validate_and_fmt(tmp_path: Path) -> None:
    done = amibuild(keyed(tmp_path), "validate")
    assert done.returncode == 0, done.stderr
    assert "valid ceph: hcl2 parse, packer validate, packer fmt -check" in done.stderr


# ------------------------------------------------------------------------------- iam-policy --task share


def test_share_task_prints_each_regions_key_policy_statements_for_every_consumer(tmp_path: Path) -> None:
    done = amibuild(keyed(tmp_path), "iam-policy", "--task", "share")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["form"] == "policy"
    assert [(k["region"], k["key"]) for k in out["keys"]] == [("us-west-2", WEST2), ("eu-west-1", EU)]
    principals = [f"arn:aws:iam::{a}:root" for a in CONSUMERS]
    for entry in out["keys"]:
        use, grants = entry["key_policy_statements"]
        assert use["Principal"] == {"AWS": principals} and grants["Principal"] == {"AWS": principals}
        assert {"kms:Decrypt", "kms:DescribeKey", "kms:ReEncrypt*"} <= set(use["Action"])
        assert grants["Action"] == "kms:CreateGrant"
        assert "Condition" not in grants  # the consumer grants its Auto Scaling role itself
    assert "note: each consumer account's own principals" in done.stderr
    assert "AWSServiceRoleForAutoScaling --operations Decrypt" in done.stderr


def test_share_task_in_another_partition_names_it_in_every_principal_and_the_auto_scaling_grant(tmp_path: Path) -> None:
    done = amibuild(keyed(tmp_path), "iam-policy", "--task", "share", "--partition", "aws-cn")
    assert done.returncode == 0, done.stderr
    principals = [f"arn:aws-cn:iam::{a}:root" for a in CONSUMERS]
    for entry in json.loads(done.stdout)["keys"]:
        assert all(s["Principal"] == {"AWS": principals} for s in entry["key_policy_statements"])
    assert "--grantee-principal arn:aws-cn:iam::CONSUMER_ACCOUNT:role/aws-service-role/" in done.stderr
    assert "arn:aws:iam" not in done.stdout + done.stderr


def test_share_task_grants_form_prints_one_create_grant_per_key_and_account(tmp_path: Path) -> None:
    done = amibuild(keyed(tmp_path), "iam-policy", "--task", "share", "--form", "grants")
    assert done.returncode == 0, done.stderr
    calls = done.stdout.strip().splitlines()
    found = sorted(re.match(r"aws kms create-grant --region (\S+) --key-id (\S+) --grantee-principal "
                            r"arn:aws:iam::(\d{12}):root --operations .+ --name amibuild-shared-image-\3$", c).groups()
                   for c in calls)
    assert found == sorted((r, k, a) for r, k in (("us-west-2", WEST2), ("eu-west-1", EU)) for a in CONSUMERS)
    assert all("--operations Decrypt DescribeKey GenerateDataKey GenerateDataKeyWithoutPlaintext ReEncryptFrom "
               "ReEncryptTo CreateGrant" in c for c in calls)


def test_share_task_without_ami_users_is_a_usage_error(tmp_path: Path) -> None:
    done = amibuild(keyed(tmp_path, users=()), "iam-policy", "--task", "share")
    assert done.returncode == 2 and done.stdout == ""
    assert last_line(done) == ("amibuild: error: iam-policy --task share: the pipeline shares no image "
                               "(pipeline.ami_users is empty); list the consumer accounts in pipeline.ami_users")


def test_share_task_of_unencrypted_images_says_no_key_needs_rights(tmp_path: Path) -> None:
    work = pipeline(tmp_path, "", users=CONSUMERS)
    (work / "amibuild.hcl").write_text((work / "amibuild.hcl").read_text().replace("encrypted          = true", ""))
    done = amibuild(work, "iam-policy", "--task", "share")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"form": "policy", "keys": []}
    assert "note: no variant is encrypted with a KMS key: the shared images need no key rights" in done.stderr


@pytest.mark.parametrize("args, message", [
    (("--task", "share", "--form", "xml"), "--form 'xml': one of policy, grants"),
    (("--task", "build", "--form", "grants"), "--form 'grants': only with --task share"),
    (("--task", "shares"), "--task 'shares': one of build, publish"),
    (("--task", "share", "--partition", "azure"), "--partition 'azure': aws, aws-cn or aws-us-gov"),
])
def test_share_task_flags_that_do_not_fit_exit_2(tmp_path: Path, args, message) -> None:
    done = amibuild(keyed(tmp_path), "iam-policy", *args)
    assert done.returncode == 2 and done.stdout == ""
    assert message in last_line(done), last_line(done)


def test_the_build_policy_allows_every_regions_key(tmp_path: Path) -> None:
    done = amibuild(keyed(tmp_path), "iam-policy", "--task", "build")
    assert done.returncode == 0, done.stderr
    (kms,) = [s for s in json.loads(done.stdout)["Statement"] if s["Sid"] == "KmsForEncryptedImages"]
    assert sorted(kms["Resource"]) == sorted([WEST2, EU])  # Packer's copy to eu-west-1 uses that region's key


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_the_upstream_base_gets_each_copys_key_and_passes_packer_validate(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent / "data" / "upstream" / "root-layout"
    work = pipeline(tmp_path, f'  base = "upstream"\n  upstream = "{root}"\n  kms_key_id = "{WEST2}"\n'
                              f'  region_kms_key_ids = {{ "eu-west-1" = "{EU}" }}\n'
                              '  vars = { kubernetes_build_date = "2024-01-04", containerd_version = "1.7.11" }',
                    users=CONSUMERS)
    text = (work / "amibuild.hcl").read_text().replace('os                 = "al2023"', 'os = "al2"')
    (work / "amibuild.hcl").write_text(text.replace('"1.33"', '"1.30.4"'))
    done = amibuild(work, "validate")
    assert done.returncode == 0, done.stderr
    rendered = (work / "build" / "ceph" / "amibuild.pkr.hcl").read_text()
    assert f'kms_key_id                  = "{WEST2}"' in rendered  # upstream's one key: the build region's
    assert re.search(r'region_kms_key_ids = \{\s+eu-west-1 = "' + re.escape(EU) + r'"\s+\}', rendered)
