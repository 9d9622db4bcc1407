#!/usr/bin/env bash
echo hardening
