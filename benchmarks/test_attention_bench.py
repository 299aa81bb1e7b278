"""Attention benchmark: ``scaled_dot_product_attention`` forward + backward (f32) at batch
32, 8 heads, head dim 64, sequence 512 and 2048, vtl against PyTorch CUDA (TF32 off) in the
same run; the peak device memory of one step is recorded in ``extra_info`` (``peak_mib``).

``VTL_BENCH_QUICK=1`` uses batch 1, 2 heads and sequences 16 and 64 (a smoke run).
"""

from __future__ import annotations

import numpy as np
import pytest

import vtl
from benchmarks.conftest import QUICK, Ref, cases, on_cpu, peak_mib
from vtl.nn import functional as F

BATCH, HEADS, DIM = (1, 2, 64) if QUICK else (32, 8, 64)
SEQS = (16, 64) if QUICK else (512, 2048)
CASES = cases(refs=("torch",), keep=lambda b: QUICK or not on_cpu(b))


@pytest.mark.parametrize("seq", SEQS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("backend", "impl"), CASES)
def test_sdpa_forward_backward(benchmark, backend, impl, seq, causal):
    benchmark.group = f"sdpa-{BATCH}x{HEADS}x{seq}x{DIM}{'-causal' if causal else ''}-{backend}"
    rng = np.random.default_rng(0)
    shape = (BATCH, HEADS, seq, DIM)
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
    ref = Ref(backend, impl)
    if impl == "vtl":
        q, k, v = (vtl.asarray(a, backend=backend, requires_grad=True) for a in arrays[:3])
        g = vtl.asarray(arrays[3], backend=backend)

        def run():
            for t in (q, k, v):
                t.grad = None
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            out.backward(g)
            return out
    else:
        torch = ref.xp
        q, k, v = (ref.asarray(a).requires_grad_(True) for a in arrays[:3])
        g = ref.asarray(arrays[3])

        def run():
            for t in (q, k, v):
                t.grad = None
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            out.backward(g)
            return out

    run()
    peak = peak_mib(backend, impl, run)
    if peak is not None:
        benchmark.extra_info["peak_mib"] = round(peak, 1)

    def timed():
        out = run()
        ref.sync()
        return out

    benchmark(timed)
