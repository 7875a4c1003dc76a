"""The laboratory's entry points document themselves, as the project's docstring rule asks.

For `compiler.lab.circuits`, `compiler.lab.features` and `compiler.lab.zoo`, every name in the
package's `__all__` (the zoo's lazily loaded ones resolved through `getattr`) that is a function
has a docstring holding `Args:` when it takes parameters, `Returns:` when its return annotation
is not None (`Yields:` also does for a generator, as Google style has it) and `Raises:` when its
own body holds a `raise` statement; every class has a docstring of its own (not the signature a
dataclass writes when there is none, nor one inherited from a base class).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import textwrap
from collections.abc import Callable

import pytest

PACKAGES = ("compiler.lab.circuits", "compiler.lab.features", "compiler.lab.zoo")
# Modules a package's entry points need that the core install may lack.
NEEDS = {"compiler.lab.zoo": "pyarrow"}


def _definition(obj: object) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef:
    """The `def` or `class` statement of a function or class, parsed from its own source."""
    node = ast.parse(textwrap.dedent(inspect.getsource(obj))).body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)), node
    return node


def raises_directly(function: Callable) -> bool:
    """Whether `function`'s own body holds a `raise` statement (nested functions, lambdas and
    classes are their own bodies and do not count)."""
    pending = list(_definition(function).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Raise):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))
    return False


def returns_nothing(function: Callable) -> bool:
    """Whether the return annotation says None (a string under `from __future__ import annotations`);
    a missing annotation says nothing either way and asks for no `Returns:`."""
    annotation = inspect.signature(function).return_annotation
    return annotation is inspect.Signature.empty or annotation is None or annotation == "None"


def function_problems(label: str, function: Callable) -> list[str]:
    """What the docstring of entry point `label` lacks, one line each (empty: nothing)."""
    doc = inspect.getdoc(function)
    if not doc or not doc.strip():
        return [f"{label}: a function without a docstring"]
    problems = []
    parameters = [name for name in inspect.signature(function).parameters if name != "self"]
    if parameters and "Args:" not in doc:
        problems.append(f"{label}: takes {', '.join(parameters)} but its docstring has no 'Args:' section")
    if not returns_nothing(function):
        allowed = ("Returns:", "Yields:") if inspect.isgeneratorfunction(function) else ("Returns:",)
        if not any(section in doc for section in allowed):
            annotation = inspect.signature(function).return_annotation
            problems.append(f"{label}: returns {annotation} but its docstring has no {' or '.join(repr(s) for s in allowed)} section")
    if raises_directly(function) and "Raises:" not in doc:
        problems.append(f"{label}: its body raises, but its docstring has no 'Raises:' section")
    return problems


def class_problems(label: str, cls: type) -> list[str]:
    """`[label: ...]` when the class has no docstring of its own."""
    doc = ast.get_docstring(_definition(cls))
    return [] if doc and doc.strip() else [f"{label}: a class without a docstring of its own"]


def entry_points(package: str) -> list[tuple[str, object]]:
    """`(qualified name, object)` for every name in the package's `__all__`."""
    if package in NEEDS:
        pytest.importorskip(NEEDS[package], reason=f"{package} needs {NEEDS[package]}")
    module = importlib.import_module(package)
    found = [(name, getattr(module, name)) for name in module.__all__]
    return [(f"{package}.{name} (defined in {getattr(obj, '__module__', '?')})", obj) for name, obj in found]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_entry_point_function_documents_args_returns_and_raises(package: str) -> None:
    functions = [(label, obj) for label, obj in entry_points(package) if inspect.isfunction(obj)]
    assert len(functions) >= 3, f"{package}: expected its entry-point functions in __all__, found {len(functions)}"
    problems = [problem for label, function in functions for problem in function_problems(label, function)]
    assert problems == [], "entry points with incomplete docstrings:\n" + "\n".join(problems)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_entry_point_class_has_a_docstring(package: str) -> None:
    classes = [(label, obj) for label, obj in entry_points(package) if inspect.isclass(obj)]
    assert classes, f"{package}: expected classes among its entry points"
    problems = [problem for label, cls in classes for problem in class_problems(label, cls)]
    assert problems == [], "entry-point classes without a docstring:\n" + "\n".join(problems)


# -- the checker itself, on small examples --------------------------------------------------------


def _bare(x, y=1):
    return x + y


def _documented(x: int) -> int:
    """Double `x`, refusing negatives.

    Args:
        x: a number.
    Returns:
        `2 * x`.
    Raises:
        ValueError: `x` is negative.
    """
    if x < 0:
        raise ValueError(x)
    return 2 * x


def _no_raises_section(x: int) -> None:
    """Check `x`.

    Args:
        x: a number.
    """
    if x < 0:
        raise ValueError(x)


def _nested_raise_only() -> Callable[[], None]:
    """A function whose only `raise` is in a function it defines.

    Returns:
        The inner function.
    """

    def inner() -> None:
        raise ValueError("inner")

    return inner


def _generator(n: int):
    """Count to `n`.

    Args:
        n: how far.
    Yields:
        0, 1, ..., n - 1.
    """
    yield from range(n)


def test_the_checker_sees_missing_sections() -> None:
    assert function_problems("bare", _bare) == ["bare: a function without a docstring"]
    assert function_problems("documented", _documented) == []
    assert function_problems("no_raises", _no_raises_section) == [
        "no_raises: its body raises, but its docstring has no 'Raises:' section"]
    assert not raises_directly(_nested_raise_only) and raises_directly(_documented)
    assert function_problems("nested", _nested_raise_only) == []
    assert returns_nothing(_no_raises_section) and not returns_nothing(_documented)
    assert function_problems("generator", _generator) == []  # no annotation; a generator may say Yields:

    def args_only(x: int) -> int:
        """Args:
        x: a number."""
        return x

    assert function_problems("args_only", args_only) == ["args_only: returns int but its docstring has no 'Returns:' section"]

    class Plain:
        pass

    @dataclasses.dataclass
    class Record:  # a dataclass writes its signature into __doc__ when it has no docstring
        x: int

    class Documented(Plain):
        """A documented class."""

    class Heir(Documented):  # inspect.getdoc would hand it its base's docstring
        pass

    assert class_problems("Plain", Plain) == ["Plain: a class without a docstring of its own"]
    assert Record.__doc__ and class_problems("Record", Record) == ["Record: a class without a docstring of its own"]
    assert class_problems("Documented", Documented) == []
    assert inspect.getdoc(Heir) and class_problems("Heir", Heir) == ["Heir: a class without a docstring of its own"]
