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
#@CREDENTIALS{

# The proxy's user:password come from an SSM SecureString, not from this user data: read with the
# instance role (the node group template allows ssm:GetParameter on exactly this name) before
# anything here uses the proxy. The AWS CLI is on the EKS-optimized AL2 and AL2023 images
# (amazon-eks-ami's templates/al2*/provisioners/install-worker.sh install awscli v2 into /bin, or the
# awscli package). Any failure stops here: no proxy setting is written, and cloud-init logs the line.
credentials_parameter=@CREDENTIALS_PARAMETER@
credentials_pattern=@CREDENTIALS_PATTERN@
region=$(imds placement/region)
if ! credentials=$(aws ssm get-parameter --with-decryption --name "$credentials_parameter" \
    --region "$region" --query Parameter.Value --output text); then
    echo "amibuild: error: cannot read the proxy credentials from SSM parameter ${credentials_parameter}" \
        "in ${region} with the instance role; no proxy setting written" >&2
    exit 1
fi
if [[ ! $credentials =~ $credentials_pattern ]]; then
    echo "amibuild: error: SSM parameter ${credentials_parameter} does not hold user:password" \
        "(letters, digits and . _ - ! * + , = % only); no proxy setting written" >&2
    exit 1
fi
proxy="${proxy%%://*}://${credentials}@${proxy#*://}"
proxy_unit=${proxy//"%"/"%%"}
unset credentials
# Each file that holds the credentials is made private before they are written into it.
private() {
    touch "$1"
    chmod 600 "$1"
}
#@CREDENTIALS}

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
    private "$conf"  #@CREDENTIALS
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
private "$env_file"  #@CREDENTIALS
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
    private "${dir}/http-proxy.conf"  #@CREDENTIALS
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
