# Resolved values for variant "default", written by amibuild 0.1.0.

ami_description             = "EKS 1.29 al2 arm64 worker, variant default, built by amibuild"
ami_name_prefix             = "amibuild-default-1.29-arm64"
ami_regions                 = ["us-west-2"]
ami_users                   = []
arch                        = "arm64"
associate_public_ip_address = ""
encrypted                   = false
extra_packages              = ["ceph-common"]
extra_repos                 = []
http_proxy                  = ""
https_proxy                 = ""
iam_instance_profile        = ""
instance_type               = "m6g.large"
kms_key_id                  = ""
kubernetes_version          = "1.29"
no_proxy                    = ""
run_tags                    = {}
security_group_id           = ""
source_ami_filter_name      = "amazon-eks-arm64-node-1.29-v*"
source_ami_owners           = ["602401143452"]
source_amis                 = {}
ssh_interface               = ""
ssh_username                = "ec2-user"
subnet_id                   = ""
tags = {
  "amibuild:pipeline" = "amibuild"
}
volume_size = 20
volume_type = "gp3"
