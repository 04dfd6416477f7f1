#!/usr/bin/env bash
# Installs the Debian 12 packages graph-autofusion builds and tests with (see shared DESIGN.md).
# ocl-icd-opencl-dev: Debian's dnnl-config.cmake requires OpenCL (its GPU runtime is OCL), and apt does not pull it
# in with --no-install-recommends. chromium: the HTML report's test renders the page headless.
# As root it runs apt-get; otherwise it prints the exact command and exits non-zero.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config
      libonnx-dev libprotobuf-dev protobuf-compiler libdnnl-dev ocl-icd-opencl-dev nlohmann-json3-dev libcli11-dev
      libfmt-dev libssl-dev
      libgtest-dev libgmock-dev libbenchmark-dev libonnx-testdata graphviz
      pybind11-dev python3-dev python3-numpy chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "bootstrap: missing packages: ${missing[*]}" >&2
  echo "bootstrap: run as root: apt-get update && $cmd" >&2
  exit 1
fi
echo "bootstrap: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
$cmd
