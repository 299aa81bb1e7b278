"""vtl's NumPy backend (the CPU): the ``Backend`` object in ``backend.py`` and its kernels
(``conv.py``, ``pool.py``, ``nn.py``, ``optim.py``, ``random.py``, ``scatter.py``)."""

from .backend import NumpyBackend

__all__ = ["NumpyBackend"]
