"""vtl's CuPy backend (NVIDIA GPUs): the ``Backend`` object in ``backend.py``, the
namespace adjustments in ``namespace.py``/``linalg.py`` and its kernels (``conv.py``,
``pool.py``, ``nn.py``, ``rnn.py``, ``optim.py``, ``random.py``). Importing this package does
not import CuPy; loading the backend does."""

from .backend import CupyBackend

__all__ = ["CupyBackend"]
