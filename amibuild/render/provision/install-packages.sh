#!/usr/bin/env bash
# Install extra packages on the build instance and prove they are there.
#
# Packer's shell provisioner passes configuration only through the environment:
#   AMIBUILD_EXTRA_PACKAGES   whitespace-separated package specs (name, or name-version[-release])
#   AMIBUILD_INSTALL_RETRIES  attempts at the install command (default 3)
#   AMIBUILD_RETRY_DELAY      seconds between attempts (default 10)
#
# dnf is used when it is on PATH (Amazon Linux 2023), yum otherwise (Amazon Linux 2). The whole
# install is retried because mirrors fail transiently; afterwards every package is checked with
# `rpm -q`, because yum on Amazon Linux 2 exits 0 when asked for a name no repository has. The
# script is self-contained (Packer uploads each provisioner script on its own), hence the small
# helpers repeated across amibuild/render/provision/. Amazon Linux 2 runs bash 4.2, where expanding an
# empty "${array[@]}" under `set -u` is an error, so arrays here are never empty when expanded.
set -euo pipefail
# Bracket ranges such as [A-Z] only mean ASCII letters in the C locale.
export LC_ALL=C

log() { printf 'amibuild: %s\n' "$*"; }
die() { printf 'amibuild: error: %s\n' "$*" >&2; exit 1; }
# Quote a value for a message; control characters are shown escaped rather than sent to the log.
show() { if [[ $1 == *[[:cntrl:]]* ]]; then printf '%q' "$1"; else printf "'%s'" "$1"; fi; }

# RPM name grammar, optionally followed by -version[-release]. The first character can be
# neither '-' (it would reach the package manager as an option) nor '.' ("../").
package_re='^[A-Za-z0-9_+][A-Za-z0-9._+~^-]*$'

retries="${AMIBUILD_INSTALL_RETRIES:-3}"
delay="${AMIBUILD_RETRY_DELAY:-10}"
[[ $retries =~ ^[1-9][0-9]{0,2}$ ]] \
    || die "AMIBUILD_INSTALL_RETRIES must be a whole number from 1 to 999, got $(show "$retries")"
[[ $delay =~ ^(0|[1-9][0-9]{0,3})$ ]] \
    || die "AMIBUILD_RETRY_DELAY must be a whole number of seconds from 0 to 9999, got $(show "$delay")"

packages=()
# read -d '' consumes every line and returns 1 at end of input, which is expected here.
IFS=$' \t\n' read -r -d '' -a packages <<<"${AMIBUILD_EXTRA_PACKAGES:-}" || true

if (( ${#packages[@]} == 0 )); then
    log "no extra packages requested"
    exit 0
fi

for pkg in "${packages[@]}"; do
    [[ $pkg =~ $package_re ]] \
        || die "package $(show "$pkg") is not a valid RPM package name (must match ${package_re})"
done

if command -v dnf >/dev/null 2>&1; then
    mgr=dnf
elif command -v yum >/dev/null 2>&1; then
    mgr=yum
else
    die "neither dnf nor yum is on PATH"
fi

log "installing with ${mgr}: ${packages[*]}"
attempt=1
until "$mgr" install -y "${packages[@]}"; do
    if (( attempt >= retries )); then
        die "${mgr} install failed ${attempt} time(s); giving up"
    fi
    log "${mgr} install failed (attempt ${attempt} of ${retries}); retrying in ${delay}s"
    sleep "$delay"
    attempt=$(( attempt + 1 ))
done

missing=()
for pkg in "${packages[@]}"; do
    if installed=$(rpm -q "$pkg" 2>/dev/null); then
        # Several versions of one name (kernel, say) come back one per line.
        log "installed ${installed//$'\n'/, }"
    else
        missing+=("$pkg")
    fi
done

if (( ${#missing[@]} > 0 )); then
    die "not installed after ${mgr} install (check the name and the enabled repositories): ${missing[*]}"
fi
log "verified ${#packages[@]} package(s)"
