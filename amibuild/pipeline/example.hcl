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
  # EKS publishes no Amazon Linux 2 image after Kubernetes 1.32: new node groups run AL2023.
  # Pick a version in EKS standard support (render, build-ami and doctor warn when one is not).
  os                 = "al2023"
  kubernetes_version = "1.35"
  volume_size        = 30
  volume_type        = "gp3"
  encrypted          = true
}

# Amazon Linux 2023 (el9 packages) with ceph-common from the Ceph repository, so nodes can map
# Ceph RBD volumes.
variant "ceph" {
  extra_packages = ["ceph-common"]
  repo "ceph" {
    baseurl = "https://download.ceph.com/rpm-reef/el9/$basearch"
    gpgkey  = "https://download.ceph.com/keys/release.asc"
  }
}

variant "ceph-arm" {
  extends = "ceph"
  arch    = "arm64"
}

# Amazon Linux 2, for clusters not yet moved: the last EKS AL2 images are for Kubernetes 1.32,
# past standard support (the warning says until when extended support lasts). Octopus is the last
# Ceph release with el7 packages.
variant "ceph-al2" {
  os                 = "al2"
  kubernetes_version = "1.32"
  extra_packages     = ["ceph-common"]
  repo "ceph" {
    baseurl = "https://download.ceph.com/rpm-octopus/el7/$basearch"
    gpgkey  = "https://download.ceph.com/keys/release.asc"
  }
  repo "ceph-noarch" {
    baseurl = "https://download.ceph.com/rpm-octopus/el7/noarch"
    gpgkey  = "https://download.ceph.com/keys/release.asc"
  }
}

# The full eks-worker-al2 build from an amazon-eks-ami checkout at a pinned ref, with our
# provisioners added after its worker install. It clones GitHub, so it is opt-in:
# `enabled = false` leaves it out of a run unless `--variant ceph-upstream` names it.
# Point `upstream` at a local checkout to work offline.
variant "ceph-upstream" {
  enabled      = false
  extends      = "ceph-al2"
  base         = "upstream"
  upstream     = "https://github.com/awslabs/amazon-eks-ami.git"
  upstream_ref = "v20240227"
}
