"""Implementations of the ``vtl`` namespace functions, one module per group of
the array API standard. Each op sits next to its VJP rule."""
