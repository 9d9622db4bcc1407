"""lifecycle: prune old images (never one in use) and the IAM policies of every task."""
