pipeline {
  name      = "global"
  regions   = ["us-east-1", "eu-west-1"]
  copy_to   = ["ap-southeast-2"]
  ami_users = ["111122223333"]
}

variant "base" {
  os                 = "al2"
  kubernetes_version = "1.30"
  scripts = ["harden.sh"]
}
