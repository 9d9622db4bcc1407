"""Proxy credentials the nodes read at boot from an SSM SecureString (`credentials_parameter`).

Instead of a proxy URL with ``user:password@`` (which the node user data would then carry in the
clear), the pipeline's ``proxy { credentials_parameter = "/amibuild/proxy-creds" }`` or the hand-off
flag ``--proxy-credentials-parameter`` names a SecureString holding ``user:password``. The node's
boothook reads it with the instance role at boot and composes ``http://user:password@host:port``
itself, so the secret is in neither the user data, the stack template nor its parameters.

This module holds the rules both sides share: what a parameter name may be (`check_name`), and what
the value may be (`VALUE_PATTERN`, which the boothook checks at boot), when a variant's parameter
applies to a hand-off's proxy (`for_proxy`), and the IAM statements the node role needs
(`node_role_statements`). Pure: no AWS calls, no files.
"""

from __future__ import annotations

import re
from typing import Any

from amibuild import secrets
from amibuild.errors import SpecError

# SSM: a full name starts with '/', is at most 2,048 characters of letters, digits and _ . - /,
# levels are not empty, and nothing lives under /aws or /ssm (reserved by AWS).
MAX_NAME = 2048
_NAME = re.compile(r"/[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)*", re.ASCII)
# The SecureString's value: user:password, each part letters, digits and . _ - ! * + , = % (percent-encode
# anything else, e.g. @ as %40). Every character here stays itself in a URL's userinfo, in
# /etc/environment sourced by bash (no quote, $, backtick, ~, space), in yum/dnf config, and in a systemd
# drop-in once % is doubled. The boothook holds the value read at boot to this same pattern (bash ERE).
VALUE_PATTERN = r"^[A-Za-z0-9._!*+,=%-]+:[A-Za-z0-9._!*+,=%:-]+$"
# The inline policy on the node role of a node group stack, and what Karpenter's node role needs.
POLICY_NAME = "read-proxy-credentials"
STATEMENT_SID = "ReadProxyCredentials"


def check_name(value: str, label: str) -> str:
    """`value` when it is an SSM parameter name a node can read, else SpecError naming `label`."""
    shown = repr(value if len(value) <= 60 else value[:60] + "...")
    if not isinstance(value, str) or not value.isascii() or not _NAME.fullmatch(value):
        raise SpecError(f"{label} {shown}: an SSM parameter name starting with '/', of letters, digits and "
                        "_ . - / between non-empty levels, e.g. /amibuild/proxy-creds")
    if len(value) > MAX_NAME:
        raise SpecError(f"{label} {shown}: {len(value)} characters; SSM allows {MAX_NAME}")
    if value.lower().startswith(("/aws", "/ssm")):
        raise SpecError(f"{label} {shown}: names starting with aws or ssm are reserved by AWS")
    return value


def check_with_proxy(parameter: str, proxy_urls: tuple[str, ...], label: str, proxy_label: str) -> None:
    """A credentials parameter needs a proxy, and a proxy URL without credentials of its own."""
    if not parameter:
        return
    check_name(parameter, label)
    if not any(proxy_urls):
        raise SpecError(f"{label}: names the proxy's credentials, but there is no proxy: give {proxy_label}")
    with_credentials = next((url for url in proxy_urls if secrets.credentials(url)), None)
    if with_credentials:
        raise SpecError(f"{label}: {proxy_label} {secrets.mask(with_credentials)} carries credentials already; "
                        f"give the URL without user:password@ (the nodes read them from {parameter})")


def for_proxy(proxy: str, parameter: str, variant_parameter: str) -> str:
    """The parameter the nodes read their proxy's user:password from: ``parameter`` when one is set,
    else the variant's ``proxy { credentials_parameter }`` for a proxy URL without user:password of
    its own, else none ("")."""
    if parameter or not proxy or secrets.credentials(proxy):
        return parameter or ""
    return variant_parameter


def node_role_statements(parameter: str) -> list[dict[str, Any]]:
    """IAM statements (CloudFormation long form) that let a node read `parameter` and decrypt it.

    ``kms:Decrypt`` is for the key SSM encrypts SecureStrings with by default (``alias/aws/ssm``),
    only when SSM asks on the node's behalf (``kms:ViaService``). A parameter encrypted with a key of
    your own also needs that key's policy to allow the node role.
    """
    return [
        {"Sid": STATEMENT_SID, "Effect": "Allow", "Action": "ssm:GetParameter",
         "Resource": {"Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter" + parameter}},
        {"Sid": STATEMENT_SID + "Decrypt", "Effect": "Allow", "Action": "kms:Decrypt",
         "Resource": {"Fn::Sub": "arn:${AWS::Partition}:kms:${AWS::Region}:${AWS::AccountId}:key/*"},
         "Condition": {"StringEquals": {"kms:ViaService": {"Fn::Sub": "ssm.${AWS::Region}.${AWS::URLSuffix}"}}}},
    ]
