"""The CPU backend: the same lowering aimed at the host and JIT-compiled (`backend.py`); kernels
with barriers split at their synchronisation points into regions (`split.py`, `regions*.py`) or run
one host thread per GPU thread (`threads.py`)."""
