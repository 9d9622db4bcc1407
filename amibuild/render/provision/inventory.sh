#!/usr/bin/env bash
# amibuild inventory: every installed package, one a line on stdout, tab-separated:
#   name epoch version release arch repository license
# rpm gives all but the repository ("(none)" for no epoch); dnf/yum's `list installed` gives the
# repository each came from (its third column, "@amazonlinux"), joined on name.arch.
set -euo pipefail
export LC_ALL=C
tab=$'\t'
query="%{NAME}${tab}%{EPOCH}${tab}%{VERSION}${tab}%{RELEASE}${tab}%{ARCH}${tab}%{LICENSE}\n"
rpm -qa --queryformat "$query" | sort >/tmp/amibuild-inventory.rpm
manager=yum
command -v dnf >/dev/null 2>&1 && manager=dnf
# `list installed` wraps a long name onto its own line: such a line is joined with the next
"$manager" -q list installed 2>/dev/null \
    | awk 'NF == 1 && $1 ~ /\./ { held = $1; next } { if (held != "") { $0 = held " " $0; held = "" } print }' \
    | awk -v OFS='\t' 'NF >= 3 { repo = $3; sub(/^@/, "", repo); print $1, repo }' >/tmp/amibuild-inventory.repos || true
awk -F'\t' -v OFS='\t' '
    FILENAME == ARGV[1] { repo[$1] = $2; next }
    { license = ($6 == "(none)") ? "" : $6; print $1, $2, $3, $4, $5, repo[$1 "." $5], license }
' /tmp/amibuild-inventory.repos /tmp/amibuild-inventory.rpm
rm -f /tmp/amibuild-inventory.rpm /tmp/amibuild-inventory.repos
