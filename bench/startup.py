"""Start-up: `import anodize` and the first `to_device` of an f32 array, beyond NumPy's import.

Each sample is a fresh interpreter (`python -X importtime` would time imports only):

    base:    import numpy
    anodize: import numpy; import anodize; az.device("cpu").to_device(np.ones(1000, np.float32))

The figure is min(anodize) - min(base) over the samples (the minimum: the machine's other
work only ever adds time).  The target is <= 50 ms; ml_dtypes (a bf16 host dtype, seconds to
import) must not load on this path, and the script fails if it does.  The CPU device keeps
CUDA's own start-up (a driver's context, not anodize's) out of the figure.

    python bench/startup.py [samples]
"""

from __future__ import annotations

import subprocess
import sys
import time

BASE = "import numpy"
ANODIZE = (
    "import sys, numpy as np, anodize as az\n"
    "az.device('cpu').to_device(np.ones(1000, np.float32))\n"
    "assert 'ml_dtypes' not in sys.modules, 'ml_dtypes was imported'\n"
)


def sample(code: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - t


def main(samples: int = 7) -> float:
    base = min(sample(BASE) for _ in range(samples))
    full = min(sample(ANODIZE) for _ in range(samples))
    extra_ms = (full - base) * 1000
    print(f"numpy import: {base * 1000:.0f} ms; + import anodize + first f32 to_device: {full * 1000:.0f} ms")
    print(f"anodize's start-up beyond NumPy's: {extra_ms:.0f} ms (target <= 50 ms), min of {samples} fresh interpreters")
    return extra_ms


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
