#!/bin/bash
# Written by amibuild: tell stack @STACK_TEXT@ whether this node joined its cluster. nodeadm starts
# the kubelet after cloud-init has run this part, so waiting here would hold up the very boot it
# waits for: the wait goes to a systemd unit, started without blocking.
set -euo pipefail
root=${AMIBUILD_ROOT:-}
mkdir -p "${root}/etc/amibuild" "${root}/etc/systemd/system"
cat >"${root}/etc/amibuild/cfn-signal.sh" <<'AMIBUILD_SIGNAL'
#!/bin/bash
# Report the node's outcome: SUCCESS once the kubelet runs, FAILURE if nodeadm failed or the
# kubelet is not running after @WAIT@ seconds.
set -uo pipefail
root=${AMIBUILD_ROOT:-}
stack=@STACK@
resource=@RESOURCE@
region=@REGION@
proxy=@PROXY@
status=FAILURE
deadline=$((SECONDS + @WAIT@))
if [[ -z $proxy ]]; then  #@CREDENTIALS
    echo "amibuild: error: no proxy: the boothook could not read its credentials (see cloud-init's log)" >&2  #@CREDENTIALS
    deadline=$SECONDS  #@CREDENTIALS
fi  #@CREDENTIALS
while ((SECONDS < deadline)); do
    if systemctl is-failed --quiet nodeadm-run.service; then
        break
    fi
    if systemctl is-active --quiet kubelet.service; then
        status=SUCCESS
        break
    fi
    sleep 5
done
code=1
if [[ $status == SUCCESS ]]; then
    code=0
fi
if [[ -x "${root}/opt/aws/bin/cfn-signal" ]]; then
    extra=()
    if [[ -n $proxy ]]; then
        extra=(--https-proxy "$proxy")
    fi
    exec "${root}/opt/aws/bin/cfn-signal" --exit-code "$code" --stack "$stack" --resource "$resource" \
        --region "$region" "${extra[@]}"
fi
# Without cfn-signal (not on every AL2023 image), the AWS CLI signals with the node role, which
# the node group template allows cloudformation:SignalResource on its own stack.
imds_curl() {
    curl --silent --show-error --fail --noproxy '*' --connect-timeout 2 --retry 5 --retry-connrefused "$@"
}
token=$(imds_curl -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token)
instance=$(imds_curl -H "X-aws-ec2-metadata-token: ${token}" http://169.254.169.254/latest/meta-data/instance-id)
exec aws cloudformation signal-resource --stack-name "$stack" --logical-resource-id "$resource" \
    --unique-id "$instance" --status "$status" --region "$region"
AMIBUILD_SIGNAL
cat >"${root}/etc/systemd/system/amibuild-cfn-signal.service" <<'AMIBUILD_UNIT'
[Unit]
Description=amibuild: tell CloudFormation whether this node joined its cluster
After=nodeadm-run.service

[Service]
Type=oneshot
# The proxy settings the boothook wrote, for the AWS CLI.
EnvironmentFile=-/etc/environment
ExecStart=/bin/bash /etc/amibuild/cfn-signal.sh
AMIBUILD_UNIT
systemctl daemon-reload
systemctl --no-block start amibuild-cfn-signal.service
