#!/usr/bin/env bash
# amibuild rehearsal stand-in: answers for a tool that cannot or must not run in the rehearsal copy.
#
# Installed once per tool name (yum, rpm, systemctl, curl, ...) first on the PATH inside the
# throwaway copy of the machine; which tool it plays is the name it was called by. Every call is
# appended to the calls log. State lives in $AMIBUILD_REHEARSE_STATE (outside the copy, read by
# amibuild afterwards):
#   calls      one line per call: step<TAB>tool<TAB>arguments
#   packages   name<TAB>version asked for ("" = any), what yum/dnf/rpm/extras installed
#   units      unit<TAB>enabled|disabled|masked
#   gaps       calls a stand-in cannot answer; the step is then "not rehearsable", not failed
#   stood_in   step<TAB>what a stand-in did in place of the real thing (a nodeadm build, say)
#   refuse     package names the package manager refuses (to rehearse a failing install)
#   step       the number of the step running now
#   arch       the variant's architecture (x86_64 | arm64), for uname -m
# A call this script cannot answer like the real tool prints why, is logged in `gaps` and exits
# 97, so a failure it causes is never mistaken for an error of the chain.
set -uo pipefail
export LC_ALL=C

state=${AMIBUILD_REHEARSE_STATE:-/.amibuild-rehearse/state}
tool=${0##*/}
# State files are read by bash itself ($(<file)), not by a cat: every call of every stand-in reads one.
step='?'
[[ -r $state/step ]] && step=$(<"$state/step")

# Files are laid down only inside the rehearsal copy, never when a stand-in runs anywhere else.
in_copy() { [[ $state == /.amibuild-rehearse/* ]]; }

record() { printf '%s\t%s\t%s\n' "$step" "$tool" "$*" >>"$state/calls"; }
record "$@"

gap() {
    printf 'amibuild rehearsal: the stand-in for %s cannot answer: %s %s\n' "$tool" "$tool" "$*" >&2
    printf '%s\t%s %s\n' "$step" "$tool" "$*" >>"$state/gaps"
    exit 97
}

# ------------------------------------------------------------------------------ packages

# "containerd-1.7.11-1.amzn2" -> name "containerd", version "1.7.11-1.amzn2": the name ends at the
# first '-' followed by a digit, as RPM names hardly ever contain one.
split_spec() {
    local spec=$1
    spec=${spec%.rpm}
    spec=${spec##*/}
    if [[ $spec =~ ^([^-]+(-[^0-9][^-]*)*)-([0-9].*)$ ]]; then
        printf '%s\t%s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[3]}"
    else
        printf '%s\t\n' "$spec"
    fi
}

# State files are shared by root and the build user: rewritten in place, never replaced.
replace_state() {
    cat "$state/$1.new" >"$state/$1"
    rm -f "$state/$1.new"
}

# The commands a package provides, for the packages EKS chains install: once installed, they are
# found (command -v) where this machine lacks them. Called, such a command is a stand-in that
# cannot answer (a gap), never a silent success.
provides() {
    case $1 in
        pigz) printf '%s\n' pigz unpigz ;;
        conntrack | conntrack-tools) printf '%s\n' conntrack ;;
        containerd) printf '%s\n' containerd ctr ;;
        docker) printf '%s\n' docker dockerd ;;
        chrony) printf '%s\n' chronyd chronyc ;;
        amazon-ssm-agent) printf '%s\n' amazon-ssm-agent ;;
        ec2-instance-connect) printf '%s\n' eic_run_authorized_keys ;;
        socat | ethtool | ipvsadm | mdadm | nerdctl | runc | jq | unzip | wget | curl | lvm2) printf '%s\n' "${1%2}" ;;
    esac
}

# The few files of a package that chains edit right after installing it (sed -i on a config).
lay_down() {
    local command
    in_copy || return 0
    for command in $(provides "$1"); do
        if [[ ! -e /usr/bin/$command && ! -e /usr/sbin/$command && ! -e /bin/$command && ! -e /sbin/$command ]]; then
            ln -s "/.amibuild-rehearse/standin.sh" "/usr/bin/$command"
        fi
    done
    case $1 in
        docker)
            # the docker RPM's %pre makes the group that chains add the build user to
            getent group docker >/dev/null || groupadd --system docker
            [[ -e /etc/sysconfig/docker ]] || printf 'OPTIONS="--default-ulimit nofile=32768:65536"\n' >/etc/sysconfig/docker ;;
        chrony)
            [[ -e /etc/chrony.conf ]] || printf 'pool 169.254.169.123 prefer iburst\n' >/etc/chrony.conf ;;
    esac
}

# The installed record for a name, or for a full name-version-release[.arch] as rpm -q takes it.
installed_line() {
    local want=$1 name version
    while IFS=$'\t' read -r name version; do
        if [[ $want == "$name" || $want == "$(nvra "$name" "$version")" ]] \
            || [[ $want == "$name-$(plain_version "$version")" ]]; then
            printf '%s\t%s\n' "$name" "$version"
            return 0
        fi
    done <"$state/packages"
}

install_pkg() {
    local name version
    IFS=$'\t' read -r name version < <(split_spec "$1")
    if grep -qxF -- "$name" "$state/refuse"; then
        printf 'No package %s available.\n' "$1"
        printf 'Error: Unable to find a match: %s\n' "$1" >&2
        return 1
    fi
    awk -F'\t' -v n="$name" '$1 != n' "$state/packages" >"$state/packages.new"
    printf '%s\t%s\n' "$name" "$version" >>"$state/packages.new"
    replace_state packages
    lay_down "$name"
    printf 'Installed: %s\n' "$1"
}

remove_pkg() {
    local name version
    IFS=$'\t' read -r name version < <(split_spec "$1")
    : "$version"
    awk -F'\t' -v n="$name" '$1 != n' "$state/packages" >"$state/packages.new"
    replace_state packages
    printf 'Removed: %s\n' "$1"
}

# A version asked for with a wildcard ("5.10*", "1.7.*") as a plausible exact one, with a release.
plain_version() {
    local version=${1%%\**}
    version=${version%.}
    [[ -z $version ]] && version=1.0
    [[ $version == *.*.* || $version == *-* ]] || version="${version}.0"
    [[ $version == *-* ]] || version="${version}-1.amzn2"
    printf '%s' "$version"
}

# Sets the caller's local $arch to the variant's architecture as rpm and uname name it (arm64 is
# aarch64), x86_64 when the state has none: read by bash itself, no process per call.
rpm_arch() {
    arch=x86_64
    [[ -r $state/arch ]] && arch=$(<"$state/arch")
    [[ $arch != arm64 ]] || arch=aarch64
}

# name-version-release.arch as rpm -q prints it; a version the chain asked for is shown as asked.
nvra() {
    local name=$1 version=$2 arch
    rpm_arch
    version=$(plain_version "$version")
    printf '%s-%s.%s\n' "$name" "$version" "$arch"
}

# yum / dnf: options are skipped, except those that take a separate argument.
package_manager() {
    local cmd="" args=() arg
    while (($#)); do
        arg=$1
        shift
        case $arg in
            --setopt | --enablerepo | --disablerepo | --exclude | -x | --releasever | -c | --config | --installroot)
                shift ;;
            -*) ;;
            *) if [[ -z $cmd ]]; then cmd=$arg; else args+=("$arg"); fi ;;
        esac
    done
    local rc=0 pkg
    case $cmd in
        install | reinstall | downgrade | localinstall | upgrade | update)
            if [[ $cmd == update || $cmd == upgrade ]] && ((${#args[@]} == 0)); then
                printf 'No packages marked for update\n'
                return 0
            fi
            for pkg in "${args[@]}"; do
                install_pkg "$pkg" || rc=1
            done
            return "$rc" ;;
        remove | erase | autoremove)
            for pkg in "${args[@]}"; do remove_pkg "$pkg"; done ;;
        swap)  # dnf swap OLD NEW: one package for another
            ((${#args[@]} == 2)) || gap "swap ${args[*]}"
            remove_pkg "${args[0]}"
            install_pkg "${args[1]}" ;;
        clean | makecache | check-update | repolist | history) ;;
        list)
            if [[ ${args[0]:-} == installed ]]; then
                while IFS=$'\t' read -r name version; do
                    nvra "$name" "$version"
                done <"$state/packages"
            else
                gap "list ${args[*]}"
            fi ;;
        versionlock)
            case ${args[0]:-list} in
                add | delete | clear | exclude) ;;
                list)
                    while IFS=$'\t' read -r name version; do
                        if [[ -n $version ]]; then printf '0:%s\n' "$(nvra "$name" "$version")"; fi
                    done <"$state/packages" ;;
                *) ;;  # `yum versionlock PKG...` is `versionlock add`
            esac ;;
        config-manager) config_manager "${args[@]}" ;;
        "") gap "(no command)" ;;
        *) gap "$cmd ${args[*]}" ;;
    esac
}

config_manager() {
    local arg
    in_copy || return 0
    for arg in "$@"; do
        case $arg in
            http://* | https://*)
                local file="/etc/yum.repos.d/${arg##*/}"
                [[ $file == *.repo ]] || file="${file}.repo"
                printf '[%s]\nname=%s\nbaseurl=%s\nenabled=1\n' "$(basename "$file" .repo)" "$arg" "$arg" >"$file" ;;
        esac
    done
    return 0
}

# One installed package as rpm prints it: name-version-release.arch, or --queryformat filled in.
rpm_line() {
    local name=$1 version=$2 format=$3
    if [[ -z $format ]]; then
        nvra "$name" "$version"
        return 0
    fi
    version=$(plain_version "$version")
    format=${format//%\{NAME\}/$name}
    format=${format//%\{VERSION\}/${version%%-*}}
    format=${format//%\{RELEASE\}/${version#*-}}
    # what the stand-in does not know, rpm's way: no epoch, no license ("(none)"); the variant's arch
    local arch
    rpm_arch
    format=${format//%\{EPOCH\}/(none)}
    format=${format//%\{ARCH\}/$arch}
    format=${format//%\{LICENSE\}/(none)}
    format=${format//\\\{/\{}
    format=${format//\\\}/\}}
    if [[ $format == *%\{* ]]; then
        gap "--queryformat $3"
    fi
    printf '%b' "$format"
}

rpm_tool() {
    local mode="" query_format="" names=() arg
    while (($#)); do
        arg=$1
        shift
        case $arg in
            -q | --query) [[ $mode == all ]] || mode=query ;;
            -qa | -aq) mode=all ;;
            -a | --all) mode=all ;;
            --queryformat | --qf) query_format=$1; shift ;;
            --import) mode=import ;;
            -e | --erase) mode=erase ;;
            -i | -U | -F | -ivh | -Uvh | -iv | -Uv | --install | --upgrade) mode=install ;;
            --nodeps | --force | --quiet | -v | -h | --nosignature) ;;
            -*) gap "$arg $*" ;;
            *) names+=("$arg") ;;
        esac
    done
    local rc=0 line name version
    case $mode in
        query)
            for name in "${names[@]}"; do
                line=$(installed_line "$name")
                if [[ -z $line ]]; then
                    printf 'package %s is not installed\n' "$name"
                    rc=1
                    continue
                fi
                rpm_line "${line%%$'\t'*}" "${line#*$'\t'}" "$query_format"
            done
            return "$rc" ;;
        all)
            while IFS=$'\t' read -r name version; do
                rpm_line "$name" "$version" "$query_format"
            done <"$state/packages" ;;
        import | "") ;;
        install) for name in "${names[@]}"; do install_pkg "$name" || rc=1; done; return "$rc" ;;
        erase) for name in "${names[@]}"; do remove_pkg "$name"; done ;;
    esac
}

extras() {
    case ${1:-} in
        enable | disable | list | info) ;;
        install)
            shift
            local topic
            for topic in "$@"; do
                [[ $topic == -* ]] && continue
                install_pkg "$topic" || return 1
            done ;;
        *) gap "$*" ;;
    esac
}

# ------------------------------------------------------------------------------ services

set_unit() {
    local unit=$1 how=$2
    [[ $unit == *.* ]] || unit="${unit}.service"
    awk -F'\t' -v u="$unit" '$1 != u' "$state/units" >"$state/units.new"
    printf '%s\t%s\n' "$unit" "$how" >>"$state/units.new"
    replace_state units
}

systemctl_tool() {
    local cmd="" units=() arg
    for arg in "$@"; do
        case $arg in
            --now | --no-reload | --quiet | -q | --system | --no-block | --force | -f | --no-pager) ;;
            -*) ;;
            *) if [[ -z $cmd ]]; then cmd=$arg; else units+=("$arg"); fi ;;
        esac
    done
    local unit
    case $cmd in
        enable | disable | mask | unmask)
            for unit in "${units[@]}"; do set_unit "$unit" "${cmd%e}ed"; done ;;
        daemon-reload | start | stop | restart | reload | try-restart | reload-or-restart | preset | daemon-reexec) ;;
        is-enabled)
            unit=${units[0]:-}
            [[ $unit == *.* ]] || unit="${unit}.service"
            local how
            how=$(awk -F'\t' -v u="$unit" '$1 == u { print $2 }' "$state/units")
            printf '%s\n' "${how:-disabled}"
            [[ $how == enabled ]] ;;
        is-active) printf 'inactive\n'; return 3 ;;
        *) gap "$*" ;;
    esac
}

chkconfig_tool() {
    case ${2:-} in
        on) set_unit "$1" enabled ;;
        off) set_unit "$1" disabled ;;
        *) gap "$*" ;;
    esac
}

# ------------------------------------------------------------------------------ downloads

# Deterministic content for a URL: the same URL always gives the same bytes, so a checksum file
# fetched beside it matches. Archives are real archives; anything else is a small executable
# that answers like a binary asked for its version.
fake_content() {
    local url=$1 out=$2 base
    base=${url%%\?*}
    base=${base##*/}
    [[ -z $base ]] && base=index.html
    case $base in
        *.sha256 | *.sha512 | *.sha1 | *.md5)
            local algo=${base##*.} inner tmp
            inner=${base%.*}
            tmp=$(mktemp)
            fake_content "${url%.*}" "$tmp"
            printf '%s  %s\n' "$("${algo}sum" "$tmp" | cut -d' ' -f1)" "$inner" >"$out"
            rm -f "$tmp" ;;
        *.tar.gz | *.tgz | *.tar)
            local dir
            dir=$(mktemp -d)
            printf 'placeholder for %s, written by the amibuild rehearsal\n' "$url" >"$dir/README.amibuild-rehearsal"
            if [[ $base == aws-efa-installer-* ]]; then
                # the EFA installer's bundle: its installer script, which installs nothing here
                mkdir -p "$dir/aws-efa-installer"
                printf '#!/bin/sh\necho "EFA installer (amibuild rehearsal placeholder): nothing installed"\n' \
                    >"$dir/aws-efa-installer/efa_installer.sh"
                chmod 0755 "$dir/aws-efa-installer/efa_installer.sh"
            fi
            if [[ $base == *.tar ]]; then
                tar --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$dir" -cf "$out" .
            else
                tar --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$dir" -cf - . | gzip -n >"$out"
            fi
            rm -rf "$dir" ;;
        *.zip)
            command -v zip >/dev/null || gap "$url (needs zip on this machine to write an archive)"
            local dir
            dir=$(mktemp -d)
            printf 'placeholder for %s, written by the amibuild rehearsal\n' "$url" >"$dir/README.amibuild-rehearsal"
            if [[ $base == awscli-exe-* ]]; then
                # AWS CLI v2's bundle: its installer; the aws stand-in plays the installed CLI
                mkdir -p "$dir/aws"
                printf '#!/bin/sh\necho "You can now run: /usr/local/bin/aws --version (amibuild rehearsal placeholder)"\n' >"$dir/aws/install"
                chmod 0755 "$dir/aws/install"
            fi
            find "$dir" -exec touch -h -d @315532800 {} +
            rm -f "$out"
            (cd "$dir" && zip -X -q -r "$out" .)
            rm -rf "$dir" ;;
        *.json) printf '{}\n' >"$out" ;;
        *)
            # A binary: asked for its version (`version` answers JSON, as Kubernetes' helpers do), it
            # gives the Kubernetes version in the URL's path, if any.
            local version=0.0.0 part label=${base%.*}
            for part in ${url//\// }; do
                [[ $part =~ ^v?([0-9]+\.[0-9]+(\.[0-9]+)?)$ ]] && version=${BASH_REMATCH[1]}
            done
            [[ $version == *.*.* ]] || version="${version}.0"
            case $label in kubelet | kubectl | kube-proxy) label=Kubernetes ;; esac
            {
                printf '#!/bin/sh\n# placeholder for %s, written by the amibuild rehearsal\n' "$url"
                # shellcheck disable=SC2016  # $1 belongs to the written script
                printf 'if [ "${1:-}" = version ]; then echo '"'"'{"Version":"v%s","Commit":"amibuild-rehearsal"}'"'"'; ' "$version"
                printf 'else echo "%s v%s"; fi\n' "$label" "$version"
            } >"$out" ;;
    esac
}

metadata() {
    local path=${1#*169.254.169.254}
    case $path in
        /latest/api/token) printf 'AQAEAamibuild-rehearsal-token==' ;;
        */meta-data/ami-id) printf 'ami-0123456789abcdef0' ;;
        */meta-data/instance-id) printf 'i-0123456789abcdef0' ;;
        */meta-data/instance-type) printf 'm5.large' ;;
        */meta-data/placement/region) printf 'us-west-2' ;;
        */meta-data/placement/availability-zone) printf 'us-west-2a' ;;
        */meta-data/local-ipv4) printf '10.0.0.10' ;;
        */meta-data/local-hostname) printf 'ip-10-0-0-10.us-west-2.compute.internal' ;;
        */meta-data/mac) printf '0e:00:00:00:00:01' ;;
        */meta-data/services/domain) printf 'amazonaws.com' ;;
        */meta-data/services/partition) printf 'aws' ;;
        */vpc-ipv4-cidr-block | */vpc-ipv4-cidr-blocks) printf '10.0.0.0/16' ;;
        */dynamic/instance-identity/document)
            printf '{"region":"us-west-2","instanceId":"i-0123456789abcdef0","instanceType":"m5.large","imageId":"ami-0123456789abcdef0","accountId":"123456789012","availabilityZone":"us-west-2a"}' ;;
        *) return 1 ;;
    esac
}

download() {  # URL OUT ("-" = stdout)
    local url=$1 out=$2 tmp
    tmp=$(mktemp)
    if [[ $url == *169.254.169.254* ]]; then
        metadata "$url" >"$tmp" || { rm -f "$tmp"; gap "$url (instance metadata path)"; }
    else
        fake_content "$url" "$tmp"
    fi
    if [[ $out == - ]]; then
        cat "$tmp"
        rm -f "$tmp"
    else
        mv "$tmp" "$out"
        chmod 0644 "$out"
    fi
}

curl_tool() {
    local out=- url="" remote_name=0 create_dirs=0 arg
    while (($#)); do
        arg=$1
        shift
        case $arg in
            -o | --output) out=$1; shift ;;
            -O | --remote-name) remote_name=1 ;;
            --create-dirs) create_dirs=1 ;;
            -H | --header | -X | --request | -w | --write-out | --retry | --retry-delay | --retry-max-time | \
                --connect-timeout | -m | --max-time | -u | --user | -A | --user-agent | -e | --referer | \
                -d | --data | --data-raw | --proxy | -x | --cacert | --noproxy) shift ;;
            --version | -V) printf 'curl 8.3.0 (amibuild rehearsal stand-in)\n'; return 0 ;;
            -*) ;;
            *) url=$arg ;;
        esac
    done
    [[ -n $url ]] || gap "(no URL)"
    if ((remote_name)); then
        out=${url%%\?*}
        out=${out##*/}
    fi
    if [[ $out != - ]] && ((create_dirs)); then mkdir -p -- "$(dirname -- "$out")"; fi
    download "$url" "$out"
}

wget_tool() {
    local out="" dir=. url="" arg
    while (($#)); do
        arg=$1
        shift
        case $arg in
            -O | --output-document) out=$1; shift ;;
            -P | --directory-prefix) dir=$1; shift ;;
            --header | -t | --tries | -T | --timeout | --user | --password) shift ;;
            -O?*) out=${arg#-O} ;;
            -*) ;;
            *) url=$arg ;;
        esac
    done
    [[ -n $url ]] || gap "(no URL)"
    if [[ -z $out ]]; then
        out=${url%%\?*}
        out="${dir}/${out##*/}"
    fi
    download "$url" "$out"
}

aws_tool() {
    local args=() arg
    while (($#)); do
        arg=$1
        shift
        case $arg in
            --region | --profile | --endpoint-url | --output | --query) shift ;;
            --no-sign-request | --quiet | --only-show-errors | --no-progress | --debug) ;;
            --version) printf 'aws-cli/2.15.0 (amibuild rehearsal stand-in)\n'; return 0 ;;
            *) args+=("$arg") ;;
        esac
    done
    case "${args[0]:-} ${args[1]:-}" in
        "s3 cp")
            local src=${args[2]:-} dest=${args[3]:-}
            [[ $src == s3://* && -n $dest ]] || gap "${args[*]}"
            if [[ -d $dest || $dest == */ || $dest == . ]]; then dest="${dest%/}/${src##*/}"; fi
            download "$src" "$dest"
            printf 'download: %s to %s\n' "$src" "$dest" ;;
        "ecr get-login-password" | "ecr-public get-login-password")
            # a registry password for `nerdctl login` / `ctr --user AWS:...` (pulls are stood in)
            printf 'AMIBUILDREHEARSALPASSWORD\n' ;;
        "sts get-caller-identity")
            printf '{"UserId":"AIDAREHEARSAL","Account":"123456789012","Arn":"arn:aws:iam::123456789012:user/rehearsal"}\n' ;;
        *) gap "${args[*]}" ;;
    esac
}

# This machine's uname, with the variant's architecture and an Amazon Linux kernel release (the
# kernel the chain installed, if it did) in place of this machine's.
uname_tool() {
    local arch real host_arch host_release release line
    rpm_arch
    line=$(installed_line kernel)
    release="$(plain_version "${line#*$'\t'}").${arch}"
    [[ -n $line ]] || release="5.10.210-201.852.amzn2.${arch}"
    real=$(/usr/bin/uname "$@")
    host_arch=$(/usr/bin/uname -m)
    host_release=$(/usr/bin/uname -r)
    real=${real//$host_release/$release}
    printf '%s\n' "${real//$host_arch/$arch}"
}

sudo_tool() {
    # Like sudo on the build instance: the build user may run anything without a password; the
    # environment is reset unless -E (or --preserve-env) is given; -S reads no password, as a
    # NOPASSWD rule does not ask for one.
    local keep=0 arg
    while (($#)); do
        case $1 in
            -S | -n | -H | -k | -P | --stdin | --non-interactive) shift ;;
            -E | --preserve-env) keep=1; shift ;;
            --preserve-env=*) keep=1; shift ;;
            -u | --user)
                [[ $2 == root ]] || gap "-u $2 $*"
                shift 2 ;;
            -i | -s | --login | --shell) gap "$*" ;;
            --) shift; break ;;
            -*) gap "$*" ;;
            *) break ;;
        esac
    done
    (($#)) || gap "(no command)"
    local assignments=()
    while (($#)) && [[ $1 == [A-Za-z_]*=* ]]; do
        assignments+=("$1")
        shift
    done
    local path="${AMIBUILD_REHEARSE_BIN:-/.amibuild-rehearse/bin}:/sbin:/bin:/usr/sbin:/usr/bin"
    # the rehearsal's own variables pass, so the ERR hook still finds the step's scripts
    local own=()
    for arg in AMIBUILD_REHEARSE_STATE AMIBUILD_REHEARSE_BIN AMIBUILD_REHEARSE_SCRIPTS BASH_ENV; do
        [[ -n ${!arg:-} ]] && own+=("${arg}=${!arg}")
    done
    # The build user keeps only CAP_SETUID/SETGID (see runner.sh): becoming root again is sudo's part.
    local become=()
    if ((EUID != 0)); then
        become=(setpriv --reuid=0 --regid=0 --init-groups --)
    fi
    if ((keep)); then
        exec "${become[@]}" env "PATH=$path" HOME=/root USER=root LOGNAME=root "SUDO_USER=${USER:-ec2-user}" \
            "${assignments[@]}" "$@"
    fi
    exec "${become[@]}" env -i "PATH=$path" HOME=/root USER=root LOGNAME=root SHELL=/bin/bash "TERM=${TERM:-dumb}" \
        "LANG=${LANG:-C.UTF-8}" "SUDO_USER=${USER:-ec2-user}" "SUDO_COMMAND=$*" "${own[@]}" \
        "${assignments[@]}" "$@"
}

# A command an installed package provides, asked only for its version (chains record versions in
# /etc/eks/*-version.txt): the version asked for at install, else 0.0.0. Anything else is a gap.
version_answer() {
    local line version=""
    case ${1:-} in
        --version | -v | -V | version)
            line=$(installed_line "$tool")
            [[ -n $line ]] && version=$(plain_version "${line#*$'\t'}")
            printf '%s version %s (rehearsal stand-in)\n' "$tool" "${version:-0.0.0}" ;;
        *) return 1 ;;
    esac
}

# ------------------------------------------------------------------------------ containers

# nerdctl: the only container run a chain makes is upstream's AL2023 nodeadm build (`nerdctl run
# ... --volume SRC:/workdir IMAGE make build`), which needs the image and the network. It is stood
# in: a stand-in nodeadm (and every other command of SRC/cmd/) goes where `make build` leaves its
# binaries, SRC/_bin/, and the step is marked stood in. Any other run is a gap.
nerdctl_tool() {
    local sub=${1:-}
    shift || true
    case $sub in
        run) nerdctl_run "$@" ;;
        rmi | pull | login | logout | tag) ;;
        image | images)
            case ${1:-} in
                prune | rm | pull | "") ;;
                -a | ls | list) ;;
                *) gap "$sub $*" ;;
            esac ;;
        --version | -v | version) printf 'nerdctl version 1.7.0 (amibuild rehearsal stand-in)\n' ;;
        *) gap "$sub $*" ;;
    esac
}

nerdctl_run() {
    local all="run $*" workdir="" mounts=() arg
    while (($#)); do
        arg=$1
        shift
        case $arg in
            -v | --volume) mounts+=("$1"); shift ;;
            -w | --workdir) workdir=$1; shift ;;
            --network | --net | -e | --env | --name | -u | --user | --entrypoint | --platform | --mount | \
                --env-file | --pull | --cpus | -m | --memory) shift ;;
            --volume=* | -v=*) mounts+=("${arg#*=}") ;;
            --workdir=*) workdir=${arg#*=} ;;
            -*) ;;
            *) break ;;  # the image; the command follows
        esac
    done
    local command="$*"
    [[ $command == "make build" || $command == "make build "* ]] || gap "$all"
    local mount source=""
    for mount in "${mounts[@]}"; do
        if [[ ${mount#*:} == "${workdir:-/workdir}" || ${mount#*:} == "${workdir:-/workdir}":* ]]; then
            source=${mount%%:*}
        fi
    done
    [[ -n $source && -d $source ]] || gap "$all (no source folder mounted at its workdir)"
    in_copy || return 0
    local names=() dir name
    for dir in "$source"/cmd/*/; do
        [[ -d $dir ]] || continue
        name=$(basename -- "$dir")
        [[ $name == *wasm* ]] || names+=("$name")
    done
    ((${#names[@]})) || names=(nodeadm)
    mkdir -p -- "$source/_bin"
    for name in "${names[@]}"; do
        {
            printf '#!/bin/bash\n'
            printf '# %s stood in by the amibuild rehearsal for the binary "%s" builds on the instance\n' "$name" "$command"
            printf 'exec -a %s /.amibuild-rehearse/standin.sh "$@"\n' "$name"
        } >"$source/_bin/$name"
        chmod 0755 "$source/_bin/$name"
    done
    printf '%s\t%s stood in at %s/_bin/ for "nerdctl %s"\n' "$step" "${names[*]}" "$source" "$all" >>"$state/stood_in"
    printf 'amibuild rehearsal: stood in for the build in a container: %s\n' "${names[*]}"
}

# ctr (containerd's client): image pulls, tags and labels are recorded; the images a chain pulled
# or tagged are listed back (state: images); an export writes a placeholder archive, as a cached
# pause image leaves one.
ctr_tool() {
    local args=() arg
    while (($#)); do
        arg=$1
        shift
        case $arg in
            -n | --namespace | -a | --address) shift ;;
            --namespace=* | -n=*) ;;
            *) args+=("$arg") ;;
        esac
    done
    [[ ${args[0]:-} == image || ${args[0]:-} == images || ${args[0]:-} == i ]] || gap "${args[*]}"
    local sub=${args[1]:-} rest=("${args[@]:2}") names=() word
    for word in "${rest[@]}"; do
        [[ $word == -* || $word == *=* && $sub == label ]] || names+=("$word")
    done
    case $sub in
        pull) [[ ${#names[@]} -ge 1 ]] || gap "${args[*]}"; note_image "${names[-1]}" ;;
        tag) [[ ${#names[@]} -ge 2 ]] || gap "${args[*]}"; note_image "${names[1]}" ;;
        label) ;;
        export)
            [[ ${#names[@]} -ge 2 ]] || gap "${args[*]}"
            if in_copy; then
                local dir
                dir=$(mktemp -d)
                printf 'placeholder for %s, written by the amibuild rehearsal\n' "${names[*]:1}" >"$dir/README.amibuild-rehearsal"
                tar --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$dir" -cf "${names[0]}" .
                rm -rf "$dir"
            fi ;;
        ls | list)
            if [[ " ${rest[*]} " == *" -q "* ]]; then
                cat "$state/images" 2>/dev/null || true
            else
                printf 'REF TYPE DIGEST SIZE PLATFORMS LABELS\n'
                while IFS= read -r word; do printf '%s - - - - -\n' "$word"; done <"$state/images" 2>/dev/null || true
            fi ;;
        rm | remove | prune) ;;
        *) gap "${args[*]}" ;;
    esac
}

note_image() {
    grep -qxF -- "$1" "$state/images" 2>/dev/null || printf '%s\n' "$1" >>"$state/images"
}

# gpg: keys imported are recorded; a signature checked against them is good (downloads here are
# placeholders, and the chain's own check of a real signature is what the build instance does).
gpg_tool() {
    local arg
    for arg in "$@"; do
        case $arg in
            --import) printf 'gpg: key imported (amibuild rehearsal stand-in)\n' >&2; return 0 ;;
            --verify) printf 'gpg: Good signature (amibuild rehearsal stand-in)\n' >&2; return 0 ;;
            --version) printf 'gpg (GnuPG) 2.3.7 (amibuild rehearsal stand-in)\n'; return 0 ;;
        esac
    done
    gap "$*"
}

# ------------------------------------------------------------------------------ dispatch

case $tool in
    yum | dnf) package_manager "$@" ;;
    yum-config-manager) config_manager "$@" ;;
    rpm) rpm_tool "$@" ;;
    amazon-linux-extras) extras "$@" ;;
    systemctl) systemctl_tool "$@" ;;
    service) systemctl_tool "${2:-}" "${1:-}" ;;  # service NAME ACTION (how the clean-up stops auditd)
    chkconfig) chkconfig_tool "$@" ;;
    curl) curl_tool "$@" ;;
    wget) wget_tool "$@" ;;
    aws) aws_tool "$@" ;;
    uname) uname_tool "$@" ;;
    sudo) sudo_tool "$@" ;;
    nerdctl) nerdctl_tool "$@" ;;
    ctr) ctr_tool "$@" ;;
    gpg | gpg2) gpg_tool "$@" ;;
    iptables-save | ip6tables-save) printf '*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n' ;;
    sysctl)
        # reads come from the copy's /proc/sys (read-only); writes and reloads are recorded only
        case ${1:-} in
            -w | -p | --system | --load) ;;
            -n) cat "/proc/sys/${2//.//}" ;;
            *) gap "$*" ;;
        esac ;;
    # recorded only: boot-time, kernel and cluster tools with nothing to answer here
    modprobe | cfn-signal | reboot | shutdown | poweroff | grubby | dracut | package-cleanup | ethtool | \
        ipvsadm | mdadm | udevadm | hostnamectl | setenforce | sleep | update-ca-trust | restorecon | \
        mount | swapoff | iptables | ip6tables) ;;
    *) version_answer "$@" || gap "$*" ;;
esac
