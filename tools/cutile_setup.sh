#!/usr/bin/env bash
# Unpack the carried cuTile Python (.cutile/cutile.tar.xz, built by tools/fetch_cutile.sh) on the device.
# Usage: bash tools/cutile_setup.sh [DEST]     (DEST: $CUTILE_HOME, else /tmp/cutile)
# The carry is looked for in $CUTILE_CARRY, ./.cutile and up to three folders above (a branch exported
# under the repository root), then the git top level. DEST gets py/ (cuda.tile) and cu13/ (tileiras,
# ptxas, libnvvm 13.4). Nothing is exported and PATH is left alone (anodize keeps its own ptxas):
# bench/cutile_peer.py reads CUTILE_HOME (default /tmp/cutile) and points cuTile's compiler at cu13/bin.
set -euo pipefail
dest=${1:-${CUTILE_HOME:-/tmp/cutile}}
carry=""
for d in "${CUTILE_CARRY:-}" .cutile ../.cutile ../../.cutile ../../../.cutile "$(git rev-parse --show-toplevel 2>/dev/null || true)/.cutile"; do
  if [ -n "$d" ] && [ -f "$d/cutile.tar.xz" ]; then carry=$d; break; fi
done
if [ -z "$carry" ]; then
  echo "cutile_setup: no .cutile/cutile.tar.xz here or above $(pwd): carry .cutile (build it with tools/fetch_cutile.sh)" >&2
  exit 1
fi
(cd "$carry" && sha256sum -c --quiet SHA256SUMS)
t0=$(date +%s.%N)
rm -rf "$dest"
mkdir -p "$dest"
if command -v xz >/dev/null; then
  tar -xJf "$carry/cutile.tar.xz" -C "$dest" --strip-components=1
else  # Python's lzma reads the same filter chain
  python3 - "$carry/cutile.tar.xz" "$dest" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    members = [m for m in t.getmembers() if "/" in m.name]
    for m in members:
        m.name = m.name.split("/", 1)[1]
    t.extractall(sys.argv[2], members=members, filter="data")
EOF
fi
for tool in tileiras ptxas; do
  v=$("$dest/cu13/bin/$tool" --version)
  case "$v" in *"release 13.4,"*) ;; *) echo "cutile_setup: $dest/cu13/bin/$tool is not 13.4: $v" >&2; exit 1;; esac
done
ver=$(python3 - "$dest/py" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
try:
    import cuda.tile as ct
except ImportError:  # a regular `cuda` package shadows the namespace (bench/cutile_peer.py does the same)
    import cuda
    cuda.__path__ = [*cuda.__path__, sys.argv[1] + "/cuda"]
    import cuda.tile as ct
print(ct.__version__)
EOF
)
echo "cuTile $ver, tileiras and ptxas 13.4 in $dest ($(du -sm "$dest" | cut -f1) MB unpacked in $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $t0 }") s, from $carry)"
