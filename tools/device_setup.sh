#!/usr/bin/env bash
# Prepare the lent H200 machine (no registry access): install carried wheels and anodize itself.
# Usage on the device: source tools/device_setup.sh   (needs .whl/ carried; see tools/fetch_device_wheels.sh)
set -e
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation --no-index . 2>&1 | tail -2
set +e
