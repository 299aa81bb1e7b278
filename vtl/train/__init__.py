"""``vtl.train``: a small fit loop with progress bars, history and callbacks.

>>> history = vtl.train.fit(model, train_loader, nn.CrossEntropyLoss(), opt, epochs=10,
...                         val_loader=val_loader, metrics=("accuracy",))
>>> history.plot("learning_curve.png")          # needs the ``plot`` extra (matplotlib)

* :func:`fit` trains, validates under ``vtl.no_grad`` with ``model.eval()``,
  steps a scheduler, shows tqdm bars (``progress=False`` to silence) and
  returns a :class:`History`; ``resume_from=path`` continues a checkpoint.
* :func:`evaluate` returns ``{"loss": ..., metric: ...}`` for one pass over a loader.
* callbacks: :class:`ModelCheckpoint`, :class:`EarlyStopping`, :class:`Resume`,
  :class:`LambdaCallback`, or subclass :class:`Callback`.
"""

from .callbacks import Callback, EarlyStopping, LambdaCallback, ModelCheckpoint, Resume
from .history import History
from .loop import BatchLogs, FitState, evaluate, fit

__all__ = [
    "fit", "evaluate", "History", "FitState", "Callback", "ModelCheckpoint", "EarlyStopping",
    "Resume", "LambdaCallback", "BatchLogs",
]
