"""hashmap: a GPU hash table with open addressing, built with `compare_exchange`, in the safe tier.

The table is two `AtomicSlice[u32]`s of the same length: keys (every slot starts as
`EMPTY`) and values.  To insert, a thread hashes its key and walks the slots from
there (linear probing): `keys.compare_exchange(slot, EMPTY, key)` claims an empty
slot, or finds the key already there; either way the slot is the key's and the value
is stored next to it.  A lookup walks the same way until it meets the key or an empty
slot.  Inserting and looking up are separate launches, so relaxed atomics suffice:
the launch boundary orders them.

Keys are any u32 but `EMPTY` (0xFFFFFFFF); a missing key looks up as `NOT_FOUND`.
"""

import numpy as np

import anodize as az
from anodize import AtomicSlice, DisjointSlice, Slice, func, i64, kernel, launch_contract, thread, u32

EMPTY = 0xFFFFFFFF
NOT_FOUND = 0xFFFFFFFF


@func
def home(key: u32, slots: i64) -> i64:
    """The key's first slot: a multiplicative (Fibonacci) hash, wrapped to 32 bits."""
    return i64(key * u32(2654435769)) % slots


@launch_contract(
    domain=1, block=256,
    requires=lambda keys, values, table_keys, table_values: len(keys) == len(values) and len(table_keys) == len(table_values),
)
@kernel
def insert(keys: Slice[u32], values: Slice[u32], table_keys: AtomicSlice[u32], table_values: AtomicSlice[u32]) -> None:
    for t in thread.grid_stride(keys):
        key = keys[t]
        slots = len(table_keys)
        slot = home(key, slots)
        probes = 0
        while probes < slots:
            prev = table_keys.compare_exchange(slot, EMPTY, key)
            if prev == EMPTY or prev == key:
                table_values.store(slot, values[t])
                break
            slot = (slot + 1) % slots
            probes += 1


@launch_contract(
    domain=1, block=256,
    requires=lambda queries, table_keys, table_values, found: len(queries) == len(found) and len(table_keys) == len(table_values),
)
@kernel
def lookup(queries: Slice[u32], table_keys: AtomicSlice[u32], table_values: AtomicSlice[u32], found: DisjointSlice[u32]) -> None:
    for t in thread.grid_stride(found):
        key = queries[t]
        slots = len(table_keys)
        slot = home(key, slots)
        result = u32(NOT_FOUND)
        probes = 0
        while probes < slots:
            k = table_keys.load(slot)
            if k == key:
                result = table_values.load(slot)
                break
            if k == EMPTY:
                break
            slot = (slot + 1) % slots
            probes += 1
        found[t] = result


def main(n: int = 1 << 20) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(7)
    keys_h = rng.choice(EMPTY, size=n, replace=False).astype(np.uint32)  # distinct, never EMPTY
    values_h = np.arange(n, dtype=np.uint32)
    absent = np.setdiff1d(rng.integers(0, EMPTY, n // 4, dtype=np.uint32), keys_h)
    queries_h = np.concatenate([rng.permutation(keys_h), absent])

    table_keys = dev.empty(2 * n, az.u32)
    table_keys.fill(EMPTY)
    table_values = dev.zeros(2 * n, az.u32)
    cfg = az.LaunchConfig(grid=512, block=256)
    insert[cfg](dev.to_device(keys_h), dev.to_device(values_h), table_keys, table_values)
    found = dev.empty(len(queries_h), az.u32)
    lookup[cfg](dev.to_device(queries_h), table_keys, table_values, found)
    res = found.to_host()

    ref = dict(zip(keys_h.tolist(), values_h.tolist(), strict=True))
    want = np.fromiter((ref.get(q, NOT_FOUND) for q in queries_h.tolist()), np.uint32, len(queries_h))
    np.testing.assert_array_equal(res, want)
    stored = table_keys.to_host()
    np.testing.assert_array_equal(np.sort(stored[stored != EMPTY]), np.sort(keys_h))  # each key exactly once
    print(f"hashmap on {dev.describe()}: {n} keys inserted, {len(queries_h)} lookups ({len(absent)} absent) match a dict")
    return res


if __name__ == "__main__":
    main()
