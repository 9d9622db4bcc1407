#!/usr/bin/env bash
# Add extra yum/dnf repositories to the build instance.
#
# Packer's shell provisioner passes configuration only through the environment:
#   AMIBUILD_REPOS  newline-separated "name|baseurl|gpgkey" records (gpgkey may be empty;
#                   blank lines are ignored). gpgkey is a URL, or "key:BASE64" for an armored
#                   key shipped with the build (written to /etc/pki/rpm-gpg/ and imported from there)
#   AMIBUILD_ROOT   prefix for every path touched (empty on a real build; tests use a temp dir)
#
# Each record becomes ${AMIBUILD_ROOT}/etc/yum.repos.d/amibuild-<name>.repo, and a given key is
# imported with `rpm --import`. Every record is checked before anything is written, so bad input
# leaves the instance untouched. The script is self-contained (Packer uploads each provisioner
# script on its own), hence the small helpers repeated across amibuild/render/provision/. Amazon Linux 2
# runs bash 4.2, where expanding an empty "${array[@]}" under `set -u` is an error, so arrays here
# are never empty when expanded.
set -euo pipefail
# Bracket ranges such as [A-Z] only mean ASCII letters in the C locale.
export LC_ALL=C
umask 022

log() { printf 'amibuild: %s\n' "$*"; }
die() { printf 'amibuild: error: %s\n' "$*" >&2; exit 1; }
# Quote a value for a message; control characters are shown escaped rather than sent to the log.
show() { if [[ $1 == *[[:cntrl:]]* ]]; then printf '%q' "$1"; else printf "'%s'" "$1"; fi; }

# Repository URLs may carry credentials: http://user:secret@host/ -> http://***@host/
redact() {
    local re='^([A-Za-z]+://)[^/]*@(.*)$'
    if [[ $1 =~ $re ]]; then
        printf '%s***@%s' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
    else
        printf '%s' "$1"
    fi
}

root="${AMIBUILD_ROOT:-}"
if [[ -n $root && $root != /* ]]; then
    die "AMIBUILD_ROOT must be empty or an absolute path, got $(show "$root")"
fi

name_re='^[A-Za-z0-9][A-Za-z0-9._-]*$'
userinfo_re='^[A-Za-z]+://[^/]*@'

# An http(s) URL with a host part and nothing that could break out of a repo file line or a
# shell word. `$` stays allowed: yum expands $releasever and $basearch in baseurl itself.
valid_url() {
    local url=$1
    [[ $url == http://?* || $url == https://?* ]] || return 1
    [[ $url != *[[:space:][:cntrl:]\'\"\\\|\`]* ]]
}

trim() {
    local s=$1
    s="${s#"${s%%[![:space:]]*}"}"
    s="${s%"${s##*[![:space:]]}"}"
    printf '%s' "$s"
}

names=()
baseurls=()
gpgkeys=()
declare -A seen=()

while IFS= read -r line || [[ -n $line ]]; do
    line=$(trim "$line")
    [[ -z $line ]] && continue

    pipes="${line//[!|]/}"
    if (( ${#pipes} < 1 || ${#pipes} > 2 )); then
        # Name the record by its first field only: the rest may hold credentials.
        die "repo record $(show "$(redact "${line%%|*}")") must be 'name|baseurl|gpgkey' but has $(( ${#pipes} + 1 )) field(s)"
    fi
    name=$(trim "${line%%|*}")
    rest="${line#*|}"
    baseurl=$(trim "${rest%%|*}")
    gpgkey=""
    if [[ $rest == *'|'* ]]; then
        gpgkey=$(trim "${rest#*|}")
    fi

    [[ $name =~ $name_re ]] \
        || die "repo name $(show "$name") must match ${name_re}"
    [[ -z ${seen[$name]:-} ]] \
        || die "repo name $(show "$name") is given more than once"
    valid_url "$baseurl" \
        || die "repo '${name}': baseurl $(show "$(redact "$baseurl")") must be an http(s) URL without spaces, quotes, backslashes, '|' or backticks"
    if [[ $gpgkey == key:* ]]; then
        [[ ${gpgkey#key:} =~ ^[A-Za-z0-9+/]+={0,2}$ ]] \
            || die "repo '${name}': its shipped gpgkey is not base64"
    elif [[ -n $gpgkey ]]; then
        valid_url "$gpgkey" \
            || die "repo '${name}': gpgkey $(show "$(redact "$gpgkey")") must be an http(s) URL without spaces, quotes, backslashes, '|' or backticks"
    fi

    seen[$name]=1
    names+=("$name")
    baseurls+=("$baseurl")
    gpgkeys+=("$gpgkey")
done <<<"${AMIBUILD_REPOS:-}"

if (( ${#names[@]} == 0 )); then
    log "no extra repositories requested"
    exit 0
fi

repo_dir="${root}/etc/yum.repos.d"
key_dir="/etc/pki/rpm-gpg"
mkdir -p -- "$repo_dir"

for i in "${!names[@]}"; do
    name=${names[i]}
    baseurl=${baseurls[i]}
    gpgkey=${gpgkeys[i]}
    file="${repo_dir}/amibuild-${name}.repo"
    if [[ $gpgkey == key:* ]]; then
        # a key shipped with the build: nobody on the network path can swap it
        key_file="${key_dir}/RPM-GPG-KEY-amibuild-${name}"
        mkdir -p -- "${root}${key_dir}"
        printf '%s' "${gpgkey#key:}" | base64 -d >"${root}${key_file}"
        log "wrote ${root}${key_file}"
        gpgkey="file://${key_file}"
    fi

    lines=(
        "[${name}]"
        "name=${name} (added by amibuild)"
        "baseurl=${baseurl}"
        "enabled=1"
    )
    if [[ -n $gpgkey ]]; then
        lines+=("gpgcheck=1" "gpgkey=${gpgkey}")
    else
        lines+=("gpgcheck=0")
    fi
    # user:password@ in a URL: the file is made root's alone (mode 600) before they are written
    if [[ $baseurl =~ $userinfo_re || $gpgkey =~ $userinfo_re ]]; then
        : >>"$file"
        chmod 600 "$file"
    fi
    printf '%s\n' "${lines[@]}" >"$file"
    log "wrote ${file}"

    if [[ -n $gpgkey ]]; then
        # Import now rather than at the first install, so an unreachable or bad key fails here.
        if [[ $gpgkey == file://* ]]; then
            rpm --import "${root}${gpgkey#file://}"
        else
            rpm --import "$gpgkey"
        fi
        log "imported key for repo ${name}"
    fi
done
