"""Every operator and method of Tensor is declared in a class body (Tensor's own or a base
class's), where readers, editors and type checkers see it, with a signature."""

from __future__ import annotations

import inspect
import pathlib
import re

import pytest

import vtl
from vtl import Tensor

# The array object of the array API standard (2024.12): its methods...
ARRAY_API_METHODS = [
    "__abs__", "__add__", "__and__", "__array_namespace__", "__bool__", "__complex__",
    "__dlpack__", "__dlpack_device__", "__eq__", "__float__", "__floordiv__", "__ge__",
    "__getitem__", "__gt__", "__index__", "__int__", "__invert__", "__le__", "__lshift__",
    "__lt__", "__matmul__", "__mod__", "__mul__", "__ne__", "__neg__", "__or__", "__pos__",
    "__pow__", "__rshift__", "__setitem__", "__sub__", "__truediv__", "__xor__", "to_device",
]
# ...its in-place and reflected operators...
_OPERATORS = ["add", "sub", "mul", "truediv", "floordiv", "pow", "mod", "matmul", "and",
              "or", "xor", "lshift", "rshift"]
ARRAY_API_METHODS += [f"__i{op}__" for op in _OPERATORS] + [f"__r{op}__" for op in _OPERATORS]
# ...and its attributes
ARRAY_API_ATTRIBUTES = ["dtype", "device", "mT", "ndim", "shape", "size", "T"]

# PyTorch-style methods (vtl/_tensor_methods.py)
TORCH_METHODS = [
    "sum", "prod", "mean", "max", "min", "std", "var", "argmax", "argmin", "reshape", "view",
    "flatten", "squeeze", "unsqueeze", "permute", "transpose", "expand", "tile", "abs", "exp",
    "log", "sqrt", "tanh", "clip", "clamp", "matmul", "astype", "float", "double", "long",
    "int", "bool",
]


def _declaring_class(name: str) -> type | None:
    for cls in Tensor.__mro__:
        if cls is not object and name in vars(cls):
            return cls
    return None


@pytest.mark.parametrize("name", ARRAY_API_METHODS + TORCH_METHODS)
def test_method_is_declared_in_a_class_body(name):
    cls = _declaring_class(name)
    assert cls is not None, f"Tensor.{name} is not declared in Tensor or a base class"
    fn = vars(cls)[name]
    assert inspect.isfunction(fn), f"{cls.__name__}.{name} is {fn!r}, not a def"
    assert fn.__doc__, f"{cls.__name__}.{name} has no docstring"
    params = list(inspect.signature(getattr(Tensor, name)).parameters)
    assert params[0] == "self"
    inspect.signature(getattr(vtl.asarray([1.0]), name))  # bound, too


@pytest.mark.parametrize("name", ARRAY_API_ATTRIBUTES)
def test_attribute_is_declared_in_a_class_body(name):
    cls = _declaring_class(name)
    assert cls is not None and isinstance(vars(cls)[name], property)


def test_nothing_is_attached_to_tensor_with_setattr():
    root = pathlib.Path(vtl.__file__).parent
    for path in root.rglob("*.py"):
        assert not re.search(r"setattr\(\s*Tensor\b", path.read_text()), path


def test_operators_leave_unknown_operands_to_the_other_side():
    """A binary operator returns NotImplemented for an operand it does not take."""
    t = vtl.asarray([1.0, 2.0], backend="numpy")
    assert t.__add__(object()) is NotImplemented
    assert t.__radd__(object()) is NotImplemented
    assert t.__iadd__(object()) is NotImplemented
    assert t.__floordiv__(object()) is NotImplemented
    assert (t + 1).tolist() == [2.0, 3.0] and (1 - t).tolist() == [0.0, -1.0]
    assert hash(t) == object.__hash__(t)  # == is elementwise; tensors hash by identity


def test_the_package_is_typed():
    assert (pathlib.Path(vtl.__file__).parent / "py.typed").is_file()
