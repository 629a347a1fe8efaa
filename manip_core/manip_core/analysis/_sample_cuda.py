"""numba.cuda kernel of the Monte Carlo workspace samples: one thread per sample, the device function compiled
from the same Python function as the CPU kernel (_sample_kernels.tip_sample), so both give the same numbers.
Imported only when device="cuda" is asked for."""
from numba import cuda

from ._sample_kernels import tip_sample

device_sample = cuda.jit(device=True)(tip_sample)


@cuda.jit
def kernel(mf, mi, lo, span, seed, k0, approach, pos, dbin):
    t = cuda.grid(1)
    if t < pos.shape[0]:
        device_sample(mf, mi, lo, span, seed, k0 + t, approach, pos, dbin, t)


def run(mf, mi, lo, span, seed, k0, approach, pos, dbin, threads=256):
    """Fill pos (n, 3) and dbin (n,) (host arrays) with samples k0 .. k0 + n - 1."""
    n = pos.shape[0]
    d_pos = cuda.device_array_like(pos)
    d_bin = cuda.device_array_like(dbin)
    kernel[(n + threads - 1) // threads, threads](
        cuda.to_device(mf), cuda.to_device(mi), cuda.to_device(lo), cuda.to_device(span), seed, k0, approach,
        d_pos, d_bin)
    cuda.synchronize()
    d_pos.copy_to_host(pos)
    d_bin.copy_to_host(dbin)
