"""vtl shortens OpenBLAS's idle spin (``OPENBLAS_THREAD_TIMEOUT``) when it is imported
before NumPy, and leaves it alone when NumPy came first, when the process set it, or with
``VTL_SHORT_BLAS_SPIN=0``; ``vtl info`` says which."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PROBE = ("import os, vtl; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'));"
          "print(vtl.backends.get('numpy').info()['blas spin'])")


def _run(code: str, **env: str) -> list[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("OPENBLAS_THREAD_TIMEOUT", "VTL_SHORT_BLAS_SPIN")}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, check=True,
                         capture_output=True, text=True).stdout
    return out.strip().splitlines()


@pytest.mark.parametrize(("code", "env", "value", "says"), [
    (_PROBE, {}, "20", "2**20 cycles"),
    ("import numpy; " + _PROBE, {}, "None", "NumPy was imported before vtl"),
    (_PROBE, {"OPENBLAS_THREAD_TIMEOUT": "25"}, "25", "set by the process (25)"),
    (_PROBE, {"VTL_SHORT_BLAS_SPIN": "0"}, "None", "VTL_SHORT_BLAS_SPIN=0"),
])
def test_openblas_spin_setting(code, env, value, says):
    got, info = _run(code, **env)
    assert got == value
    assert says in info
