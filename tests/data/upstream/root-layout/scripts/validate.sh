#!/usr/bin/env bash
# test fixture: stands in for an upstream script
echo "validate"
