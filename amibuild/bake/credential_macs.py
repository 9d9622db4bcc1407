"""What the fingerprint holds in place of URL credentials: KMS MACs gathered before the render is finished.

A fingerprint is an AMI tag anyone in the account reads; a function of a password that can be
computed offline (even a slow, keyed hash whose key ships in amibuild) lets them test guesses
against it. So the credentials reach the fingerprint only as a MAC by the pipeline's KMS HMAC key
(`pipeline { fingerprint_key }`, default alias/amibuild-fingerprint) in one home region: the key's
ARN says which, else the build region. One GenerateMac per distinct credential-carrying value.
Without the key (none named, none there, no AWS access) they stay out of the fingerprint, and the
note says what that means: a new password alone is no new build.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from amibuild import render as render_mod, secrets
from amibuild.errors import AwsError, NotFound
from amibuild.pipeline import Pipeline
from amibuild.render import Build

_OUT = "URL credentials are not in the fingerprint: a new password alone makes no new build (--force rebuilds)"


@dataclass(frozen=True)
class CredentialMacs:
    """Variant name -> PKR_VAR_<name> -> MAC, for the variants whose values carry credentials; and
    the note to say when they stay out of the fingerprint."""

    macs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: MappingProxyType({}))
    note: str = ""

    def of(self, build: Build) -> Mapping[str, str] | None:
        return self.macs.get(build.variant.name)


def key_region(key: str, pipeline: Pipeline) -> str:
    """The region of the fingerprint key: an ARN's, else the pipeline's build region."""
    return key.split(":")[3] if key.startswith("arn:") and key.count(":") >= 5 else pipeline.build_region


def gather(pipeline: Pipeline, builds: Iterable[Build], aws: Any, *, strict: bool = False) -> CredentialMacs:
    """The MACs of every build's credential-carrying variables. `aws` None (offline): none. An
    error other than "no such key" is raised under `strict` (build-ami: a fingerprint that silently
    changed would rebuild or, worse, reuse), else it leaves the credentials out with a note."""
    wanted = {b.variant.name: env for b in builds if (env := render_mod.credential_env(b))}
    key = pipeline.fingerprint_key
    if not wanted:
        return CredentialMacs()
    if not key:
        return CredentialMacs(note=f"{_OUT}; pipeline.fingerprint_key is \"\"")
    if aws is None:
        return CredentialMacs(note=f"{_OUT}; no AWS access to make the MAC with KMS key {key}")
    region = key_region(key, pipeline)
    made: dict[bytes, str] = {}
    try:
        for env in wanted.values():
            for name, value in env.items():
                message = secrets.mac_message(name, value)
                if message not in made:
                    made[message] = base64.b64encode(aws.generate_mac(key, message, region).mac).decode()
    except NotFound:
        return CredentialMacs(note=f"{_OUT}; no KMS key {key} in {region} (create an HMAC_256 key and alias to "
                                   "cover them; a new key is a new fingerprint, so every such variant is rebuilt)")
    except AwsError as exc:
        if strict:
            raise
        return CredentialMacs(note=f"{_OUT}; the MAC could not be made ({exc})")
    return CredentialMacs(MappingProxyType({
        variant: MappingProxyType({name: made[secrets.mac_message(name, value)] for name, value in env.items()})
        for variant, env in wanted.items()}))
