"""Small real datasets shipped inside the package (work offline).

* Iris: Fisher's iris measurements (150 x 4, 3 classes), UCI Machine Learning
  Repository, CC BY 4.0.
* Digits: Alpaydin & Kaynak's Optical Recognition of Handwritten Digits, the
  8x8 set (1797 x 64, pixel counts 0..16, 10 classes), UCI Machine Learning
  Repository, CC BY 4.0, as distributed by scikit-learn.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import ArrayDataset, split_stratified

__all__ = ["Digits", "Iris"]


def _read_text(name: str) -> str:
    import gzip
    from importlib import resources

    ref = resources.files("vtl.datasets").joinpath("data", name)
    raw = ref.read_bytes()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw.decode("ascii")


def load_iris() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """All 150 samples: float32 features (cm), int64 labels, class names."""
    lines = _read_text("iris.csv").strip().splitlines()
    head = lines[0].split(",")
    n, classes = int(head[0]), head[2:]
    rows = np.array([[float(v) for v in ln.split(",")] for ln in lines[1:]])
    if rows.shape != (n, 5):
        raise ValueError(f"Iris: bundled iris.csv has shape {rows.shape}, expected ({n}, 5)")
    return rows[:, :4].astype(np.float32), rows[:, 4].astype(np.int64), classes


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """All 1797 samples: raw pixel counts (0..16) as float32 (N, 64), int64 labels."""
    text = _read_text("digits.csv.gz")
    rows = np.array([[int(v) for v in ln.split(",")] for ln in text.strip().splitlines()])
    if rows.shape != (1797, 65):
        raise ValueError(f"Digits: bundled digits.csv.gz has shape {rows.shape}, "
                         "expected (1797, 65)")
    return rows[:, :64].astype(np.float32), rows[:, 64].astype(np.int64)


class Iris(ArrayDataset):
    """Fisher's Iris (bundled): ``.data`` float32 (N, 4) in cm -- sepal length, sepal
    width, petal length, petal width -- ``.targets`` int64 in {0, 1, 2}.

    Features are raw unless ``standardize=True``, which subtracts the training
    split's mean and divides by its standard deviation (for both splits). The
    split is stratified and deterministic: ``round(50 * test_fraction)`` samples
    per class go to the test split, chosen by ``vtl.random.Generator(seed)``.

    Args:
        train: The training split (else the test split).
        test_fraction: The fraction of each class in the test split.
        seed: Seed of the split.
        backend: Backend of the tensors (default: the default backend).
        standardize: Standardize the features with the training split's statistics.
        device: Device of the tensors (instead of ``backend``).
    """

    feature_names = ["sepal length (cm)", "sepal width (cm)", "petal length (cm)",
                     "petal width (cm)"]

    def __init__(self, train: bool = True, test_fraction: float = 0.2, seed: int = 0,
                 backend: str | None = None, *, standardize: bool = False,
                 device: Any = None) -> None:
        x, y, classes = load_iris()
        idx = split_stratified(y, test_fraction, seed, train)
        if standardize:
            tr = split_stratified(y, test_fraction, seed, True)
            x = (x - x[tr].mean(0)) / x[tr].std(0)
        super().__init__(x[idx].astype(np.float32), y[idx], classes, backend, device)


class Digits(ArrayDataset):
    """UCI handwritten digits, 8x8 (bundled): ``.data`` float32 (N, 64) in [0, 1]
    (pixel counts 0..16 divided by 16), ``.targets`` int64 in 0..9.

    ``.images`` gives the (N, 1, 8, 8) view. The split is stratified and
    deterministic: per class, ``round(count * test_fraction)`` samples chosen by
    ``vtl.random.Generator(seed)`` form the test split.

    Args:
        train: The training split (else the test split).
        test_fraction: The fraction of each class in the test split.
        seed: Seed of the split.
        backend: Backend of the tensors (default: the default backend).
        device: Device of the tensors (instead of ``backend``).
    """

    def __init__(self, train: bool = True, test_fraction: float = 0.2, seed: int = 0,
                 backend: str | None = None, *, device: Any = None) -> None:
        x, y = load_digits()
        idx = split_stratified(y, test_fraction, seed, train)
        super().__init__(x[idx] / np.float32(16.0), y[idx], [str(i) for i in range(10)],
                         backend, device)

    @property
    def images(self) -> Any:
        import vtl

        return vtl.reshape(self.data, (-1, 1, 8, 8))
