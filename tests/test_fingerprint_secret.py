"""No guessable derivative of a secret in public places (issue 29).

The fingerprint is an AMI tag anyone in the account reads, and the pipeline file sits in a
repository. The proxy password reaches the fingerprint only as a MAC by the pipeline's KMS HMAC
key (the sandbox seeds alias/amibuild-fingerprint): without the key, nothing amibuild computes
from the pipeline file and a guessed password, even the right one, reproduces the tag.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import shutil
from pathlib import Path

import boto3
import pytest

from amibuild import render, secrets
from amibuild.bake import credential_macs
from amibuild.errors import AwsError, NotFound, SpecError
from amibuild.lifecycle import iam
from amibuild.pipeline import load
from amibuild.sandbox.kms_hmac import FINGERPRINT_ALIAS
from amibuild.cli.target import platform
from conftest import run_cli

REGION = "us-west-2"
PASSWORD = "S3cretPass"
PIPELINE = """\
pipeline {
  name    = "fpsec"
  regions = ["us-west-2"]
}

variant "v" {
  extra_packages = ["htop"]
  proxy {
    http  = "http://user:PASSWORD@proxy.local:3128"
    https = "http://user:PASSWORD@proxy.local:3128"
  }
}
"""


def pipeline_with(tmp_path: Path, password: str) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.replace("PASSWORD", password))
    return tmp_path


def rendered_fingerprint(tmp_path: Path, password: str, env: dict | None = None) -> tuple[str, str]:
    result = run_cli(pipeline_with(tmp_path, password), "render", "--json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["variants"][0]["fingerprint"], result.stderr


@pytest.mark.skipif(shutil.which("packer") is None, reason="the build runs the real packer")
def test_a_guessed_password_does_not_reproduce_the_fingerprint_tag_without_the_key(sandbox, tmp_path: Path) -> None:
    built = run_cli(pipeline_with(tmp_path, PASSWORD), "build-ami", "--json")
    assert built.returncode == 0, built.stderr
    ami = json.loads(built.stdout)["variants"][0]["amis"][REGION]
    ec2 = boto3.client("ec2", region_name=REGION)
    (image,) = ec2.describe_images(ImageIds=[ami])["Images"]
    tag = {t["Key"]: t["Value"] for t in image["Tags"]}["amibuild:fingerprint"]

    # with the key (what the build had), the render gives the tag: the MAC path is the one used
    with_key, said = rendered_fingerprint(tmp_path, PASSWORD)
    assert with_key == tag and "not in the fingerprint" not in said

    # whoever reads the tags and the pipeline repository may still use AWS, but not the key
    kms = boto3.client("kms", region_name=REGION)
    kms.disable_key(KeyId=kms.describe_key(KeyId=FINGERPRINT_ALIAS)["KeyMetadata"]["KeyId"])
    right, said = rendered_fingerprint(tmp_path, PASSWORD)
    assert right != tag
    assert "URL credentials are not in the fingerprint" in said and "DisabledException" in said
    wrong, _ = rendered_fingerprint(tmp_path, "guess123")
    assert wrong == right  # the password does not enter at all: no guess can be told from another
    offline, _ = rendered_fingerprint(tmp_path, PASSWORD, env={"AWS_ACCESS_KEY_ID": None,
                                                               "AWS_SECRET_ACCESS_KEY": None})
    assert offline != tag

    # nor does any function of the password amibuild has, over the very files and values rendered
    pipeline = load(tmp_path / "amibuild.hcl")
    sources = json.loads(run_cli(tmp_path, "render", "--json").stdout)["variants"][0]["source_amis"]
    chosen = platform(dict(os.environ))  # the sandbox's, as the CLI chose it
    target, transform = chosen.target, chosen.transform
    build = transform(render.render_build(pipeline, pipeline.variants[0], uses_plugins=False, target=target,
                                          sources={r: render.SourceAmi("resolved", a) for r, a in sources.items()}))
    done = render.finish(build)
    assert done.fingerprint == right  # the same build the CLI rendered
    hidden = tuple(done.secret_env)
    for digest in (lambda name, value: base64.b64encode(secrets.mac_message(name, value)).decode(),
                   lambda name, value: base64.b64encode(hmac.new(b"", secrets.mac_message(name, value),
                                                                 hashlib.sha256).digest()).decode()):
        guesses = {name: digest(name, value) for name, value in done.secret_env.items()}
        assert render.fingerprint(done.files, done.values, guesses, hidden=hidden) != tag
    assert not hasattr(secrets, "keyed_digest")  # the scrypt hash keyed by a string in the source is gone


class FakeMacs:
    """A gateway stand-in answering GenerateMac with an HMAC over a key of its own, counting calls."""

    def __init__(self, *, missing: bool = False, failing: bool = False) -> None:
        self.calls: list[tuple[str, bytes, str]] = []
        self.missing, self.failing = missing, failing

    def generate_mac(self, key: str, message: bytes, region: str):
        self.calls.append((key, message, region))
        if self.missing:
            raise NotFound(f"kms:GenerateMac {key} in {region}: Alias {key} is not found.")
        if self.failing:
            raise AwsError(f"kms:GenerateMac {key} in {region}: DisabledException: the key is disabled")

        class Answer:
            mac = hmac.new(b"k" * 32, message, hashlib.sha256).digest()
        return Answer()


def builds(tmp_path: Path, password: str = PASSWORD, key_line: str = ""):
    text = PIPELINE.replace("PASSWORD", password)
    if key_line:
        text = text.replace('  regions = ["us-west-2"]\n', f'  regions = ["us-west-2"]\n  {key_line}\n')
    (tmp_path / "amibuild.hcl").write_text(text)
    pipeline = load(tmp_path / "amibuild.hcl")
    return pipeline, [render.render_build(pipeline, v, uses_plugins=False, target=render.Target(),
                                          sources={REGION: render.SourceAmi("resolved", "ami-0123456789abcdef0")})
                      for v in pipeline.variants]


def test_one_mac_per_distinct_credential_value_in_the_home_region(tmp_path: Path) -> None:
    pipeline, made = builds(tmp_path)
    aws = FakeMacs()
    macs = credential_macs.gather(pipeline, made, aws)
    assert [(key, region) for key, _, region in aws.calls] == [("alias/amibuild-fingerprint", REGION)] * 2
    assert set(macs.of(made[0])) == {"PKR_VAR_http_proxy", "PKR_VAR_https_proxy"} and not macs.note
    first = render.finish(made[0], macs.of(made[0])).fingerprint
    _, other = builds(tmp_path, "another1")
    assert render.finish(other[0], credential_macs.gather(pipeline, other, FakeMacs()).of(other[0])).fingerprint != first


def test_a_key_arn_names_its_region(tmp_path: Path) -> None:
    arn = "arn:aws:kms:eu-west-1:123456789012:alias/fp"
    pipeline, made = builds(tmp_path, key_line=f'fingerprint_key = "{arn}"')
    aws = FakeMacs()
    credential_macs.gather(pipeline, made, aws)
    assert {(key, region) for key, _, region in aws.calls} == {(arn, "eu-west-1")}


def test_no_key_no_access_or_none_named_leaves_the_credentials_out_and_says_so(tmp_path: Path) -> None:
    pipeline, made = builds(tmp_path)
    missing = credential_macs.gather(pipeline, made, FakeMacs(missing=True))
    assert missing.of(made[0]) is None
    assert "no KMS key alias/amibuild-fingerprint in us-west-2" in missing.note
    assert "a new password alone makes no new build" in missing.note
    assert "no AWS access" in credential_macs.gather(pipeline, made, None).note
    none_named, built = builds(tmp_path, key_line='fingerprint_key = ""')
    aws = FakeMacs()
    assert 'fingerprint_key is ""' in credential_macs.gather(none_named, built, aws).note and not aws.calls


def test_build_ami_refuses_to_go_on_when_the_key_is_there_but_cannot_be_used(tmp_path: Path) -> None:
    """strict: a fingerprint that silently lost its credentials would rebuild, or reuse a wrong image."""
    pipeline, made = builds(tmp_path)
    with pytest.raises(AwsError, match="DisabledException"):
        credential_macs.gather(pipeline, made, FakeMacs(failing=True), strict=True)
    assert "could not be made" in credential_macs.gather(pipeline, made, FakeMacs(failing=True)).note


def test_without_credentials_no_kms_call_and_the_fingerprint_is_unchanged(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.replace("user:PASSWORD@", ""))
    pipeline = load(tmp_path / "amibuild.hcl")
    build = render.render_build(pipeline, pipeline.variants[0], uses_plugins=False, target=render.Target(),
                                sources={REGION: render.SourceAmi("resolved", "ami-0123456789abcdef0")})
    aws = FakeMacs()
    assert credential_macs.gather(pipeline, [build], aws).of(build) is None and not aws.calls


def test_a_fingerprint_key_of_another_shape_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="pipeline.fingerprint_key 'my key': a KMS key id"):
        builds(tmp_path, key_line='fingerprint_key = "my key"')


def test_the_build_policy_allows_generate_mac_on_the_fingerprint_key_only_when_credentials_are_baked(
        tmp_path: Path) -> None:
    pipeline, _ = builds(tmp_path)
    (statement,) = [s for s in iam.policy("build", pipeline, account="123456789012")["Statement"]
                    if s["Sid"] == "FingerprintMac"]
    assert statement["Action"] == ["kms:GenerateMac"]
    assert statement["Condition"] == {"ForAnyValue:StringEquals": {"kms:ResourceAliases": ["alias/amibuild-fingerprint"]}}
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.replace("user:PASSWORD@", ""))
    plain = iam.policy("build", load(tmp_path / "amibuild.hcl"), account="123456789012")
    assert "FingerprintMac" not in {s["Sid"] for s in plain["Statement"]}
