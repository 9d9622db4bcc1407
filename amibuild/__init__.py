"""amibuild: build, publish and roll out custom Amazon EKS worker-node AMIs with Packer."""

__version__ = "0.1.0"
