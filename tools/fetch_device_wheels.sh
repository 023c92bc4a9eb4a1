#!/usr/bin/env bash
# Download the cp312 wheels the H200 machine lacks (no registry there): filecheck for the FileCheck
# tests, mpmath for the math ulp references, hypothesis (+attrs, sortedcontainers) for the property
# tests, ml_dtypes for bf16 host buffers, pytest-xdist (+execnet) for the default run's two workers. The compile path needs nothing beyond llvmlite and cuda-python: the checker runs on Python's ast.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl filecheck==1.0.6 mpmath hypothesis attrs sortedcontainers ml_dtypes pytest-xdist execnet
