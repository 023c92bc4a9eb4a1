"""The debug device: the typed IR interpreted one GPU thread at a time (`interp.py`, `ops.py`),
launched with race and fault detection (`run.py`), with `breakpoint()` in a kernel (`breakpoint.py`)."""
