"""handoff: node group stacks, EKS managed node groups and node user data."""
