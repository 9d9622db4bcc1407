"""The requests (flags) of the node tasks: userdata, decode-userdata, aws-auth, rollout,
nodegroup-deploy. Their jobs: `node_commands`."""

from dataclasses import dataclass

from amibuild.request import JSON_HELP, K8S_HELP, flag, like
from amibuild.request import MARKDOWN_HELP
from amibuild.jobs.requests_build import Output, Selection


@dataclass(frozen=True)
class UserdataRequest:
    """`amibuild userdata`."""

    cluster: str = flag("EKS cluster name", "")
    variant: str | None = flag("Variant whose image the nodes run: its OS, and with --proxy its proxy "
                               "{ credentials_parameter }, from the pipeline file (a flag wins)")
    os: str = flag("Node operating system: al2023 (nodeadm) or al2 (bootstrap.sh) (default: the --variant's, "
                   "else al2023)", "")
    pipeline: str | None = like(Selection, "pipeline")
    proxy: str = flag("HTTP(S) proxy URL for yum/dnf, /etc/environment, containerd, docker and the kubelet", "")
    no_proxy: tuple[str, ...] = flag("Extra NO_PROXY entry: host, .domain, address or CIDR (repeatable, or "
                                     "comma-separated)", repeat=True)
    proxy_credentials_parameter: str = flag(
        "SSM SecureString (user:password) the node reads at boot with its role and puts into the --proxy URL, "
        "which then has no credentials (e.g. /amibuild/proxy-creds)", "")
    service_cidr: str = flag("Cluster service CIDR (al2023 default: read with DescribeCluster; al2: both EKS "
                             "defaults in NO_PROXY)", "")
    cluster_ip: str = flag("ClusterIP of the `kubernetes` service, to pick 10.100.0.0/16 or 172.20.0.0/16", "")
    region: str = flag("Region of the cluster, for the regional endpoints in NO_PROXY (default: AWS_REGION)", "")
    bypass: tuple[str, ...] = flag("AWS service whose regional endpoint bypasses the proxy: eks, ec2, ecr, s3, sts, "
                                   "or none (repeatable; default: all)", repeat=True)
    bootstrap_args: str = flag("Extra arguments for /etc/eks/bootstrap.sh, quoted as for a shell (al2; checked "
                               "against bootstrap.sh's options: --use-max-pods false, not --use-max-pods=false)", "")
    kubelet_flag: tuple[str, ...] = flag("Kubelet flag --name=value, no spaces or quotes (repeatable)", repeat=True)
    node_label: tuple[str, ...] = flag("Node label KEY=VALUE for the kubelet to register (repeatable)", repeat=True)
    taint: tuple[str, ...] = flag("Taint KEY=VALUE:EFFECT (or KEY:EFFECT) for the kubelet to register; EFFECT "
                                  "NoSchedule, PreferNoSchedule or NoExecute (repeatable)", repeat=True)
    max_pods: str = flag("Most pods the kubelet runs (al2023: kubelet config maxPods; al2: --max-pods with "
                         "--use-max-pods false)", "")
    max_pods_expression: str = flag(
        "al2023: a CEL expression nodeadm turns into max pods, over default_enis, ips_per_eni and max_pods, e.g. "
        "\"max_pods < 30 ? max_pods : 30\" (checked here; not with --max-pods)", "")
    api_server_endpoint: str = flag("Cluster API endpoint, https://... (al2023; default: read with DescribeCluster)",
                                    "")
    certificate_authority: str = flag("Cluster CA as base64, as describe-cluster prints it (al2023; default: read "
                                      "with DescribeCluster)", "")
    cfn_stack: str = flag("Stack to signal with the node's outcome: after bootstrap.sh (al2), once the kubelet runs "
                          "(al2023); with --cfn-resource", "")
    cfn_resource: str = flag("Logical ID of the resource in --cfn-stack that waits for the signal", "")
    private_endpoint: bool = flag("The cluster has private endpoint access: its endpoint bypasses the proxy "
                                  "(default: not; aws eks describe-cluster --query "
                                  "cluster.resourcesVpcConfig.endpointPrivateAccess)", False)
    k8s_manifests: bool = flag("Print the kube-system proxy ConfigMap and daemonset patches instead (needs --proxy)",
                               False)
    vpc_cidr: tuple[str, ...] = flag("VPC CIDR for the ConfigMap's NO_PROXY (with --k8s-manifests; repeatable)",
                                     repeat=True)
    base64: bool = flag("Print the user data base64-encoded, as a launch template's UserData takes it", False)


@dataclass(frozen=True)
class DecodeUserdataRequest:
    """`amibuild decode-userdata SOURCE`."""

    source: str | None = flag("File with the user data, or - for stdin: raw, base64, gzip, MIME, cloud-config, or "
                              "EC2 / CloudFormation JSON or YAML holding a UserData field (or a bare UserData value)",
                              positional=True)
    stack: bool = flag("SOURCE names a CloudFormation stack: decode its template's user data with the references "
                       "filled in from the stack's parameters", False)
    region: str | None = flag("Region of the stack with --stack (default: AWS_REGION / the profile's region)")
    profile: str | None = like(Output, "profile")
    json: bool = flag("Print the parts as JSON on stdout", False)
    max_bytes: int = flag("Most bytes to read, and to decode over all layers (base64, gzip, MIME parts) "
                          "(default 1048576: 1 MiB)", 0)


@dataclass(frozen=True)
class AwsAuthRequest:
    """`amibuild aws-auth`."""

    role_arn: str = flag("IAM role ARN of the nodes (e.g. the node group stack's NodeInstanceRole output)", "")
    stack: str = flag("Node group stack whose NodeInstanceRole output is the role (instead of --role-arn)", "")
    region: str | None = flag("Region of the stack (default: AWS_REGION / the profile's region)")
    profile: str | None = like(Output, "profile")
    access_entry: bool = flag("Create the EKS access entry (type EC2_LINUX) for the role in --cluster instead "
                              "(eks:CreateAccessEntry; nothing happens when an EC2_LINUX one exists)", False)
    cluster: str = flag("EKS cluster for --access-entry", "")


@dataclass(frozen=True)
class NodesRequest:
    """The flags rollout and nodegroup-deploy share."""

    variant: str | None = flag("Variant whose channel to roll to (default: the pipeline's only variant with "
                               "--channel; with --stack and neither, the SSM parameter the stack names now)")
    region: str | None = flag("Region of the stack or cluster (default: AWS_REGION / the profile's region)")
    timeout: str | None = flag("Stop waiting after this long: seconds, or 30m, 2h (default 2h); the update itself goes on")
    pipeline: str | None = like(Selection, "pipeline")
    k8s: str | None = flag(K8S_HELP)
    profile: str | None = like(Output, "profile")
    json: bool = flag(JSON_HELP, False)


@dataclass(frozen=True)
class RolloutRequest(NodesRequest):
    """`amibuild rollout`."""

    stack: str | None = flag("Node group stack to roll (made by `amibuild nodegroup-deploy`, or from the classic "
                             "EKS node group template)")
    nodegroup: str | None = flag("EKS managed node group CLUSTER/NAME whose launch template names the image "
                                 "(instead of --stack)")
    channel: str | None = flag("Channel of the variant to roll to (default: recommended)")
    dry_run: bool = flag("Create the change set, print what would change, delete it: change nothing", False)
    no_wait: bool = flag("Return once the update has started instead of following it to the end", False)
    markdown: bool = flag(MARKDOWN_HELP, False)


@dataclass(frozen=True)
class DeployRequest(NodesRequest):
    """`amibuild nodegroup-deploy`."""

    stack: str | None = flag("Stack to create or update (required)")
    cluster: str | None = flag("EKS cluster the nodes join (ClusterName; required to create)")
    variant: str | None = flag("Variant whose channel the nodes run: NodeImageIdSSMParam names that channel's "
                               "parameter (default: the pipeline's only variant with --channel)")
    channel: str | None = flag("Channel of the variant (default: recommended)")
    vpc_id: str | None = flag("VPC of the cluster (VpcId; required to create)")
    subnet: tuple[str, ...] = flag("Subnet for the nodes (Subnets; repeatable or comma-separated; required to "
                                   "create)", repeat=True)
    control_plane_sg: str | None = flag("The cluster's control plane security group "
                                        "(ClusterControlPlaneSecurityGroup; required to create)")
    nodegroup_name: str | None = flag("NodeGroupName, used in resource names (default on create: the stack name)")
    parameter: tuple[str, ...] = flag("Another template parameter KEY=VALUE, e.g. NodeInstanceType=m6i.large "
                                      "(repeatable); on update every parameter not given keeps its value",
                                      repeat=True)
    proxy: str = flag("HTTP(S) proxy for the nodes: their user data comes from `amibuild userdata` (boothook, "
                      "bootstrap, cfn-signal); the stack keeps it (HttpProxy) until `--proxy none` removes it", "")
    no_proxy: tuple[str, ...] = flag("Extra NO_PROXY entry for the nodes (repeatable or comma-separated; kept by "
                                     "the stack; none removes them)", repeat=True)
    proxy_credentials_parameter: str = flag(
        "SSM SecureString (user:password) the nodes read at boot for --proxy, whose URL then has no credentials; the "
        "node role may read it (kept by the stack; none removes it; default: the variant's proxy "
        "{ credentials_parameter })", "")
    kubelet_flag: tuple[str, ...] = flag("Kubelet flag --name=value for the nodes, no spaces or quotes (repeatable; "
                                         "kept by the stack; none removes them)", repeat=True)
    node_label: tuple[str, ...] = flag("Node label KEY=VALUE (repeatable; kept by the stack; none removes them)",
                                       repeat=True)
    taint: tuple[str, ...] = flag("Node taint KEY=VALUE:EFFECT or KEY:EFFECT (repeatable; kept by the stack; none "
                                  "removes them)", repeat=True)
    max_pods: str = flag("Most pods per node (kept by the stack; none: the AMI's default)", "")
    max_pods_expression: str = flag("al2023: a CEL expression nodeadm turns into max pods (default_enis, "
                                    "ips_per_eni, max_pods; kept by the stack in place of --max-pods; none removes "
                                    "it)", "")
    service_cidr: str = flag("Cluster service CIDR (default: read with DescribeCluster; for NO_PROXY and al2023's "
                             "NodeConfig)", "")
    os: str = flag("Node OS: al2 (bootstrap.sh) or al2023 (nodeadm); default: the variant's, else the stack's, else "
                   "al2023", "")
    private_endpoint: bool = flag("With --proxy: the cluster endpoint bypasses the proxy, as for private endpoint "
                                  "access (default: what DescribeCluster says, else not)", False)
    api_server_endpoint: str = flag("Cluster API endpoint for al2023 nodes (default: read with DescribeCluster)", "")
    certificate_authority: str = flag("Cluster CA (base64) for al2023 nodes (default: read with DescribeCluster)",
                                      "")
    no_wait: bool = flag("Return once CloudFormation has started instead of following the stack's events", False)
    dry_run: bool = flag("Check and read everything, print the create or update (parameters) that would be sent, "
                         "send nothing", False)
