"""Imported once by the fork server of DataLoader workers (``multiprocessing``'s
``set_forkserver_preload``): vtl and its numpy backend are then ready in every worker the
server forks, which starts in milliseconds instead of importing them again."""

import vtl
from vtl.data import _worker  # noqa: F401

vtl.backends.require("numpy")
