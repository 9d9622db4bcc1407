# amibuild pipeline file: which EKS worker AMIs to build, and where they go.
# Precedence: built-in defaults < this file (defaults, extended variants, the variant)
#             < --var-file files < flags (--k8s, --arch, ..., then --var KEY=VALUE).

pipeline {
  name       = "eks-workers"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"] # where Packer builds; --region overrides
  copy_to    = ["eu-west-1"] # where each image is copied afterwards
  ami_users  = []            # account ids to share the images with
  # SSM channel parameters; these are the defaults:
  # parameter_template = "{prefix}/{pipeline}/{k8s}/{variant}/{channel}/image_id"
  # default_channel    = "recommended"
  tags = {
    team = "platform"
  }
}

defaults {
  os                 = "al2"
  kubernetes_version = "1.30"
  volume_size        = 30
  volume_type        = "gp3"
  encrypted          = true
}

# Amazon Linux 2 with ceph-common from the Ceph yum repository (Octopus is the last
# release with el7 packages), so nodes can map Ceph RBD volumes.
variant "ceph" {
  extra_packages = ["ceph-common"]
  repo "ceph" {
    baseurl = "https://download.ceph.com/rpm-octopus/el7/$basearch"
    gpgkey  = "https://download.ceph.com/keys/release.asc"
  }
  repo "ceph-noarch" {
    baseurl = "https://download.ceph.com/rpm-octopus/el7/noarch"
    gpgkey  = "https://download.ceph.com/keys/release.asc"
  }
}

variant "ceph-arm" {
  extends = "ceph"
  arch    = "arm64"
}

# Amazon Linux 2023 (el9 packages) for Kubernetes versions past 1.32.
variant "ceph-al2023" {
  os                 = "al2023"
  kubernetes_version = "1.33"
  extra_packages     = ["ceph-common"]
  repo "ceph" {
    baseurl = "https://download.ceph.com/rpm-reef/el9/$basearch"
    gpgkey  = "https://download.ceph.com/keys/release.asc"
  }
}

variant "ceph-al2023-arm" {
  extends = "ceph-al2023"
  arch    = "arm64"
}

# The full eks-worker-al2 build from an amazon-eks-ami checkout at a pinned ref, with our
# provisioners added after its worker install. Point `upstream` at a local checkout to work offline.
variant "ceph-upstream" {
  extends      = "ceph"
  base         = "upstream"
  upstream     = "https://github.com/awslabs/amazon-eks-ami.git"
  upstream_ref = "v20240227"
}
