"""Signed statements about images: in-toto Statements in DSSE envelopes, signed in KMS, kept in S3.

Why it is built this way: docs/dev/decisions.md.
"""
