"""The emulator's KMS GenerateMac / VerifyMac answer as AWS does (amibuild/sandbox/kms_hmac.py)."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from amibuild.aws import Aws
from amibuild.errors import NotFound
from amibuild.sandbox.kms_hmac import FINGERPRINT_ALIAS

REGION = "us-west-2"


def code(call) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response["Error"]["Code"]


def test_the_seeded_fingerprint_key_makes_and_verifies_macs(sandbox) -> None:
    kms = boto3.client("kms", region_name=REGION)
    meta = kms.describe_key(KeyId=FINGERPRINT_ALIAS)["KeyMetadata"]
    assert (meta["KeySpec"], meta["KeyUsage"]) == ("HMAC_256", "GENERATE_VERIFY_MAC")
    made = kms.generate_mac(KeyId=FINGERPRINT_ALIAS, Message=b"m", MacAlgorithm="HMAC_SHA_256")
    assert made["KeyId"] == meta["Arn"] and len(made["Mac"]) == 32
    again = kms.generate_mac(KeyId=meta["KeyId"], Message=b"m", MacAlgorithm="HMAC_SHA_256")["Mac"]
    assert again == made["Mac"]  # one key, one MAC per message, whichever name the key goes by
    assert kms.verify_mac(KeyId=FINGERPRINT_ALIAS, Message=b"m", MacAlgorithm="HMAC_SHA_256",
                          Mac=made["Mac"])["MacValid"] is True
    assert code(lambda: kms.verify_mac(KeyId=FINGERPRINT_ALIAS, Message=b"n", MacAlgorithm="HMAC_SHA_256",
                                       Mac=made["Mac"])) == "KMSInvalidMacException"


def test_aws_errors_for_the_wrong_algorithm_key_size_or_state(sandbox) -> None:
    kms = boto3.client("kms", region_name=REGION)
    assert code(lambda: kms.generate_mac(KeyId=FINGERPRINT_ALIAS, Message=b"m",
                                         MacAlgorithm="HMAC_SHA_512")) == "InvalidKeyUsageException"
    assert code(lambda: kms.generate_mac(KeyId=FINGERPRINT_ALIAS, Message=b"m" * 4097,
                                         MacAlgorithm="HMAC_SHA_256")) == "ValidationException"
    signing = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
    assert code(lambda: kms.generate_mac(KeyId=signing, Message=b"m",
                                         MacAlgorithm="HMAC_SHA_256")) == "InvalidKeyUsageException"
    assert code(lambda: kms.generate_mac(KeyId="alias/none", Message=b"m",
                                         MacAlgorithm="HMAC_SHA_256")) == "NotFoundException"
    key = kms.describe_key(KeyId=FINGERPRINT_ALIAS)["KeyMetadata"]["KeyId"]
    kms.disable_key(KeyId=key)
    assert code(lambda: kms.generate_mac(KeyId=FINGERPRINT_ALIAS, Message=b"m",
                                         MacAlgorithm="HMAC_SHA_256")) == "DisabledException"
    kms.enable_key(KeyId=key)
    kms.schedule_key_deletion(KeyId=key, PendingWindowInDays=7)
    assert code(lambda: kms.generate_mac(KeyId=FINGERPRINT_ALIAS, Message=b"m",
                                         MacAlgorithm="HMAC_SHA_256")) == "KMSInvalidStateException"


def test_the_gateway_maps_a_missing_key_to_not_found(sandbox) -> None:
    aws = Aws()
    assert len(aws.generate_mac(FINGERPRINT_ALIAS, b"m", REGION).mac) == 32
    with pytest.raises(NotFound, match="kms:GenerateMac alias/none in us-west-2"):
        aws.generate_mac("alias/none", b"m", REGION)


def test_the_key_is_there_again_after_a_reset(sandbox) -> None:
    kms = boto3.client("kms", region_name=REGION)
    kms.disable_key(KeyId=kms.describe_key(KeyId=FINGERPRINT_ALIAS)["KeyMetadata"]["KeyId"])
    sandbox.reset()
    assert kms.describe_key(KeyId=FINGERPRINT_ALIAS)["KeyMetadata"]["KeyState"] == "Enabled"
