#!/usr/bin/env bash
# Send the build instance's, and later the node's, outbound HTTP(S) through a proxy.
#
# Packer's shell provisioner passes configuration only through the environment:
#   AMIBUILD_HTTP_PROXY   proxy URL for http:// traffic (http:// or https://; may be empty)
#   AMIBUILD_HTTPS_PROXY  proxy URL for https:// traffic (http:// or https://; may be empty)
#   AMIBUILD_NO_PROXY     comma-separated hosts, domains, IPs or CIDRs that bypass the proxy
#   AMIBUILD_ROOT         prefix for every path touched (empty on a real build; tests use a temp dir)
#
# With both proxies empty nothing is touched. Otherwise the script sets proxy= in the [main]
# section of yum.conf / dnf.conf (whichever exist), the six proxy variables in /etc/environment,
# and systemd drop-ins for containerd, docker, kubelet, AL2's sandbox-image (the kubelet requires
# it; its `aws ecr get-login-password` needs the proxy) and nodeadm's two units (nodeadm-config
# runs before cloud-init, so user data comes too late for it on the first boot), then reloads
# systemd so later provisioners (image pulls, say) already go through the proxy. One proxy given
# serves both http:// and https:// traffic. NO_PROXY always holds the instance metadata service,
# the ECS/EKS Pod Identity agent, loopback and EC2's .internal names, and, from every boot on,
# the VPC's CIDRs: amibuild-proxy-vpc.service reads them from instance metadata before nodeadm,
# containerd and the kubelet start, into /etc/environment and an EnvironmentFile the drop-ins
# read. All input is checked before anything is written. Proxy URLs may carry credentials, so
# progress lines never print them and error messages mask the user-info part.
# The script is self-contained (Packer uploads each provisioner script on its own), hence the
# small helpers repeated across amibuild/render/provision/. Amazon Linux 2 runs bash 4.2, where expanding
# an empty "${array[@]}" under `set -u` is an error, so arrays here are never empty when expanded.
set -euo pipefail
# Bracket ranges such as [A-Z] only mean ASCII letters in the C locale.
export LC_ALL=C
umask 022

log() { printf 'amibuild: %s\n' "$*"; }
die() { printf 'amibuild: error: %s\n' "$*" >&2; exit 1; }
# Quote a value for a message; control characters are shown escaped rather than sent to the log.
show() { if [[ $1 == *[[:cntrl:]]* ]]; then printf '%q' "$1"; else printf "'%s'" "$1"; fi; }

# http://user:secret@host:3128 -> http://***@host:3128
redact() {
    local re='^([A-Za-z]+://)[^/]*@(.*)$'
    if [[ $1 =~ $re ]]; then
        printf '%s***@%s' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
    else
        printf '%s' "$1"
    fi
}

# An http(s) URL with a host part and nothing that could end a line or a quoted value in the
# files written below.
valid_url() {
    local url=$1
    [[ $url == http://?* || $url == https://?* ]] || return 1
    [[ $url != *[[:space:][:cntrl:]\'\"\\\`]* ]]
}

root="${AMIBUILD_ROOT:-}"
if [[ -n $root && $root != /* ]]; then
    die "AMIBUILD_ROOT must be empty or an absolute path, got $(show "$root")"
fi

want_http="${AMIBUILD_HTTP_PROXY:-}"
want_https="${AMIBUILD_HTTPS_PROXY:-}"
want_no_proxy="${AMIBUILD_NO_PROXY:-}"

if [[ -z $want_http && -z $want_https ]]; then
    log "no proxy requested"
    exit 0
fi

for var in AMIBUILD_HTTP_PROXY AMIBUILD_HTTPS_PROXY; do
    url="${!var:-}"
    if [[ -n $url ]] && ! valid_url "$url"; then
        die "${var} must be an http(s) URL without spaces, quotes, backslashes or backticks, got $(show "$(redact "$url")")"
    fi
done

# A proxy URL with user:password@ in it: every file it goes into is made root's alone before it is
# written (mode 600, as the user data's boothook does), not left readable by every user of a node.
userinfo_re='^[A-Za-z]+://[^/]*@'
private=0
if [[ $want_http =~ $userinfo_re || $want_https =~ $userinfo_re ]]; then private=1; fi
protect() { if (( private )); then : >>"$1"; chmod 600 "$1"; fi; }

# One proxy given serves both kinds of traffic: containerd and the kubelet pull over https.
if [[ -z $want_https ]]; then want_https=$want_http; fi
if [[ -z $want_http ]]; then want_http=$want_https; fi

# Host names, *.wildcards, .domains, IPv4/IPv6 addresses and CIDRs, optional :port. Empty items
# (a trailing comma, say) and repeats are dropped so the list written out is canonical. The
# always-bypassed entries come last: metadata (169.254.169.254), container credentials
# (169.254.170.2) and the EKS Pod Identity agent (169.254.170.23), loopback and EC2's private names (.internal).
no_proxy_entry_re='^[][A-Za-z0-9._*:/-]+$'
bypass=""
rest="${want_no_proxy},169.254.169.254,169.254.170.2,169.254.170.23,localhost,127.0.0.1,.internal"
while [[ -n $rest ]]; do
    entry="${rest%%,*}"
    if [[ $rest == *,* ]]; then rest="${rest#*,}"; else rest=""; fi
    [[ -z $entry ]] && continue
    [[ $entry =~ $no_proxy_entry_re ]] \
        || die "AMIBUILD_NO_PROXY entry $(show "$entry") is not a host, domain, address or CIDR"
    [[ ",${bypass}," == *",${entry},"* ]] && continue
    bypass="${bypass:+${bypass},}${entry}"
done

# NAME=value pairs in the order they are written; empty values are left out.
settings=()
for name in HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy https_proxy no_proxy; do
    case "$name" in
        HTTP_PROXY | http_proxy) value=$want_http ;;
        HTTPS_PROXY | https_proxy) value=$want_https ;;
        *) value=$bypass ;;
    esac
    if [[ -n $value ]]; then
        settings+=("${name}=${value}")
    fi
done

# Set key=value in the [main] section of an ini-style file. The line goes straight after the
# first [main] header and every other key= line in [main] is dropped, so a second run changes
# nothing and an old value never survives next to the new one.
set_main_option() {
    local file=$1 key=$2 value=$3
    local line section="" placed=0
    local key_re="^[[:space:]]*${key}[[:space:]]*="
    local header_re='^[[:space:]]*\[([^]]*)\]'
    local -a out=()
    while IFS= read -r line || [[ -n $line ]]; do
        if [[ $line =~ $header_re ]]; then
            section=${BASH_REMATCH[1]}
            out+=("$line")
            if [[ $section == main ]] && (( ! placed )); then
                out+=("${key}=${value}")
                placed=1
            fi
        elif [[ $section == main && $line =~ $key_re ]]; then
            continue
        else
            out+=("$line")
        fi
    done <"$file"
    if (( ! placed )); then
        out+=("[main]" "${key}=${value}")
    fi
    protect "$file"
    printf '%s\n' "${out[@]}" >"$file"
}

pkg_proxy=${want_https:-$want_http}
for conf in "${root}/etc/yum.conf" "${root}/etc/dnf/dnf.conf"; do
    if [[ -f $conf ]]; then
        set_main_option "$conf" proxy "$pkg_proxy"
        log "set proxy in ${conf}"
    fi
done

# /etc/environment: drop every existing line for the six names, keep the rest, append ours.
env_file="${root}/etc/environment"
env_re='^[[:space:]]*(export[[:space:]]+)?(HTTP_PROXY|HTTPS_PROXY|NO_PROXY|http_proxy|https_proxy|no_proxy)='
env_lines=()
if [[ -f $env_file ]]; then
    while IFS= read -r line || [[ -n $line ]]; do
        [[ $line =~ $env_re ]] || env_lines+=("$line")
    done <"$env_file"
else
    mkdir -p -- "${root}/etc"
fi
env_lines+=("${settings[@]}")
protect "$env_file"
printf '%s\n' "${env_lines[@]}" >"$env_file"
log "set proxy variables in ${env_file}"

# systemd expands %-specifiers inside Environment= values, so a literal % (percent-encoded
# credentials) must be doubled there. The EnvironmentFile, written at boot with the VPC's CIDRs
# in NO_PROXY, overrides the Environment= lines it repeats (systemd reads it last).
vpc_env=/run/amibuild/proxy-vpc.env
dropin=("[Service]")
for setting in "${settings[@]}"; do
    dropin+=("Environment=\"${setting//%/%%}\"")
done
dropin+=("EnvironmentFile=-${vpc_env}")
for unit in containerd docker kubelet sandbox-image nodeadm-config nodeadm-run; do
    dir="${root}/etc/systemd/system/${unit}.service.d"
    mkdir -p -- "$dir"
    protect "${dir}/http-proxy.conf"
    printf '%s\n' "${dropin[@]}" >"${dir}/http-proxy.conf"
    log "wrote ${dir}/http-proxy.conf"
done

# At every boot, before nodeadm, containerd and the kubelet: the VPC's IPv4 CIDRs from instance
# metadata (IMDSv2, never through the proxy) go in front of NO_PROXY, in the EnvironmentFile and
# /etc/environment. The VPC is only known on the node, not while the image is built.
mkdir -p -- "${root}/etc/amibuild"
printf '%s\n' "$bypass" >"${root}/etc/amibuild/proxy-no-proxy"
# (read -d '' and printf rather than cat: the script needs no tool beyond bash and mkdir)
IFS= read -r -d '' boot_script <<'AMIBUILD_VPC' || true
#!/bin/bash
# Written by amibuild's configure-proxy.sh: put this VPC's CIDRs in front of the image's NO_PROXY.
set -euo pipefail
root=${AMIBUILD_ROOT:-}
imds_curl() {
    curl --silent --show-error --fail --noproxy '*' --connect-timeout 2 \
        --retry 10 --retry-delay 1 --retry-connrefused "$@"
}
token=$(imds_curl -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token)
imds() {
    imds_curl -H "X-aws-ec2-metadata-token: ${token}" "http://169.254.169.254/latest/meta-data/$1"
}
mac=$(imds mac)
cidrs=$(imds "network/interfaces/macs/${mac}/vpc-ipv4-cidr-blocks" | paste -s -d , -)
if [[ -z $cidrs ]]; then
    echo "amibuild: error: instance metadata gave no VPC CIDR for ${mac}" >&2
    exit 1
fi
no_proxy="${cidrs},$(cat "${root}/etc/amibuild/proxy-no-proxy")"
mkdir -p "${root}/run/amibuild"
printf 'NO_PROXY=%s\nno_proxy=%s\n' "$no_proxy" "$no_proxy" >"${root}/run/amibuild/proxy-vpc.env"
env_file="${root}/etc/environment"
kept=$(grep -v -E '^[[:space:]]*(export[[:space:]]+)?(NO_PROXY|no_proxy)=' "$env_file" || [[ $? -eq 1 ]])
{
    if [[ -n $kept ]]; then
        printf '%s\n' "$kept"
    fi
    printf 'NO_PROXY=%s\nno_proxy=%s\n' "$no_proxy" "$no_proxy"
} >"$env_file"
AMIBUILD_VPC
printf '%s' "$boot_script" >"${root}/etc/amibuild/proxy-vpc-cidr.sh"
IFS= read -r -d '' boot_unit <<'AMIBUILD_UNIT' || true
[Unit]
Description=amibuild: the VPC's CIDRs in the proxy's NO_PROXY
After=systemd-networkd-wait-online.service
Before=cloud-init.service nodeadm-config.service nodeadm-run.service containerd.service docker.service kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/bash /etc/amibuild/proxy-vpc-cidr.sh

[Install]
WantedBy=multi-user.target
AMIBUILD_UNIT
printf '%s' "$boot_unit" >"${root}/etc/systemd/system/amibuild-proxy-vpc.service"
log "wrote ${root}/etc/systemd/system/amibuild-proxy-vpc.service"

if command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload
    systemctl enable amibuild-proxy-vpc.service
    log "reloaded systemd units, enabled amibuild-proxy-vpc.service"
else
    log "systemctl not on PATH; skipped daemon-reload and enabling amibuild-proxy-vpc.service"
fi
