# amibuild pipeline file, written by `amibuild init`: which EKS worker AMIs to build and where
# they go. `amibuild render` shows what Packer would get; `amibuild build-ami` builds and publishes.
# Precedence: built-in defaults < this file < --var-file files < flags (--k8s, --arch, ..., --var).

pipeline {
  name       = "eks-workers" # part of every channel's SSM parameter name
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"] # where Packer builds; --region overrides
  copy_to    = []            # regions each image is copied to afterwards
  ami_users  = []            # account ids to share the images with
}

# Settings every variant starts from.
defaults {
  kubernetes_version = "1.35"
  volume_size        = 30
  volume_type        = "gp3"
  encrypted          = true
}

# Amazon Linux 2023 with ceph-common from the Ceph repository (el9 packages), so nodes can
# map Ceph RBD volumes. Add more `variant "NAME" { ... }` blocks for other images; a variant can
# `extends = "OTHER"` and change only what differs (arch = "arm64", say).
variant "ceph-al2023" {
  os             = "al2023"
  extra_packages = ["ceph-common"]
  repo "ceph" {
    baseurl = "https://download.ceph.com/rpm-reef/el9/$basearch"
    gpgkey  = "https://download.ceph.com/keys/release.asc"
  }
}
