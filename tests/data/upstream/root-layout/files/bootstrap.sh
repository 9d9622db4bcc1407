#!/usr/bin/env bash
# test fixture
echo bootstrap
