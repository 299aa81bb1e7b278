"""A shorter idle spin for NumPy's OpenBLAS, set when vtl is imported before NumPy.

After each product that used its worker threads, OpenBLAS keeps them spinning (yielding
the core in a loop) for about 2**28 clock cycles, a tenth of a second, waiting for the
next product. The NumPy backend runs its other kernels (convolution tiles, normalization,
optimizer steps...) on a thread pool of its own between products, and on a machine with
few cores those spinning threads took a third of its time: a small CNN's training step ran
1.5x slower. With ``OPENBLAS_THREAD_TIMEOUT`` at :data:`THREAD_TIMEOUT` (2**20 cycles,
well under a millisecond) the workers still wait through a loop of back-to-back products,
such as an RNN's time steps, and go to sleep soon after.

OpenBLAS reads the variable once, when NumPy loads it, so vtl can only set it when NumPy
is not imported yet; it leaves a value the process set itself alone, and
``VTL_SHORT_BLAS_SPIN=0`` turns this off. To get it when NumPy is imported
first, set ``OPENBLAS_THREAD_TIMEOUT=20`` in the environment.
"""

from __future__ import annotations

import os
import sys

from ._switches import turned_off

#: OpenBLAS's spin before its idle workers sleep: 2**THREAD_TIMEOUT clock cycles.
THREAD_TIMEOUT = "20"

_state = "not set"


def shorten_spin() -> None:
    """Set ``OPENBLAS_THREAD_TIMEOUT`` where it can take effect (see the module's note)."""
    global _state
    if turned_off("VTL_SHORT_BLAS_SPIN"):
        _state = "OpenBLAS's own (VTL_SHORT_BLAS_SPIN=0)"
    elif "OPENBLAS_THREAD_TIMEOUT" in os.environ:
        _state = f"set by the process ({os.environ['OPENBLAS_THREAD_TIMEOUT']})"
    elif "numpy" in sys.modules:
        _state = ("OpenBLAS's own: NumPy was imported before vtl "
                  "(set OPENBLAS_THREAD_TIMEOUT=20 to shorten it)")
    else:
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = THREAD_TIMEOUT
        _state = f"2**{THREAD_TIMEOUT} cycles (OPENBLAS_THREAD_TIMEOUT={THREAD_TIMEOUT})"


def state() -> str:
    """What ``vtl info`` says of OpenBLAS's idle spin."""
    return _state
