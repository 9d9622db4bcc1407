# Resolved values for variant "ceph", written by amibuild 0.1.0.

ami_description             = "EKS 1.30 al2 x86_64 worker, variant ceph, built by amibuild"
ami_name_prefix             = "amibuild-ceph-1.30-x86_64"
ami_regions                 = ["us-west-2"]
ami_users                   = []
arch                        = "x86_64"
associate_public_ip_address = ""
encrypted                   = false
extra_packages              = ["ceph-common"]
extra_repos                 = []
http_proxy                  = ""
https_proxy                 = ""
iam_instance_profile        = ""
instance_type               = "m5.large"
kms_key_id                  = ""
kubernetes_version          = "1.30"
no_proxy                    = ""
run_tags                    = {}
security_group_id           = ""
source_ami_filter_name      = "amazon-eks-node-1.30-v*"
source_ami_owners           = ["602401143452"]
source_amis = {
  us-west-2 = "ami-0abcdef0123456789"
}
ssh_interface = ""
ssh_username  = "ec2-user"
subnet_id     = ""
tags = {
  "amibuild:pipeline" = "amibuild"
}
volume_size = 20
volume_type = "gp3"
