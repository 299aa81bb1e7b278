"""Datasets: bundled (Iris, Digits), file loaders (MNIST, Fashion-MNIST, CIFAR-10,
IMDB) and synthetic sets (xor, two spirals, sine).

File loaders read the official formats from ``root`` (default: env
``VTL_DATA``, else the user cache folder, see :func:`default_root`); missing,
truncated or corrupt files raise ``ValueError`` naming the file. With
``download=True`` archives are checked against their official MD5 and unpacked
atomically (into a hidden ``.<archive>.partial-*`` folder, renamed into place
only when complete), so an interrupted run never leaves a half-unpacked folder
that a later call would load.
"""

from . import synthetic, text
from ._common import default_root
from .bundled import Digits, Iris
from .cifar import CIFAR10
from .imdb import IMDB
from .mnist import MNIST, FashionMNIST, read_idx
from .text import Tokenizer, Vocab

__all__ = ["CIFAR10", "IMDB", "MNIST", "Digits", "FashionMNIST", "Iris", "Tokenizer", "Vocab",
           "default_root", "read_idx", "synthetic", "text"]
