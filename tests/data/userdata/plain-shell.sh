#!/bin/bash
set -ex
/etc/eks/bootstrap.sh dev-cluster --use-max-pods false --kubelet-extra-args '--max-pods=110'
