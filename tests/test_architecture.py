"""The import arrows of docs/architecture.md hold: no module imports a package above its own.

Every `import` statement is read with `ast` (function-level imports included, so a lazy import
cannot hide an upward arrow). A module may import its own layer and the layers below it.
"""

from __future__ import annotations

import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]

# (module prefix, layer), the longest matching prefix wins. `compiler.errors` and the model's
# configuration records (what `assemble` produces) sit with the passes, below the Haiku model.
LAYERS: tuple[tuple[str, int], ...] = (
    ("rasp", 0),
    ("craft", 1),
    ("compiler.errors", 2),
    ("compiler.passes", 2),
    ("compiler.model.config", 2),
    ("compiler.model", 3),
    ("compiler.compiling", 3),
    ("compiler", 3),  # the package itself: `from compiler import compile_rasp`
    ("compiler.io", 4),
    ("compiler.fuzzing", 4),
    ("compiler.cli", 5),
    ("constructions", 6),
    ("compression", 7),
    ("benchmarks", 8),
)
PACKAGES = ("rasp", "craft", "compiler", "constructions", "compression", "benchmarks")


def layer_of(module: str) -> tuple[str, int] | None:
    matches = [(p, n) for p, n in LAYERS if module == p or module.startswith(p + ".")]
    return max(matches, key=lambda match: len(match[0]), default=None)


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST) -> list[str]:
    """Every absolute module an import statement names (for `from a import b`, `a` and `a.b`)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def upward_imports() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            module = module_name(path)
            own = layer_of(module)
            for name in imported(ast.parse(path.read_text(encoding="utf-8"))):
                target = layer_of(name)
                if own and target and target[1] > own[1]:
                    found.append(f"{module} ({own[0]}) imports {name} ({target[0]})")
    return found


def test_every_module_belongs_to_a_layer():
    modules = [module_name(p) for package in PACKAGES for p in (REPO / package).rglob("*.py")]
    assert len(modules) > 100 and all(layer_of(m) for m in modules)


def test_no_module_imports_upward():
    assert upward_imports() == []


def test_the_checker_sees_upward_imports():
    tree = ast.parse("def f():\n    from compiler.model.transformer import build\n")
    assert imported(tree) == ["compiler.model.transformer", "compiler.model.transformer.build"]
    assert layer_of("compiler.passes.assemble")[1] < layer_of("compiler.model.transformer")[1]
    assert layer_of("compiler.model.config")[1] == layer_of("compiler.passes.graph")[1]
    assert layer_of("rasp.rasp")[1] < layer_of("craft.bases")[1] < layer_of("compiler.io.files")[1]
