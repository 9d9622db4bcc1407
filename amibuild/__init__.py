"""amibuild: build, publish and roll out custom Amazon EKS worker-node AMIs with Packer."""

__version__ = "0.1.0"

# The pipeline file's default name (amibuild/locate.py looks for it, pipeline.load reads it).
PIPELINE_FILE = "amibuild.hcl"
