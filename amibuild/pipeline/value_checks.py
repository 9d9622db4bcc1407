"""One check per kind of value, used by every road a value takes into a build.

A setting can arrive as a first-class field of the pipeline file, in `vars = { ... }`, in a var-file
or as `--var KEY=VALUE`; `amibuild.pipeline` hands each of them to the same function here, so a proxy
URL is held to the same rule whether it came from `proxy { http = ... }` or `--var http_proxy=...`.
Everything AWS or Packer would refuse later — after an instance ran and an image was copied — is
refused here instead, at load, `--dry-run` included. Each limit cites where AWS documents it.

Every function takes `where` (the file, field or flag the value came from) and raises `SpecError`
with a sentence naming it and what to do. Nothing here touches AWS or the file system.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from amibuild import secrets
from amibuild.errors import SpecError
from amibuild.suggest import suggest

# ------------------------------------------------------------------------------- documented caps

# Our own caps, far above any real pipeline, so a mistaken or hostile input is refused in about a
# second instead of rendering for a minute (docs/dev/decisions.md).
MAX_FILE_BYTES = 64 * 1024  # a pipeline file or var-file
MAX_PACKAGES = 200  # extra packages per variant
MAX_REPOS = 50  # extra repositories per variant
MAX_SCRIPTS = 50  # user provisioner scripts per variant
MAX_VALUE_CHARS = 4096  # any one string setting (a URL, a description, a --var value)

# SSM PutParameter, Name: "The reported maximum length of 2048 characters for a parameter name
# includes 1037 characters reserved for internal use by Systems Manager. The maximum length for a
# parameter name that you create is 1011 characters." Names use a-zA-Z0-9_.- and '/', can't begin
# with aws or ssm (case-insensitive), and "Parameter hierarchies are limited to a maximum depth of
# fifteen levels."
SSM_NAME_MAX = 1011
SSM_LEVELS_MAX = 15
_SSM_NAME = re.compile(r"^/[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*\Z")

# EC2 RegisterImage / CreateImage, Name: "3-128 alphanumeric characters, parentheses (()), square
# brackets ([]), spaces ( ), periods (.), slashes (/), dashes (-), single quotes ('), at-signs (@),
# or underscores(_)". Description: up to 255 characters.
AMI_NAME_MIN, AMI_NAME_MAX = 3, 128
AMI_ID = re.compile(r"^ami-[0-9a-f]{8,17}\Z")  # an AMI id in the pipeline file and channel values, and test-ami's --ami
AMI_ID_FLAG = re.compile(r"ami-[0-9a-f]{8}(?:[0-9a-f]{9})?", re.ASCII)  # verify's, sbom/diff/scan's and restore's --ami: as EC2 makes them
_AMI_NAME = re.compile(r"^[A-Za-z0-9()\[\] ./\-'@_]+\Z")
AMI_DESCRIPTION_MAX = 255
TIMESTAMP_CHARS = 10  # Packer's {{timestamp}}: Unix seconds, ten digits until 2286
# what amibuild's own template appends in a build: "-" and the run id (bake.build_plan.new_run_id)
RUN_ID_SUFFIX = "-20250101T000000Z-000000"

# EC2 tag restrictions (Tag your Amazon EC2 resources): at most 50 tags per resource, keys up to
# 128 characters and values up to 256 (UTF-8), the `aws:` prefix is reserved.
TAG_KEY_MAX, TAG_VALUE_MAX, TAGS_PER_RESOURCE = 128, 256, 50
# amibuild's own provenance tags (amibuild.tags) plus Name leave this many for the user
USER_TAGS_MAX = TAGS_PER_RESOURCE - 20

# URLs reach yum/dnf repo files and proxy settings on the instance: http(s) only and nothing a
# shell or a repo file could read as syntax. `$basearch` and `$releasever` stay allowed (yum
# expands them); `$(`, backticks, quotes, `;`, whitespace, braces and pipes do not.
_URL = re.compile(r"https?://[A-Za-z0-9._~:/?#\[\]@!$&()*+,=%-]+")  # fullmatch
_NO_PROXY = re.compile(r"^[A-Za-z0-9.,:/*_\[\]-]+\Z")
_ACCOUNT = re.compile(r"^[0-9]{12}\Z")
# a key id, key ARN, alias name or alias ARN, as amazon-ebs's kms_key_id takes them
_KMS_KEY = re.compile(r"^(arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:(key|alias)/[A-Za-z0-9/_-]+|"
                      r"alias/[A-Za-z0-9/_-]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|"
                      r"mrk-[0-9a-f]{32})\Z")
_OWNER = re.compile(r"^([0-9]{12}|self|amazon|aws-marketplace)\Z")
_PIPELINE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# amazon-ebs's launch permission settings. EC2 takes one group, "all" (public); organisations and
# OUs by ARN (ModifyImageAttribute, OrganizationArns / OrganizationalUnitArns).
_ORG_ARN = re.compile(r"arn:aws[a-z-]*:organizations::[0-9]{12}:organization/o-[a-z0-9]{10,32}")
_OU_ARN = re.compile(r"arn:aws[a-z-]*:organizations::[0-9]{12}:ou/o-[a-z0-9]{10,32}/ou-[a-z0-9]{4,32}-[a-z0-9]{8,32}")
SHARING_VARS = ("ami_users", "snapshot_users", "ami_groups", "snapshot_groups", "ami_org_arns", "ami_ou_arns")


# ------------------------------------------------------------------------------- one value


def url(value: str, where: str, label: str) -> str:
    if not _URL.fullmatch(value) or len(value) > MAX_VALUE_CHARS or "$(" in value:
        raise SpecError(
            f"{where}: {label} {secrets.mask(value)!r} must be an http:// or https:// URL without spaces, quotes, "
            "backticks, `$(`, `;` or braces"
        )
    return value


def kms_key(value: str, where: str) -> str:
    """A KMS key id, key ARN, alias name or alias ARN ("" allowed: none)."""
    if value and (len(value) > 2048 or not _KMS_KEY.match(value)):
        raise SpecError(f"{where} {value!r}: a KMS key id, key ARN, alias/NAME or alias ARN, e.g. "
                        "alias/amibuild-fingerprint (\"\" for none)")
    return value


def no_proxy(value: str, where: str, label: str = "proxy.no_proxy") -> str:
    if value and (not _NO_PROXY.match(value) or len(value) > MAX_VALUE_CHARS):
        raise SpecError(f"{where}: {label} {value!r}: a comma-separated list of hosts, domains and CIDRs")
    return value


def has_control(value: str) -> bool:
    """True when the value holds a control character (a line break, a tab, an escape...)."""
    return bool(_CONTROL.search(value))


def text(value: str, where: str, label: str, *, limit: int = MAX_VALUE_CHARS) -> str:
    """A free-text value (a description): printable, one line, within `limit`."""
    if _CONTROL.search(value):
        raise SpecError(f"{where}: {label} holds a control character or a line break; write it on one line")
    if len(value) > limit:
        raise SpecError(f"{where}: {label} is {len(value)} characters; at most {limit} are allowed")
    return value


def pattern(value: str, where: str, label: str) -> str:
    """A value of a known AWS or Packer shape (instance type, subnet id, ...), empty allowed."""
    regex, example = _PATTERNS[label]
    if value and not regex.match(value):
        raise SpecError(f"{where}: {label} {value!r} is not valid; write it like {example}")
    return value


_PATTERNS = {
    "instance_type": (re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+\Z"), "m6i.large"),
    "subnet_id": (re.compile(r"^subnet-[0-9a-f]{8,17}\Z"), "subnet-0123456789abcdef0"),
    "security_group_id": (re.compile(r"^sg-[0-9a-f]{8,17}\Z"), "sg-0123456789abcdef0"),
    "kms_key_id": (_KMS_KEY, "alias/ebs-amis or a key id or ARN"),
    "iam_instance_profile": (re.compile(r"^[A-Za-z0-9+=,.@_-]{1,128}\Z"), "packer-build"),
    "ssh_username": (re.compile(r"^[a-z_][a-z0-9_-]{0,31}\Z"), "ec2-user"),
    "ssh_interface": (re.compile(r"^(public_ip|private_ip|public_dns|private_dns|session_manager)\Z"), "private_ip"),
    "upstream_ref": (re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}\Z"), "v20240227 or main (no leading '-')"),
}


def pipeline_name(value: str, where: str) -> str:
    if not _PIPELINE_NAME.match(value):
        raise SpecError(
            f"{where}: pipeline.name {value!r}: use letters, digits, '_', '.' and '-' (it is part of SSM "
            "parameter and AMI names), at most 63 characters, e.g. \"eks-workers\""
        )
    return value


def region(value: str, where: str, known: Iterable[str]) -> str:
    if value not in known:
        raise SpecError(f"{where}: unknown region {value!r}{suggest(value, known)}")
    return value


def account(value: str, where: str) -> str:
    if not _ACCOUNT.match(value):
        raise SpecError(f"{where}: {value!r} is not a 12-digit AWS account id")
    return value


def owner(value: str, where: str) -> str:
    if not _OWNER.match(value):
        raise SpecError(f"{where}: AMI owner {value!r}: a 12-digit account id, self, amazon or aws-marketplace")
    return value


def tags(value: Mapping[str, str], where: str) -> Mapping[str, str]:
    if len(value) > USER_TAGS_MAX:
        raise SpecError(f"{where}: {len(value)} tags; EC2 allows {TAGS_PER_RESOURCE} per image and amibuild "
                        f"uses the rest, so give at most {USER_TAGS_MAX}")
    for key, tag_value in value.items():
        if not key or len(key) > TAG_KEY_MAX:
            raise SpecError(f"{where}: tag key {key[:40]!r}{'...' if len(key) > 40 else ''} must be 1 to "
                            f"{TAG_KEY_MAX} characters")
        if key.lower().startswith("aws:") or key.startswith("amibuild:"):
            raise SpecError(f"{where}: tag key {key!r}: the aws: and amibuild: prefixes are reserved")
        if len(tag_value) > TAG_VALUE_MAX:
            raise SpecError(f"{where}: tag {key!r} has a value of {len(tag_value)} characters; EC2 allows "
                            f"{TAG_VALUE_MAX}")
        if _CONTROL.search(key) or _CONTROL.search(tag_value):
            raise SpecError(f"{where}: tag {key!r} holds a control character or a line break")
        no_template(key, where, "tag key")
        no_template(tag_value, where, f"tag {key!r}")
    return value


def no_template(value: str, where: str, label: str) -> str:
    """Refuse Packer's `{{ ... }}` in a value amazon-ebs interpolates (tags, the description).

    Refused rather than measured: what a function expands to has no worst case amibuild could
    count (`{{ env }}`, `{{ isotime }}`), and an unknown function fails the build after `--dry-run`
    passed. Provenance tags are amibuild's.
    """
    if "{{" in value or "}}" in value:
        raise SpecError(f"{where}: {label} {_short(value)} holds `{{{{ }}}}`, which Packer would expand at build "
                        "time (to a length nobody can check now, or a build failure); write the value literally")
    return value


def ami_name(value: str, where: str, label: str = "AMI name") -> str:
    """An AMI name as EC2 will see it (Packer's {{timestamp}} counted as ten digits)."""
    shown = value.replace("{{timestamp}}", "0" * TIMESTAMP_CHARS)
    if not AMI_NAME_MIN <= len(shown) <= AMI_NAME_MAX:
        raise SpecError(f"{where}: {label} {_short(shown)} is {len(shown)} characters as built; EC2 "
                        f"allows {AMI_NAME_MIN} to {AMI_NAME_MAX}: shorten the pipeline or variant name")
    if not _AMI_NAME.match(shown):
        raise SpecError(f"{where}: {label} {_short(shown)}: EC2 allows letters, digits, spaces and ( ) [ ] . / - ' @ _")
    return value


def ssm_parameter_name(name: str, where: str, made_of: str = "ssm_prefix or parameter_template") -> str:
    """A full SSM parameter name as amibuild would write it (`made_of`: the settings that make it)."""
    if len(name) > SSM_NAME_MAX:
        raise SpecError(f"{where}: SSM parameter name {_short(name)} is {len(name)} characters; SSM allows "
                        f"{SSM_NAME_MAX}: shorten {made_of}")
    if not _SSM_NAME.match(name):
        raise SpecError(f"{where}: SSM parameter name {_short(name)} is not valid: SSM allows letters, digits, "
                        "'_', '.', '-' and '/' between non-empty levels")
    levels = name.count("/")
    if levels > SSM_LEVELS_MAX:
        raise SpecError(f"{where}: SSM parameter name {_short(name)} has {levels} levels; SSM allows "
                        f"{SSM_LEVELS_MAX}: use fewer levels in {made_of}")
    if name.lower().startswith(("/aws", "/ssm")):
        raise SpecError(f"{where}: SSM parameter name {_short(name)}: names under /aws and /ssm are reserved by AWS")
    return name


def count(items: Iterable[Any], limit: int, where: str, what: str) -> None:
    n = len(list(items))
    if n > limit:
        raise SpecError(f"{where}: {n} {what}; at most {limit} per variant")


def _short(value: str, width: int = 60) -> str:
    return repr(value if len(value) <= width else value[:width] + "...")


# ------------------------------------------------------------------------------- Packer variables

def _items(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [v for v in (s.strip() for s in str(value).split(",")) if v]


def repo_line(line: str, where: str) -> None:
    """One `NAME|BASEURL|GPGKEY` entry of the extra_repos variable, checked as a repo block is."""
    parts = line.split("|")
    if len(parts) not in (2, 3):
        raise SpecError(f"{where}: extra_repos entry {_short(line)}: write NAME|BASEURL|GPGKEY")
    name, baseurl, gpgkey = (*parts, "")[:3]
    if not gpgkey:
        repo(name, baseurl, "", where, gpgcheck=False)  # the name, the URL and plain http first
        raise SpecError(f"{where}: extra_repos entry {name!r} has no gpgkey: its packages would be installed "
                        "unsigned; write NAME|BASEURL|GPGKEY, or use a repo block with gpgcheck = false to mean it")
    repo(name, baseurl, gpgkey, where)


_REPO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # fullmatch
ARMORED_KEY_BEGIN = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
_ARMORED_KEY_END = "-----END PGP PUBLIC KEY BLOCK-----"
MAX_KEY_BYTES = 64 << 10
_ARMOR = re.compile(r"[\x20-\x7e\r\n\t]*")  # fullmatch: printable ASCII lines


def armored_key(text: str, where: str, label: str) -> str:
    """An ASCII-armored OpenPGP public key, as `gpg --armor --export` writes it."""
    body = text.strip()
    if len(body) > MAX_KEY_BYTES or not _ARMOR.fullmatch(body) or not body.startswith(ARMORED_KEY_BEGIN) \
            or not body.endswith(_ARMORED_KEY_END):
        raise SpecError(f"{where}: {label} is not one ASCII-armored public key (at most {MAX_KEY_BYTES >> 10} KiB "
                        f"from {ARMORED_KEY_BEGIN} to {_ARMORED_KEY_END}, as `gpg --armor --export` writes it)")
    return body + "\n"


def repo(name: str, baseurl: str, gpgkey: str, where: str, *, gpgcheck: bool | None = None,
         insecure: bool = False, shipped_key: bool = False) -> None:
    """A repository: signed (gpgkey given), or unsigned only when `gpgcheck = false` says so, and
    never unsigned over plain http, where anyone on the path could change the packages. A plain
    http baseurl or key URL needs the key shipped with the build (`shipped_key`: given inline or
    as a local file), or `insecure = true`: whoever is on the path could swap packages and key."""
    if not _REPO_NAME.fullmatch(name):
        raise SpecError(f"{where}: repo name {name!r}: use letters, digits, '.', '_' and '-'")
    url(baseurl, where, f"repo {name!r} baseurl")
    if gpgkey or shipped_key:
        if not shipped_key:
            url(gpgkey, where, f"repo {name!r} gpgkey")
        if gpgcheck is False:
            raise SpecError(f"{where}: repo {name!r} has a gpgkey and gpgcheck = false; drop one of them")
        plain = [label for label, value in (("baseurl", baseurl), ("gpgkey", gpgkey))
                 if value.lower().startswith("http://")]
        if plain and not shipped_key and not insecure:
            raise SpecError(f"{where}: repo {name!r}: {' and '.join(plain)} {'is' if len(plain) == 1 else 'are'} "
                            "plain http://, so whoever is on the network path can swap the packages and the key "
                            "that checks them; use https://, give the key inline or as a local file (gpgkey = "
                            "\"keys/NAME.asc\"), or say insecure = true (--extra-repo NAME=URL|KEY|insecure=true) "
                            "to mean it")
        return
    if baseurl.lower().startswith("http://"):
        raise SpecError(f"{where}: repo {name!r}: a plain http:// baseurl without a gpgkey installs unsigned "
                        "packages anyone on the network path can change, as root; use https:// and give a gpgkey")
    if gpgcheck is not False:
        raise SpecError(f"{where}: repo {name!r} has no gpgkey, so its packages would be installed unsigned; give "
                        "gpgkey = URL (--extra-repo NAME=URL|GPGKEY_URL), or say gpgcheck = false "
                        "(--extra-repo NAME=URL|gpgcheck=false) to mean it")


def packer_variable(name: str, value: Any, where: str, *, known_regions: Iterable[str]) -> None:
    """Check a value given for one of the template's variables by name (through `vars`, a var-file
    or `--var`) exactly as the setting of the same meaning is checked."""
    if isinstance(value, str):
        if len(value) > MAX_VALUE_CHARS:
            raise SpecError(f"{where}: {name} is {len(value)} characters; at most {MAX_VALUE_CHARS}")
        if _CONTROL.search(value):  # before any list is split and its items stripped
            raise SpecError(f"{where}: {name} {_short(secrets.mask(value))} holds a control character or a line "
                            "break; write it on one line")
    if name in ("http_proxy", "https_proxy"):
        if str(value):
            url(str(value), where, name)
    elif name == "no_proxy":
        no_proxy(str(value), where, name)
    elif name == "extra_repos":
        for line in _items(value):  # render reads a string as a comma-separated list
            repo_line(line, where)
    elif name == "ami_regions":
        for item in _items(value):
            region(item, where, known_regions)
    elif name in ("ami_users", "snapshot_users"):
        for item in _items(value):
            account(item, where)
    elif name in ("ami_groups", "snapshot_groups"):
        for item in _items(value):
            if item != "all":
                raise SpecError(f"{where}: {name} {item!r}: EC2 knows one group, \"all\" (public); share with "
                                "accounts through ami_users or with organisations through ami_org_arns")
    elif name in ("ami_org_arns", "ami_ou_arns"):
        regex, example = ((_ORG_ARN, "arn:aws:organizations::123456789012:organization/o-abcd123456")
                          if name == "ami_org_arns" else
                          (_OU_ARN, "arn:aws:organizations::123456789012:ou/o-abcd123456/ou-ab12-cdef3456"))
        for item in _items(value):
            if not regex.fullmatch(item):
                raise SpecError(f"{where}: {name} {_short(item)} is not valid; write it like {example}")
    elif name == "source_ami_owners":
        for item in _items(value):
            owner(item, where)
    elif name in ("tags", "run_tags", "snapshot_tags"):
        if isinstance(value, Mapping):
            tags({str(k): str(v) for k, v in value.items()}, where)
    elif name == "ami_name_prefix":
        ami_name(f"{value}-{{{{timestamp}}}}{RUN_ID_SUFFIX}", where, "ami_name_prefix + timestamp + run id")
    elif name == "ami_name":
        ami_name(str(value), where, "ami_name")
    elif name == "ami_description":
        text(str(value), where, name, limit=AMI_DESCRIPTION_MAX)
        no_template(str(value), where, name)
    elif name == "source_ami_filter_name":
        if not re.match(r"^[A-Za-z0-9()\[\] ./\-'@_*?]{1,128}\Z", str(value)):
            raise SpecError(f"{where}: source_ami_filter_name {_short(str(value))}: an AMI name pattern with * and ?")
    elif name in _PATTERNS:
        pattern(str(value), where, name)
    elif isinstance(value, str):
        text(value, where, name)


def sharing(variant: Any, pipeline_users: Iterable[str], *, public: bool, allow_shared_credentials: bool,
            where: str) -> None:
    """Who an image is shared with, on every base: public only when the pipeline says `public = true`,
    and credentials baked in (a proxy or repository URL with user:password@) only into an image
    nobody else may launch, unless the pipeline says `allow_shared_credentials = true`."""
    shared_with: list[str] = [f"{where}: pipeline.ami_users"] if tuple(pipeline_users) else []
    for name in SHARING_VARS:
        value = variant.packer_vars.get(name)
        if value is None or not _items(value):
            continue
        origin = variant.origins.get(name, name)
        if name in ("ami_groups", "snapshot_groups") and not public:
            raise SpecError(f"{origin}: {name} = [\"all\"] makes the image public (anyone can launch it and read "
                            "its snapshot); say `public = true` in the pipeline block to mean it")
        shared_with.append(origin)
    baked = [label for label, value in (
        ("proxy", [variant.proxy.http, variant.proxy.https]),
        ("repo", [[r.baseurl, r.gpgkey] for r in variant.repos]),
        *((k, v) for k, v in variant.packer_vars.items() if k in ("http_proxy", "https_proxy", "extra_repos")),
    ) if secrets.has_credentials(value)]
    if shared_with and baked and not allow_shared_credentials:
        raise SpecError(f"{shared_with[0]}: variant {variant.name} bakes credentials ({', '.join(baked)} URL with "
                        "user:password@) into an image shared with other accounts, who can read them from its "
                        "snapshot: stop sharing it, drop the credentials, or say `allow_shared_credentials = true` "
                        "in the pipeline block")


# ------------------------------------------------------------------------------- HCL literals


def literal_problem(raw: Any) -> str | None:
    """The first value in a python-hcl2 parse (made with string quotes kept) that is not a literal.

    Var-files are read by Packer as literals only: `instance_type = m6i.large` (unquoted) or
    `"${var.x}"` is refused there with "Variables not allowed". python-hcl2 turns both into text
    that would be rendered as a string, so they are found here and refused with the file's line.
    """
    if isinstance(raw, (dict, list)):
        items = raw.values() if isinstance(raw, dict) else raw
        return next((found for item in items if (found := literal_problem(item)) is not None), None)
    if not isinstance(raw, str):
        return None  # numbers, bools, null
    if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:  # a string: a literal unless it interpolates
        return raw if re.search(r"(?<!\$)\$\{|(?<!%)%\{", raw[1:-1]) else None
    return raw  # a bare reference, a function call or an operation: python-hcl2 gave ${...} or a name


def line_of(text_: str, needle: str) -> int | None:
    """The first line of `text_` holding `needle` (stripped of the ${...} python-hcl2 adds)."""
    probe = needle[2:-1] if needle.startswith("${") and needle.endswith("}") else needle
    probe = probe.strip('"').splitlines()[0] if probe.strip('"') else probe
    return next((number for number, line in enumerate(text_.splitlines(), start=1) if probe and probe in line), None)


