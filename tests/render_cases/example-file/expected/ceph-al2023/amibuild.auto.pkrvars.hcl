# Resolved values for variant "ceph-al2023", written by amibuild 0.1.0.

ami_description             = "EKS 1.33 al2023 x86_64 worker, variant ceph-al2023, built by amibuild"
ami_name_prefix             = "eks-workers-ceph-al2023-1.33-x86_64"
ami_regions                 = ["us-west-2", "eu-west-1"]
ami_users                   = []
arch                        = "x86_64"
associate_public_ip_address = ""
encrypted                   = true
extra_packages              = ["ceph-common"]
extra_repos                 = ["ceph|https://download.ceph.com/rpm-reef/el9/$basearch|https://download.ceph.com/keys/release.asc"]
http_proxy                  = ""
https_proxy                 = ""
iam_instance_profile        = ""
instance_type               = "m5.large"
kms_key_id                  = ""
kubernetes_version          = "1.33"
no_proxy                    = ""
run_tags                    = {}
security_group_id           = ""
source_ami_filter_name      = "amazon-eks-node-al2023-x86_64-standard-1.33-v*"
source_ami_owners           = ["602401143452"]
source_amis                 = {}
ssh_interface               = ""
ssh_username                = "ec2-user"
subnet_id                   = ""
tags = {
  "amibuild:pipeline" = "eks-workers"
  team                = "platform"
}
volume_size = 30
volume_type = "gp3"
