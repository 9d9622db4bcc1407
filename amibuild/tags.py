"""Every `amibuild:*` tag name, in one place.

Images, snapshots and SSM parameters carry these; `build` writes them, `channels`, `lifecycle` and
`handoff` read them. A new tag is added here and nowhere else.
"""

PREFIX = "amibuild:"

PIPELINE = f"{PREFIX}pipeline"
FINGERPRINT = f"{PREFIX}fingerprint"
VARIANT = f"{PREFIX}variant"
OS = f"{PREFIX}os"
KUBERNETES_VERSION = f"{PREFIX}kubernetes-version"
ARCH = f"{PREFIX}arch"
FLAVOR = f"{PREFIX}flavor"
BASE = f"{PREFIX}base"
SOURCE_AMI = f"{PREFIX}source-ami"
SOURCE_AMI_NAME = f"{PREFIX}source-ami-name"
EXTRA_PACKAGES = f"{PREFIX}extra-packages"
VERSION = f"{PREFIX}version"
RUN_ID = f"{PREFIX}run-id"
CREATED = f"{PREFIX}created"
GIT_COMMIT = f"{PREFIX}git-commit"
CHANNEL = f"{PREFIX}channel"
CHANNEL_REGIONS = f"{PREFIX}channel-regions"  # on a channel parameter: every region the channel is written in
LEASE_HOME = f"{PREFIX}lease-home"  # on a channel parameter: the region its write lease lives in
# image test results (amibuild.imagetest): passed | failed, when, and which run tested it
TEST = f"{PREFIX}test"
TESTED_AT = f"{PREFIX}tested-at"
TEST_RUN = f"{PREFIX}test-run"
