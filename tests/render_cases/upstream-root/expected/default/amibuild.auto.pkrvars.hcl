# Resolved values for variant "default", written by amibuild 0.1.0.

ami_name              = "amibuild-default-1.30-x86_64-{{timestamp}}"
ami_regions           = ""
ami_users             = ""
arch                  = "x86_64"
aws_region            = "us-west-2"
containerd_version    = "1.7.11"
extra_packages        = ["ceph-common"]
extra_repos           = ["ceph|https://download.ceph.com/rpm-octopus/el7/x86_64|"]
http_proxy            = ""
https_proxy           = ""
instance_type         = "m5.large"
kubernetes_build_date = "2024-01-04"
kubernetes_version    = "1.30"
no_proxy              = ""
tags = {
  "amibuild:pipeline" = "amibuild"
}
