"""Which interleaved descriptors (data type x interleave x rank x innermost box x swizzle) the
driver's cuTensorMapEncodeTiled accepts on this GPU: one line per descriptor.

    PYTHONPATH=$PWD python3 bench/probe_tensormap_interleave.py
"""

from jittile.runtime import driver
from jittile.runtime.tensormap import TensorMapFields, encode

driver.ensure_context()
ptr = driver.alloc(1 << 24)
for dtype, _size in (
    ("uint8", 1),
    ("uint16", 2),
    ("uint32", 4),
    ("float32", 4),
    ("uint64", 8),
    ("float64", 8),
    ("int64", 8),
):
    for interleave in (1, 2):
        for rank in (3, 4, 5):
            for w in (1, 2, 8):
                for sw in (0, 1, 2, 3):
                    dims = (16, 4) + (2,) * (rank - 2)  # W, C_slices, N...
                    slice_b = 16 * interleave
                    strides = [slice_b * dims[0]]
                    for d in dims[1:-1]:
                        strides.append(strides[-1] * d)
                    box = (w, 1) + (1,) * (rank - 2)
                    f = TensorMapFields(
                        dtype, ptr, dims, tuple(strides), box, (1,) * rank, interleave, sw, 0, 0
                    )
                    try:
                        encode(f)
                        ok = "ok"
                    except Exception:
                        ok = "refused"
                    print(dtype, "il", interleave, "rank", rank, "box0", w, "sw", sw, ok)
