# Resolved values for variant "iscsi", written by amibuild 0.1.0.

ami_description             = "EKS 1.31 al2023 arm64 worker, variant iscsi, built by amibuild"
ami_name_prefix             = "proxied-iscsi-1.31-arm64"
ami_regions                 = ["eu-central-1"]
ami_users                   = []
arch                        = "arm64"
associate_public_ip_address = ""
encrypted                   = false
extra_packages              = ["iscsi-initiator-utils", "device-mapper-multipath"]
extra_repos                 = []
http_proxy                  = "http://proxy.internal:3128"
https_proxy                 = "http://proxy.internal:3128"
iam_instance_profile        = "packer-builder"
instance_type               = "c7g.large"
kms_key_id                  = ""
kubernetes_version          = "1.31"
no_proxy                    = "10.0.0.0/8,.corp.example,localhost,127.0.0.1,169.254.169.254,169.254.170.2,169.254.170.23,.internal"
run_tags                    = {}
security_group_id           = ""
source_ami_filter_name      = "amazon-eks-node-al2023-arm64-standard-1.31-v*"
source_ami_owners           = ["602401143452"]
source_amis                 = {}
ssh_interface               = "session_manager"
ssh_username                = "ec2-user"
subnet_id                   = ""
tags = {
  "amibuild:pipeline" = "proxied"
  owner               = "platform@example.com"
}
volume_size = 50
volume_type = "gp3"
