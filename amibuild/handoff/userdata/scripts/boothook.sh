#cloud-boothook
#!/bin/bash
# Written by amibuild: send yum/dnf, login shells, @UNIT_LIST@ through an HTTP proxy.
# cloud-init runs boothooks early at every boot, before the container runtime and the kubelet
# start. Each file is rewritten whole, so a reboot or a changed proxy leaves no stale line.
set -euo pipefail

proxy=@PROXY@
# systemd expands %-specifiers in Environment= values, so a literal % is doubled there.
proxy_unit=@PROXY_UNIT@
no_proxy_rest=@NO_PROXY_REST@
units=(@UNITS@)
dropin_units=(@DROPIN_UNITS@)
root=${AMIBUILD_ROOT:-}

# The VPC's IPv4 CIDRs from instance metadata (IMDSv2), never through a proxy, retried while
# the network settles.
imds_curl() {
    curl --silent --show-error --fail --noproxy '*' --connect-timeout 2 \
        --retry 10 --retry-delay 1 --retry-connrefused "$@"
}
token=$(imds_curl -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' \
    http://169.254.169.254/latest/api/token)
imds() {
    imds_curl -H "X-aws-ec2-metadata-token: ${token}" "http://169.254.169.254/latest/meta-data/$1"
}
mac=$(imds mac)
vpc_cidrs=$(imds "network/interfaces/macs/${mac}/vpc-ipv4-cidr-blocks" | paste -s -d , -)
if [[ -z $vpc_cidrs ]]; then
    echo "amibuild: error: instance metadata gave no VPC CIDR for ${mac}" >&2
    exit 1
fi
no_proxy="${vpc_cidrs},${no_proxy_rest}"

# yum (al2) and dnf (al2023): proxy= straight after the [main] header, older proxy= lines in
# [main] dropped. Writing through the path keeps yum.conf a link to dnf.conf where it is one.
for conf in "${root}/etc/yum.conf" "${root}/etc/dnf/dnf.conf"; do
    [[ -f $conf ]] || continue
    updated=$(awk -v setting="proxy=${proxy}" '
        /^[[:space:]]*\[/ {
            in_main = ($0 ~ /^[[:space:]]*\[main\][[:space:]]*$/)
            print
            if (in_main && !placed) { print setting; placed = 1 }
            next
        }
        in_main && /^[[:space:]]*proxy[[:space:]]*=/ { next }
        { print }
        END { if (!placed) { print "[main]"; print setting } }
    ' "$conf")
    printf '%s\n' "$updated" >"$conf"
done

# /etc/environment (login shells, PAM): the six variables replace any earlier lines for them.
env_file="${root}/etc/environment"
mkdir -p "${root}/etc"
kept=""
if [[ -f $env_file ]]; then
    kept=$(grep -v -E '^[[:space:]]*(export[[:space:]]+)?(HTTPS?_PROXY|NO_PROXY|https?_proxy|no_proxy)=' \
        "$env_file" || [[ $? -eq 1 ]])
fi
{
    if [[ -n $kept ]]; then
        printf '%s\n' "$kept"
    fi
    printf '%s\n' "HTTP_PROXY=${proxy}" "HTTPS_PROXY=${proxy}" "NO_PROXY=${no_proxy}" \
        "http_proxy=${proxy}" "https_proxy=${proxy}" "no_proxy=${no_proxy}"
} >"$env_file"

for unit in "${dropin_units[@]}"; do
    dir="${root}/etc/systemd/system/${unit}.service.d"
    mkdir -p "$dir"
    cat >"${dir}/http-proxy.conf" <<EOF
[Service]
Environment="HTTP_PROXY=${proxy_unit}"
Environment="HTTPS_PROXY=${proxy_unit}"
Environment="NO_PROXY=${no_proxy}"
Environment="http_proxy=${proxy_unit}"
Environment="https_proxy=${proxy_unit}"
Environment="no_proxy=${no_proxy}"
EOF
done

# Units already running keep their old environment: reload, then restart them without waiting,
# since this hook runs in the middle of boot.
systemctl daemon-reload
for unit in "${units[@]}"; do
    if systemctl is-active --quiet "${unit}.service"; then
        systemctl --no-block restart "${unit}.service"
    fi
done
