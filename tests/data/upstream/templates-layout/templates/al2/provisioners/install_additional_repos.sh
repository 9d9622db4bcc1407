#!/usr/bin/env bash
# test fixture: stands in for an upstream script
echo "install_additional_repos"
