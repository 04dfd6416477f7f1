#!/usr/bin/env bash
# The CUDA kernels of every fused conformance group (gaf_conformance --emit-cuda) must compile for sm_90 with
# warnings as errors: generated code that does not compile fails CI, GPU or not.
#   compile_cuda.sh FILE.cu
set -u
src=$1
nvcc=${CUDACXX:-}
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
[ -z "$nvcc" ] && nvcc=$(command -v nvcc || true)
if [ -z "$nvcc" ]; then
  echo "compile_cuda: no nvcc (CUDACXX, /usr/local/cuda/bin, PATH): skipped"
  exit 0
fi
[ -s "$src" ] || { echo "compile_cuda: $src is missing or empty (run gaf_conformance --emit-cuda first)"; exit 1; }
kernels=$(grep -c '__global__' "$src")
[ "$kernels" -ge 100 ] || { echo "compile_cuda: only $kernels kernels in $src"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$nvcc" -arch=sm_90 -std=c++17 -Werror all-warnings -c "$src" -o "$tmp/k.o" >"$tmp/log" 2>&1; then
  head -50 "$tmp/log"
  echo "compile_cuda: FAILED ($kernels kernels in $src)"
  exit 1
fi
echo "compile_cuda: $kernels fused conformance kernels compile for sm_90 with -Werror"
