# Resolved values for variant "base", written by amibuild 0.1.0.

ami_description             = "EKS 1.30 al2 x86_64 worker, variant base, built by amibuild"
ami_name_prefix             = "global-base-1.30-x86_64"
ami_regions                 = ["us-east-1", "eu-west-1", "ap-southeast-2"]
ami_users                   = ["111122223333"]
arch                        = "x86_64"
associate_public_ip_address = ""
encrypted                   = false
extra_packages              = []
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
  eu-west-1 = "ami-0fedcba9876543210"
  us-east-1 = "ami-0fedcba9876543210"
}
ssh_interface = ""
ssh_username  = "ec2-user"
subnet_id     = ""
tags = {
  "amibuild:pipeline" = "global"
}
volume_size = 20
volume_type = "gp3"
