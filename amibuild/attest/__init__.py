"""Signed statements about images: in-toto Statements in DSSE envelopes, signed in KMS, kept in S3.

    record.py     the canonical record of an image (id, region, sorted snapshot ids) as canonical
                  JSON (sorted keys, no whitespace, UTF-8): `record_digest` (hex SHA-256), `image_arn`
    statement.py  `statement(images, account, predicate_type, predicate)`: the Statement v1 payload
                  (subject = the image ARN in each region, digest {"sha256": record digest});
                  `ImageFacts` (id, region, snapshots; `.digest`); `PROVENANCE` (SLSA v1), `TEST`
    dsse.py       `pae`, `pae_digest`, `Envelope` (payloadType application/vnd.in-toto+json), `parse_envelope`
    sign.py       `where(aws, pipeline)` -> `Where` (key, bucket, region, account), `signer(aws, where)`
                  -> `Signer` (key ARN or why unsigned), `attest(...)` -> `Stored`; `image_facts(aws, amis)`
    store.py      the S3 layout: ``amibuild/<pipeline>/images/<ami-id>/<kind>/<run-id>.dsse.json``, the
                  same envelope under every region's AMI id (one listing per image); `fetch`
    verify.py     `verify(envelope, pipeline_key=, public_keys=, images=, account=, predicate_type=)`:
                  pure, -> `Verification` (`.ok`, `.failures` of `Problem` + reason, `.predicate`)
    check.py      `verify_image(aws, where, images, predicate_type)`: fetch, keys, verify (the I/O)
    predicates.py the provenance (SLSA v1) and test predicates amibuild writes

Signing: ECDSA_SHA_256 with an ECC_NIST_P256 KMS key over the SHA-256 of the PAE
(``MessageType=DIGEST``); the envelope's keyid is the key's ARN, so it names the region that signed.
"""
