"""Node user data: rendering (boothook, bootstrap, nodeadm) and decoding what EC2 holds."""
