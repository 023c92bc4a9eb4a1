#!/usr/bin/env bash
# Build the carry folder .cutile/ for the device: NVIDIA cuTile Python (cuda-tile 1.7.0) and the three
# CUDA 13.4 tools it needs on the lent machine (driver 580 = CUDA 13.0, Python 3.12, no registry), cut
# down from their PyPI wheels and packed as one .tar.xz (the device's `run` carries at most 64 MiB in all):
#   py/cuda/tile, py/cutile_cache      cuda.tile's Python package (the cp312 wheel, whole)
#   cu13/bin/tileiras                  the Tile IR compiler (nvidia-cuda-tileiras 13.4.92)
#   cu13/bin/ptxas                     tileiras runs it from its PATH (nvidia-cuda-nvcc 13.4.92; 13.0's is too old)
#   cu13/lib/libnvvm.so.4              tileiras loads it from ../lib (nvidia-nvvm 13.4.92)
#   cu13/nvvm/libdevice/libdevice.10.bc, cu13/License.txt
# The wheels are pinned by version and sha256 (pip --require-hashes); the tarball is reproducible (sorted
# names, mtime 0, uid 0, single-threaded xz with the x86 filter). On the device: bash tools/cutile_setup.sh.
# Usage: bash tools/fetch_cutile.sh    (several minutes: xz -9e of ~224 MB on one core)
set -euo pipefail
cd "$(dirname "$0")/.."
out=.cutile
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/req.txt" <<'EOF'
cuda-tile==1.7.0 --hash=sha256:f886e84a7b54de5e26598eb9a828387a4c87e6ab5b986838cd8a5277a9ffab40
nvidia-cuda-tileiras==13.4.92 --hash=sha256:c7ff33b56466f27258fdb6404d654686a391854dc922ff2d2aedac56dde35624
nvidia-cuda-nvcc==13.4.92 --hash=sha256:a1f3bfb27299e060b444d5df1f4bcd762501326cf0fd3141ed61756816ab9a0e
nvidia-nvvm==13.4.92 --hash=sha256:e4c81cb321dd9743bcf871c5e7e8fecd7f05dea607944426e102bdda8d49e137
EOF
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 \
  --platform manylinux2010_x86_64 --require-hashes -r "$work/req.txt" -d "$work/whl"
python3 - "$work" <<'EOF'
import os, shutil, sys, zipfile
from pathlib import Path
work = Path(sys.argv[1])
stage = work / "stage" / "cutile"
keep = {  # wheel name prefix -> {path in the wheel: path in the stage}
    "nvidia_cuda_tileiras": {"nvidia/cu13/bin/tileiras": "cu13/bin/tileiras"},
    "nvidia_cuda_nvcc": {"nvidia/cu13/bin/ptxas": "cu13/bin/ptxas"},
    "nvidia_nvvm": {"nvidia/cu13/lib/libnvvm.so.4": "cu13/lib/libnvvm.so.4",
                    "nvidia/cu13/nvvm/libdevice/libdevice.10.bc": "cu13/nvvm/libdevice/libdevice.10.bc",
                    "nvidia_nvvm-13.4.92.dist-info/licenses/License.txt": "cu13/License.txt"},
}
for whl in sorted((work / "whl").glob("*.whl")):
    with zipfile.ZipFile(whl) as z:
        if whl.name.startswith("cuda_tile-"):
            wanted = {n: "py/" + n for n in z.namelist() if not n.endswith("/") and "__pycache__" not in n}
        else:
            wanted = next(v for k, v in keep.items() if whl.name.startswith(k + "-"))
        for src, dst in wanted.items():
            p = stage / dst
            p.parent.mkdir(parents=True, exist_ok=True)
            with z.open(src) as f, open(p, "wb") as g:
                shutil.copyfileobj(f, g)
            os.chmod(p, 0o755 if "/bin/" in dst or dst.endswith(".so.4") else 0o644)
missing = [p for p in ("cu13/bin/tileiras", "cu13/bin/ptxas", "cu13/lib/libnvvm.so.4", "py/cuda/tile/__init__.py") if not (stage / p).is_file()]
if missing:
    sys.exit(f"fetch_cutile: missing from the wheels: {missing}")
EOF
find "$work/stage" -type d -exec chmod 755 {} +
mkdir -p "$out"
rm -f "$out/cutile.tar.xz" "$out/MANIFEST"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$work/stage" -cf - cutile \
  | xz --x86 --lzma2=preset=9e,dict=256MiB -T1 -c > "$out/cutile.tar.xz"
{
  echo "cuTile Python carry for the device, built by tools/fetch_cutile.sh; unpack with tools/cutile_setup.sh"
  sed 's/ --hash=/  /' "$work/req.txt"
  (cd "$work/stage" && find cutile -type f -printf '%s %p\n' | sort -k2)
} > "$out/MANIFEST"
(cd "$out" && sha256sum cutile.tar.xz > SHA256SUMS)
size=$(du -cb "$out" | tail -1 | cut -f1)
others=0
for d in .whl .whlnp; do if [ -d "$d" ]; then others=$(( others + $(du -sb "$d" | cut -f1) )); fi; done
echo "$out: $size bytes ($(( size / 1048576 )) MiB); with the .whl/.whlnp here ($others bytes): $(( (size + others) / 1048576 )) MiB of the 64 MiB carry limit"
cat "$out/SHA256SUMS"
