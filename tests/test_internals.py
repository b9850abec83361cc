"""The private TensorFlow and Keras names the library uses: all still there, and all listed in
`modeling/internals.py`."""
import ast
import importlib
import inspect
import pathlib
import pkgutil

import keras
import tensorflow as tf

import modeling
from modeling import internals

LIBRARY = pathlib.Path(modeling.__file__).parent
# Python's own: os._exit is documented; random.Random._randbelow is what randint draws by, and
# the pre-training records' golden test fails if CPython ever draws otherwise.
PYTHON = {"_exit", "_randbelow"}


def test_every_private_name_the_library_uses_is_installed():
    assert internals.missing() == [], (
        f"renamed or removed in TensorFlow {tf.__version__} / Keras {keras.__version__}: "
        f"{internals.missing()}; see modeling/internals.py")


def test_missing_names_a_hook_that_disappeared(monkeypatch):
    hook = "_all_reduce_sum_gradients"
    owner = next(c for c in keras.optimizers.Optimizer.__mro__ if hook in vars(c))
    monkeypatch.delattr(owner, hook)
    assert internals.missing() == ["keras.optimizers.Optimizer._all_reduce_sum_gradients"]


def _own_names():
    """Every name the library defines (functions, classes, attributes it assigns)."""
    names = set()
    for path in LIBRARY.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def test_no_private_name_of_another_package_is_read_outside_internals():
    own = _own_names()
    found = []
    for path in LIBRARY.rglob("*.py"):
        if path.name == "internals.py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Attribute):
                name = node.attr
            elif isinstance(node, ast.ImportFrom):
                name = node.module or ""
                if name.startswith(("tensorflow.python", "keras.src", "tf_keras")):
                    found.append(f"{path.relative_to(LIBRARY)}:{node.lineno}: {name}")
                continue
            else:
                continue
            private = name.startswith("_") and not name.startswith("__")
            if private and name not in own | PYTHON:
                found.append(f"{path.relative_to(LIBRARY)}:{node.lineno}: {name}")
    assert found == []


def _library_classes():
    for info in pkgutil.walk_packages([str(LIBRARY)], "modeling."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                yield cls


def test_every_private_method_overridden_is_a_listed_hook():
    overrides = set()
    for cls in _library_classes():
        foreign = [base for base in cls.__mro__[1:] if not base.__module__.startswith("modeling")]
        for name in vars(cls):
            if (name.startswith("_") and not name.startswith("__")
                    and any(name in vars(base) for base in foreign)):
                overrides.add(name)
    assert overrides == set(internals.OPTIMIZER_HOOKS)
