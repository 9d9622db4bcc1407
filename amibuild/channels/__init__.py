"""channels: SSM parameters that name the current AMI of a variant, written in every region or none."""
