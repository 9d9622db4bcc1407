# Resolved values for variant "default", written by amibuild 0.1.0.

ami_name              = "amibuild-default-1.29-arm64-{{timestamp}}"
ami_regions           = ""
ami_users             = ""
arch                  = "arm64"
aws_region            = "us-west-2"
extra_packages        = ["ceph-common"]
extra_repos           = []
http_proxy            = ""
https_proxy           = ""
instance_type         = "m6g.large"
kubernetes_build_date = "2024-02-01"
kubernetes_version    = "1.29"
no_proxy              = ""
tags = {
  "amibuild:pipeline" = "amibuild"
}
