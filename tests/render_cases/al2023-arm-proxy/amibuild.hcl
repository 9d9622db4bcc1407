pipeline {
  name       = "proxied"
  ssm_prefix = "/platform/amis"
  regions    = ["eu-central-1"]
  tags = {
    owner = "platform@example.com"
  }
}

variant "iscsi" {
  os                 = "al2023"
  arch               = "arm64"
  kubernetes_version = "1.31"
  instance_type      = "c7g.large"
  extra_packages     = ["iscsi-initiator-utils", "device-mapper-multipath"]
  proxy {
    http     = "http://proxy.internal:3128"
    https    = "http://proxy.internal:3128"
    no_proxy = "10.0.0.0/8,.corp.example"
  }
  vars = {
    iam_instance_profile = "packer-builder"
  }
}
