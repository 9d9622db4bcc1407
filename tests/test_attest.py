"""Signed statements (amibuild.attest) and the emulator's KMS: the canonical record, the DSSE PAE, the
Statement, verification over facts, and sign → store → fetch → verify against the emulator."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_der_public_key

from amibuild.attest import check, dsse, predicates, image_record as record, sign, statement, store
from amibuild.attest.statement import PROVENANCE, TEST, ImageFacts
from amibuild.attest.verify import Problem, verify
from amibuild.aws import Aws
from amibuild.errors import SpecError
from amibuild.pipeline import load

ACCOUNT = "123456789012"
BUCKET = f"amibuild-attestations-{ACCOUNT}"


# ------------------------------------------------------------------------------- pure


def test_the_canonical_record_is_sorted_compact_utf8_json():
    assert record.canonical_json(record.image_record("ami-0abc", "eu-west-1", ["snap-b", "snap-a", "snap-b"])) == \
        b'{"id":"ami-0abc","region":"eu-west-1","snapshots":["snap-a","snap-b"]}'
    assert record.canonical_json({"b": "é", "a": 1}) == '{"a":1,"b":"é"}'.encode("utf-8")
    digest = record.record_digest("ami-0abc", "eu-west-1", ["snap-b", "snap-a"])
    assert digest == hashlib.sha256(b'{"id":"ami-0abc","region":"eu-west-1","snapshots":["snap-a","snap-b"]}').hexdigest()
    # another snapshot, region or id: another digest
    assert len({digest, record.record_digest("ami-0abc", "eu-west-1", ["snap-a"]),
                record.record_digest("ami-0abc", "us-east-1", ["snap-b", "snap-a"]),
                record.record_digest("ami-0abd", "eu-west-1", ["snap-b", "snap-a"])}) == 4


def test_image_arns_name_the_partition_region_and_account():
    assert record.image_arn("eu-west-1", ACCOUNT, "ami-1") == f"arn:aws:ec2:eu-west-1:{ACCOUNT}:image/ami-1"
    assert record.image_arn("cn-north-1", ACCOUNT, "ami-1").startswith("arn:aws-cn:ec2:cn-north-1:")
    assert record.image_arn("us-gov-west-1", ACCOUNT, "ami-1").startswith("arn:aws-us-gov:")
    # every partition botocore knows, the newer ones too (European Sovereign Cloud, ISO-E, ISO-F)
    assert record.image_arn("eusc-de-east-1", ACCOUNT, "ami-1").startswith("arn:aws-eusc:ec2:eusc-de-east-1:")
    assert record.image_arn("us-isof-south-1", ACCOUNT, "ami-1").startswith("arn:aws-iso-f:")


def test_pae_is_the_dsse_v1_encoding():
    # the DSSE specification's own example
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == \
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    assert dsse.pae_digest("t", "é".encode()) == hashlib.sha256("DSSEv1 1 t 2 é".encode()).digest()


def test_a_statement_names_each_region_s_image_arn_with_its_record_digest():
    images = [ImageFacts("ami-2", "us-east-1", ("snap-2",)), ImageFacts("ami-1", "eu-west-1", ("snap-1",))]
    payload = statement.statement(images, ACCOUNT, PROVENANCE, {"buildDefinition": {"n": 1}})
    parsed = json.loads(payload)
    assert payload == record.canonical_json(parsed)
    assert parsed["_type"] == "https://in-toto.io/Statement/v1"
    assert parsed["predicateType"] == "https://slsa.dev/provenance/v1"
    assert parsed["predicate"] == {"buildDefinition": {"n": 1}}  # an int stays an int
    assert parsed["subject"] == [
        {"name": f"arn:aws:ec2:eu-west-1:{ACCOUNT}:image/ami-1",
         "digest": {"sha256": record.record_digest("ami-1", "eu-west-1", ["snap-1"])}},
        {"name": f"arn:aws:ec2:us-east-1:{ACCOUNT}:image/ami-2",
         "digest": {"sha256": record.record_digest("ami-2", "us-east-1", ["snap-2"])}},
    ]
    assert statement.parse_statement(payload) == parsed
    with pytest.raises(ValueError):
        statement.statement(images, ACCOUNT, PROVENANCE, {})  # in-toto: a predicate is required


def _signed(payload: bytes) -> tuple[dsse.Envelope, bytes, str]:
    private = ec.generate_private_key(ec.SECP256R1())
    from cryptography.hazmat.primitives import serialization

    der = private.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    arn = f"arn:aws:kms:us-west-2:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    sig = private.sign(dsse.pae(dsse.PAYLOAD_TYPE, payload), ec.ECDSA(hashes.SHA256()))
    return dsse.Envelope(payload, dsse.PAYLOAD_TYPE, (dsse.Signature(arn, sig),)), der, arn


def test_verification_names_each_failure():
    image = ImageFacts("ami-1", "us-west-2", ("snap-1",))
    envelope, der, arn = _signed(statement.statement([image], ACCOUNT, TEST, {"result": "PASSED"}))
    good = verify(envelope.to_json(), pipeline_key=arn, public_keys={arn: der}, images=[image], account=ACCOUNT,
                  predicate_type=TEST)
    assert good.ok and good.keyid == arn and good.predicate == {"result": "PASSED"}

    def problems(env=envelope, key=arn, images=(image,), kind=TEST):
        return verify(env, pipeline_key=key, public_keys={arn: der}, images=list(images), account=ACCOUNT,
                      predicate_type=kind).problems

    assert problems(key="arn:aws:kms:us-west-2:123456789012:key/other") == {Problem.WRONG_KEY}
    assert problems(kind=PROVENANCE) == {Problem.WRONG_TYPE}
    assert problems(images=[ImageFacts("ami-1", "us-west-2", ("snap-1", "snap-new"))]) == {Problem.DIGEST_MISMATCH}
    assert problems(images=[ImageFacts("ami-9", "us-west-2")]) == {Problem.NOT_A_SUBJECT}
    altered = dsse.Envelope(envelope.payload.replace(b"PASSED", b"FAILED"), envelope.payload_type, envelope.signatures)
    assert problems(env=altered) == {Problem.BAD_SIGNATURE}
    assert problems(env=dsse.Envelope(envelope.payload)) == {Problem.UNSIGNED}
    assert problems(env=b"not json") == {Problem.MALFORMED}
    unsigned = verify(dsse.Envelope(envelope.payload), pipeline_key=arn, public_keys={}, images=[image],
                      account=ACCOUNT, predicate_type=TEST)
    assert "unsigned" in unsigned.reason()


# ------------------------------------------------------------------------------- the pipeline block


def _pipeline(tmp_path: Path, block: str = "") -> Path:
    path = tmp_path / "amibuild.hcl"
    path.write_text(f'pipeline {{\n  name = "att"\n  regions = ["us-east-1", "eu-west-1"]\n{block}\n}}\n'
                    'variant "base" {}\n')
    return path


def test_the_attestation_block_has_defaults_and_takes_its_fields(tmp_path: Path):
    assert load(_pipeline(tmp_path)).attestation == sign_defaults()
    got = load(_pipeline(tmp_path, 'attestation {\n kms_key = "alias/team/signer"\n bucket = "my.statements-1"\n'
                                   ' region = "eu-west-1"\n}')).attestation
    assert (got.kms_key, got.bucket, got.region) == ("alias/team/signer", "my.statements-1", "eu-west-1")
    assert load(_pipeline(tmp_path, 'attestation {\n kms_key = ""\n}')).attestation.kms_key == ""


def sign_defaults():
    from amibuild.pipeline.attestation import AttestationSettings

    return AttestationSettings("alias/amibuild", "", "")


@pytest.mark.parametrize("block, complaint", [
    ('attestation {\n kms_keys = "alias/x"\n}', "unknown field `kms_keys`"),
    ('attestation {\n kms_key = "amibuild"\n}', "pipeline.attestation.kms_key 'amibuild'"),
    ('attestation {\n kms_key = "alias/aws/ebs"\n}', "AWS managed key cannot sign"),
    ('attestation {\n kms_key = "arn:aws:kms:us-west-2:111122223333:alias/aws/ebs"\n}', "AWS managed key cannot sign"),
    ('attestation {\n bucket = "My_Bucket"\n}', "pipeline.attestation.bucket 'My_Bucket'"),
    ('attestation {\n region = "us-wset-2"\n}', "unknown region 'us-wset-2'"),
    ('attestation {\n region = 3\n}', "pipeline.attestation.region: a string"),
])
def test_a_bad_attestation_block_is_refused_at_load(tmp_path: Path, block: str, complaint: str):
    with pytest.raises(SpecError) as caught:
        load(_pipeline(tmp_path, block))
    assert complaint in str(caught.value) and "\n" not in str(caught.value)


def test_a_bad_attestation_block_exits_2_before_any_aws_call(tmp_path: Path, cli):
    _pipeline(tmp_path, 'attestation {\n bucket = "Bad"\n}')
    result = cli(tmp_path, "build-ami", "--dry-run")
    assert result.returncode == 2, result.stderr
    assert "pipeline.attestation.bucket 'Bad'" in result.stderr


# ------------------------------------------------------------------------------- the emulator's KMS


def _kms(region: str = "us-west-2"):
    return boto3.client("kms", region_name=region)


def test_the_sandbox_seeds_the_signing_key_and_the_bucket_and_a_reset_keeps_them(sandbox):
    for region in ("us-west-2", "eu-west-1"):
        meta = _kms(region).describe_key(KeyId="alias/amibuild")["KeyMetadata"]
        assert (meta["KeySpec"], meta["KeyUsage"], meta["KeyState"]) == ("ECC_NIST_P256", "SIGN_VERIFY", "Enabled")
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.head_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="amibuild/x/y", Body=b"1")  # a write to S3: a full reset
    sandbox.reset()
    assert _kms("eu-west-1").describe_key(KeyId="alias/amibuild")["KeyMetadata"]["KeyState"] == "Enabled"
    s3.head_bucket(Bucket=BUCKET)
    assert s3.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0
    before = {r: _kms(r).describe_key(KeyId="alias/amibuild")["KeyMetadata"]["Arn"] for r in ("eu-west-1", "us-west-2")}
    _kms("us-west-2").sign(KeyId="alias/amibuild", Message=b"x", SigningAlgorithm="ECDSA_SHA_256")  # a read
    boto3.client("ssm", region_name="eu-west-1").put_parameter(Name="/att/x", Value="1", Type="String")
    sandbox.reset()  # only eu-west-1 was written to: its key is dropped and seeded again, the bucket stays
    after = {r: _kms(r).describe_key(KeyId="alias/amibuild")["KeyMetadata"] for r in ("eu-west-1", "us-west-2")}
    assert after["eu-west-1"]["Arn"] != before["eu-west-1"] and after["eu-west-1"]["KeyState"] == "Enabled"
    assert after["us-west-2"]["Arn"] == before["us-west-2"]
    s3.head_bucket(Bucket=BUCKET)


def test_two_first_uses_of_a_kms_key_at_once_make_one_key_pair():
    """The emulator makes a KMS key's key pair on its first use. Builds sign in parallel, so two first
    uses can come at once: they must get one pair, or a signature made with a replaced pair fails to
    verify (seen as `amibuild demo`'s verify failing). The second use is held until it waits inside
    the first's making, then both finish."""
    import inspect
    import sys
    import threading
    import time
    from types import SimpleNamespace

    from amibuild.sandbox.kms_signing import _KeyPairOnFirstUse

    entered, release, made, got = threading.Event(), threading.Event(), [], {}

    def generate(spec: str) -> SimpleNamespace:
        made.append(spec)
        entered.set()
        assert release.wait(60)
        return SimpleNamespace(name=f"pair {len(made)}")

    pair = _KeyPairOnFirstUse(generate, "ECC_NIST_P256")
    source, first_line = inspect.getsourcelines(_KeyPairOnFirstUse.__getattr__)
    lock_lines = {first_line + n for n, text in enumerate(source) if "with self._lock" in text}

    def waiting(thread: threading.Thread) -> bool:  # making a pair itself, or blocked on the pair's lock
        frame = sys._current_frames().get(thread.ident)
        if frame is not None and frame.f_code.co_name == "__getattr__" and frame.f_lineno in lock_lines:
            return True
        while frame is not None and frame.f_code.co_name != "generate":
            frame = frame.f_back
        return frame is not None

    threads = {who: threading.Thread(target=lambda who=who: got.__setitem__(who, pair.name)) for who in ("a", "b")}
    threads["a"].start()
    assert entered.wait(60)  # the first use is making the pair
    threads["b"].start()
    deadline = time.monotonic() + 60
    while not waiting(threads["b"]):  # until the second use waits where the question is decided
        assert threads["b"].is_alive() and time.monotonic() < deadline
        time.sleep(0.001)
    release.set()
    for thread in threads.values():
        thread.join(60)
    assert made == ["ECC_NIST_P256"] and got == {"a": "pair 1", "b": "pair 1"}


def test_the_emulator_refuses_raw_messages_over_4096_bytes(sandbox):
    kms = _kms()
    kms.sign(KeyId="alias/amibuild", Message=b"x" * 4096, MessageType="RAW", SigningAlgorithm="ECDSA_SHA_256")
    with pytest.raises(ClientError) as caught:
        kms.sign(KeyId="alias/amibuild", Message=b"x" * 4097, MessageType="RAW", SigningAlgorithm="ECDSA_SHA_256")
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert "less than or equal to 4096" in caught.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as caught:  # the default MessageType is RAW
        kms.sign(KeyId="alias/amibuild", Message=b"x" * 5000, SigningAlgorithm="ECDSA_SHA_256")
    assert caught.value.response["Error"]["Code"] == "ValidationException"


def test_the_emulator_signs_a_digest_as_given_and_refuses_one_of_the_wrong_length(sandbox):
    kms = _kms()
    message = b"a statement bigger than RAW allows " * 300
    digest = hashlib.sha256(message).digest()
    answer = kms.sign(KeyId="alias/amibuild", Message=digest, MessageType="DIGEST", SigningAlgorithm="ECDSA_SHA_256")
    der = kms.get_public_key(KeyId="alias/amibuild")["PublicKey"]
    public = load_der_public_key(der)
    # offline: the signature is over the message whose SHA-256 was sent (moto hashed the digest again)
    public.verify(answer["Signature"], message, ec.ECDSA(hashes.SHA256()))
    with pytest.raises(InvalidSignature):
        public.verify(answer["Signature"], digest, ec.ECDSA(hashes.SHA256()))
    # KMS's own Verify agrees, and refuses a signature of anything else
    assert kms.verify(KeyId="alias/amibuild", Message=digest, MessageType="DIGEST", Signature=answer["Signature"],
                      SigningAlgorithm="ECDSA_SHA_256")["SignatureValid"] is True
    with pytest.raises(ClientError) as caught:
        kms.verify(KeyId="alias/amibuild", Message=hashlib.sha256(b"other").digest(), MessageType="DIGEST",
                   Signature=answer["Signature"], SigningAlgorithm="ECDSA_SHA_256")
    assert caught.value.response["Error"]["Code"] == "KMSInvalidSignatureException"
    for wrong in (digest[:20], digest + b"\0"):
        with pytest.raises(ClientError) as caught:
            kms.sign(KeyId="alias/amibuild", Message=wrong, MessageType="DIGEST", SigningAlgorithm="ECDSA_SHA_256")
        assert caught.value.response["Error"]["Message"] == "Digest is invalid length for algorithm ECDSA_SHA_256."


def test_a_raw_signature_covers_the_bytes_sent(sandbox):
    kms = _kms()
    answer = kms.sign(KeyId="alias/amibuild", Message=b"hello", MessageType="RAW", SigningAlgorithm="ECDSA_SHA_256")
    public = load_der_public_key(kms.get_public_key(KeyId="alias/amibuild")["PublicKey"])
    public.verify(answer["Signature"], b"hello", ec.ECDSA(hashes.SHA256()))


# ------------------------------------------------------------------------------- sign, store, fetch, verify


def _image(region: str) -> ImageFacts:
    """An image in the emulator (its snapshot ids as DescribeImages shows them)."""
    ec2 = boto3.client("ec2", region_name=region)
    instance = ec2.run_instances(ImageId=_any_ami(ec2), MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    image_id = ec2.create_image(InstanceId=instance, Name=f"attest-{region}")["ImageId"]
    raw = ec2.describe_images(ImageIds=[image_id])["Images"][0]
    return ImageFacts(image_id, region, tuple(m["Ebs"]["SnapshotId"] for m in raw["BlockDeviceMappings"]
                                              if m.get("Ebs", {}).get("SnapshotId")))


def _any_ami(ec2) -> str:
    return ec2.describe_images(Owners=["602401143452"], MaxResults=5)["Images"][0]["ImageId"]


def _where(kms_key: str = "alias/amibuild") -> sign.Where:
    return sign.Where("att", ACCOUNT, kms_key, BUCKET, "us-west-2")


def test_a_statement_is_signed_stored_under_each_image_fetched_and_verified(sandbox):
    aws = Aws(region="us-west-2")
    images = [_image("us-west-2"), _image("eu-west-1")]
    where = _where()
    who = sign.signer(aws, where)
    assert who.usable and who.key_arn.startswith("arn:aws:kms:us-west-2:")
    predicate = predicates.test({"result": "passed", "run_id": "r1", "checks": [
        {"name": "kubelet", "stage": "boot", "result": "passed", "exit_status": 0, "seconds": 0.5}]}, finished="now")
    done = sign.attest(aws, where, who, images, TEST, predicate, "r1")
    assert done.signed and not done.error and done.keyid == who.key_arn
    assert done.keys == tuple(store.statement_key("att", i.image_id, "test", "r1") for i in images)
    # one listing per image, from any region's AMI id
    for image in images:
        found = store.fetch(aws, BUCKET, "us-west-2", "att", image.image_id)
        assert [k for k, _ in found] == [store.statement_key("att", image.image_id, "test", "r1")]
    results = check.verify_image(aws, where, list(reversed(images)), TEST)
    assert [r.ok for r in results] == [True], [r.reason() for r in results]
    assert results[0].predicate["passedTests"] == ["kubelet"]
    # offline, with GetPublicKey's key: the envelope's signature over the PAE
    envelope = dsse.parse_envelope(found[0][1])
    public = load_der_public_key(aws.public_key(who.key_arn, "us-west-2").der)
    public.verify(envelope.signatures[0].sig, dsse.pae(envelope.payload_type, envelope.payload), ec.ECDSA(hashes.SHA256()))
    assert check.verify_image(aws, where, images, PROVENANCE) == []  # no provenance statement was made


def test_a_statement_bigger_than_raw_allows_is_signed(sandbox):
    aws = Aws(region="us-west-2")
    images = [ImageFacts(f"ami-{i:017x}", region, (f"snap-{i:017x}",)) for i, region in enumerate(
        ["us-east-1", "us-east-2", "us-west-1", "us-west-2", "af-south-1", "ap-east-1", "ap-south-1", "ap-northeast-1",
         "ap-northeast-2", "ap-northeast-3", "ap-southeast-1", "ap-southeast-2", "ca-central-1", "eu-central-1",
         "eu-west-1", "eu-west-2", "eu-west-3"])]
    predicate = {"buildDefinition": {"x": "y" * 2000}}
    assert len(statement.statement(images, ACCOUNT, PROVENANCE, predicate)) > 4096
    done = sign.attest(aws, _where(), sign.signer(aws, _where()), images, PROVENANCE, predicate, "big")
    assert done.signed and len(done.keys) == 17, done.error


def test_a_statement_altered_in_s3_fails_verification(sandbox):
    aws = Aws(region="us-west-2")
    image = _image("us-west-2")
    where = _where()
    done = sign.attest(aws, where, sign.signer(aws, where), [image], TEST, {"result": "FAILED", "verdict": "failed"}, "r2")
    raw = json.loads(aws.get_object(BUCKET, done.keys[0], "us-west-2"))
    payload = json.loads(base64.b64decode(raw["payload"]))
    payload["predicate"]["result"], payload["predicate"]["verdict"] = "PASSED", "passed"
    raw["payload"] = base64.b64encode(record.canonical_json(payload)).decode()
    aws.put_object(BUCKET, done.keys[0], json.dumps(raw).encode(), "us-west-2")
    results = check.verify_image(aws, where, [image], TEST)
    assert [r.problems for r in results] == [{Problem.BAD_SIGNATURE}]
    assert "altered" in results[0].reason()


def test_an_image_changed_since_its_statement_fails_verification(sandbox):
    aws = Aws(region="us-west-2")
    image = _image("us-west-2")
    where = _where()
    sign.attest(aws, where, sign.signer(aws, where), [image], TEST, {"result": "PASSED"}, "r3")
    changed = ImageFacts(image.image_id, image.region, (*image.snapshot_ids, "snap-0123456789abcdef0"))
    assert [r.problems for r in check.verify_image(aws, where, [changed], TEST)] == [{Problem.DIGEST_MISMATCH}]


def test_without_a_usable_key_statements_are_stored_unsigned_and_verify_as_unsigned(sandbox):
    aws = Aws(region="us-west-2")
    image = _image("us-west-2")
    where = _where("alias/nobody-made-this")
    who = sign.signer(aws, where)
    assert not who.usable and "alias/nobody-made-this" in who.unsigned_reason
    done = sign.attest(aws, where, who, [image], TEST, {"result": "PASSED"}, "r4")
    assert not done.signed and done.keys and not done.error and done.unsigned_reason == who.unsigned_reason
    results = check.verify_image(aws, where, [image], TEST)
    assert [r.problems for r in results] == [{Problem.UNSIGNED}]
    # a symmetric key cannot sign either: said, not raised
    key = _kms().create_key(KeySpec="SYMMETRIC_DEFAULT", KeyUsage="ENCRYPT_DECRYPT")["KeyMetadata"]["Arn"]
    assert "ECC_NIST_P256 SIGN_VERIFY" in sign.signer(aws, _where(key)).unsigned_reason


def test_iam_policy_lets_build_and_test_sign_with_the_key_and_write_only_the_pipeline_s_prefix(tmp_path: Path):
    from amibuild.lifecycle import iam

    for task in ("build", "test"):
        statements = {s["Sid"]: s for s in iam.policy(task, load(_pipeline(tmp_path)), account=ACCOUNT)["Statement"]}
        assert statements["AttestationStore"]["Action"] == ["s3:PutObject"]
        assert statements["AttestationStore"]["Resource"] == [f"arn:aws:s3:::{BUCKET}/amibuild/att/*"]
        assert statements["AttestationSign"]["Action"] == ["kms:DescribeKey", "kms:Sign"]
        assert statements["AttestationSign"]["Condition"] == {
            "ForAnyValue:StringEquals": {"kms:ResourceAliases": ["alias/amibuild"]}}
    key = f"arn:aws:kms:eu-west-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    named = load(_pipeline(tmp_path, f'attestation {{\n kms_key = "{key}"\n bucket = "ours"\n}}'))
    statements = {s["Sid"]: s for s in iam.policy("build", named, account=ACCOUNT)["Statement"]}
    assert statements["AttestationSign"]["Resource"] == [key] and "Condition" not in statements["AttestationSign"]
    assert statements["AttestationStore"]["Resource"] == ["arn:aws:s3:::ours/amibuild/att/*"]
    unsigned = load(_pipeline(tmp_path, 'attestation {\n kms_key = ""\n}'))
    assert "AttestationSign" not in {s["Sid"] for s in iam.policy("build", unsigned, account=ACCOUNT)["Statement"]}


def test_a_key_disabled_after_the_run_started_leaves_its_statements_unsigned_not_lost(sandbox):
    aws = Aws(region="us-west-2")
    image = _image("us-west-2")
    where = _where()
    who = sign.signer(aws, where)
    assert who.usable
    _kms().disable_key(KeyId=who.key_arn.rsplit("/", 1)[-1])  # moto takes only the id here
    with pytest.raises(ClientError) as caught:  # as KMS answers
        _kms().sign(KeyId=who.key_arn, Message=b"x", SigningAlgorithm="ECDSA_SHA_256")
    assert caught.value.response["Error"]["Code"] == "DisabledException"
    done = sign.attest(aws, where, who, [image], TEST, {"result": "PASSED"}, "r5")
    assert not done.signed and done.keys and not done.error
    assert done.unsigned_reason.startswith("kms:Sign refused:") and "DisabledException" in done.unsigned_reason
    assert "UNSIGNED" in done.line()
    assert "is Disabled, not Enabled" in sign.signer(aws, where).unsigned_reason
    assert [r.problems for r in check.verify_image(aws, where, [image], TEST)] == [{Problem.UNSIGNED}]


def test_a_disabled_key_gives_no_public_key_so_nothing_it_signed_verifies(sandbox):
    """As KMS: GetPublicKey of a disabled key is DisabledException (the emulator gave the key before),
    and GetPublicKey answers the key's ARN as KeyId."""
    aws, image, where = Aws(region="us-west-2"), _image("us-west-2"), _where()
    who = sign.signer(aws, where)
    assert _kms().get_public_key(KeyId="alias/amibuild")["KeyId"] == who.key_arn
    assert sign.attest(aws, where, who, [image], TEST, {"result": "PASSED"}, "r7").signed
    _kms().disable_key(KeyId=who.key_arn.rsplit("/", 1)[-1])
    with pytest.raises(ClientError) as caught:
        _kms().get_public_key(KeyId=who.key_arn)
    assert caught.value.response["Error"]["Code"] == "DisabledException"
    assert [r.problems for r in check.verify_image(aws, where, [image], TEST)] == [{Problem.WRONG_KEY}]


def test_a_missing_bucket_is_said_and_nothing_is_signed_in_vain(sandbox):
    aws = Aws(region="us-west-2")
    where = sign.Where("att", ACCOUNT, "alias/amibuild", "no-such-statements-bucket", "us-west-2")
    done = sign.attest(aws, where, sign.signer(aws, where), [_image("us-west-2")], TEST, {"result": "PASSED"}, "r6")
    assert done.error.startswith("not stored:") and "no-such-statements-bucket" in done.error and not done.keys
    assert done.line().startswith("test statement NOT stored:")


def test_predicates_read_back_what_they_wrote():
    made = predicates.provenance(amibuild_version="0.1.0", pipeline="p", pipeline_file="amibuild.hcl",
                                 pipeline_digest="ab" * 32, git_commit="c0ffee", variant="v", fingerprint="fp1",
                                 inputs={"name": "v"}, source_amis={"us-west-2": "ami-1"}, account=ACCOUNT,
                                 packer_version="1.6.6", run_id="r", regions=["us-west-2"], started="s", finished="f")
    assert (predicates.fingerprint_of(made), predicates.pipeline_of(made)) == ("fp1", "p")
    assert (predicates.variant_of(made), predicates.run_of(made), predicates.amibuild_version_of(made)) == \
        ("v", "r", "0.1.0")
    assert predicates.source_amis_of(made) == {"us-west-2": "ami-1"}
    assert predicates.internal(made)["fingerprintInputs"] == {"name": "v"}
    assert predicates.package_list_digest_of(made) == ""
    listed = predicates.provenance(amibuild_version="0.1.0", pipeline="p", pipeline_file=None, pipeline_digest=None,
                                   git_commit=None, variant="v", fingerprint="fp1", inputs={}, source_amis={},
                                   account=ACCOUNT, packer_version="1.6.6", run_id="r", regions=[], started="",
                                   finished="", package_list_digest="d" * 64)
    assert predicates.package_list_digest_of(listed) == "d" * 64
    assert {"name": "pipeline-repository", "digest": {"gitCommit": "c0ffee"}} in \
        made["buildDefinition"]["resolvedDependencies"]
    assert made["runDetails"]["byproducts"] == []  # the package list's digest, once a build records one
    tested = predicates.test({"result": "failed", "checks": [
        {"name": "a", "stage": "boot", "result": "passed", "exit_status": 0, "seconds": 1},
        {"name": "b", "stage": "boot", "result": "failed", "exit_status": 3, "seconds": 1},
        {"name": "c", "stage": "boot", "result": "not testable here", "exit_status": 127, "seconds": 1}]}, finished="f")
    assert predicates.verdict_of(tested) == "failed" and tested["result"] == "FAILED"
    assert (tested["passedTests"], tested["failedTests"], tested["warnedTests"]) == (["a"], ["b"], ["c"])
    assert tested["checks"][1]["exitStatus"] == 3
    assert predicates.fingerprint_of({}) == predicates.pipeline_of({}) == predicates.verdict_of({}) == ""
    assert predicates.variant_of({}) == predicates.run_of({}) == predicates.package_list_digest_of({}) == ""
    assert predicates.source_amis_of({}) == {}
