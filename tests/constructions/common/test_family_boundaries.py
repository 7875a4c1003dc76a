"""The construction families stay apart: none imports another, each lists its modules.

Read from the source with `ast`, so the check needs no import of the packages themselves.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import constructions

ROOT = pathlib.Path(constructions.__file__).parent
FAMILIES = ("superposition", "facts", "bilinear", "circuits")
SHARED = "common"


def _imported_modules(path: pathlib.Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    return modules


@pytest.mark.parametrize("family", FAMILIES + (SHARED,))
def test_a_family_imports_only_itself_and_common(family):
    allowed = {family, SHARED}
    crossings = {
        f"{path.name} imports {module}"
        for path in (ROOT / family).glob("*.py")
        for module in _imported_modules(path)
        if module.startswith("constructions.") and module.split(".")[1] not in allowed
    }
    assert crossings == set()  # for `common` itself: it depends on no family


@pytest.mark.parametrize("package", FAMILIES + (SHARED, "experiments"))
def test_package_docstring_lists_every_module(package):
    doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text(encoding="utf-8")))
    modules = sorted(p.stem for p in (ROOT / package).glob("*.py") if p.stem != "__init__")
    assert modules, package
    assert [m for m in modules if f"``{m}``" not in doc] == []
