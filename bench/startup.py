"""Start-up: `import anodize` and the first `to_device` of an f32 array, beyond NumPy's import.

Each sample is a fresh interpreter (`python -X importtime` would time imports only):

    base:    import numpy
    anodize: import numpy; import anodize; az.device("cpu").to_device(np.ones(1000, np.float32))

The figure is min(anodize) - min(base) over the samples (the minimum: the machine's other
work only ever adds time).  The target is <= 50 ms; ml_dtypes (a bf16 host dtype, seconds to
import) must not load on this path, and the script fails if it does.  The CPU device keeps
CUDA's own start-up (a driver's context, not anodize's) out of the figure.  It also prints
the same difference in the interpreters' CPU time (user + system, from `getrusage`), which a
loaded machine inflates far less than the wall clock (at load 14 on the 2-core VM: 201 ms of
wall time, 20 ms of CPU time).

    python bench/startup.py [samples]
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time

BASE = "import numpy"
ANODIZE = (
    "import sys, numpy as np, anodize as az\n"
    "az.device('cpu').to_device(np.ones(1000, np.float32))\n"
    "assert 'ml_dtypes' not in sys.modules, 'ml_dtypes was imported'\n"
)


def sample(code: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh interpreter running `code`."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main(samples: int = 7) -> float:
    bases = [sample(BASE) for _ in range(samples)]
    fulls = [sample(ANODIZE) for _ in range(samples)]
    base, full = min(w for w, _ in bases), min(w for w, _ in fulls)
    extra_ms = (full - base) * 1000
    cpu_ms = (min(c for _, c in fulls) - min(c for _, c in bases)) * 1000
    print(f"numpy import: {base * 1000:.0f} ms; + import anodize + first f32 to_device: {full * 1000:.0f} ms")
    print(f"anodize's start-up beyond NumPy's: {extra_ms:.0f} ms (target <= 50 ms), min of {samples} fresh interpreters")
    print(f"the same in CPU time (user + system): {cpu_ms:.0f} ms")
    return extra_ms


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
