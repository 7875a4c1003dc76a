"""The import arrows of docs/architecture.md hold: a module imports only what the picture allows.

The picture is a set of packages and direct arrows between them (`ARROWS`). A module may import
its own package and every package reachable from it along the arrows, nothing else: the check is
on allowed pairs, not on a total order, so two packages side by side (`rasp` and `craft`) may not
import each other. Every `import` statement is read with `ast` (function-level imports included,
so a lazy import cannot hide an arrow the picture lacks).
"""

from __future__ import annotations

import ast
import functools
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[1]

# Module prefix -> the package of the picture it belongs to; the longest matching prefix wins.
# `compiler.errors` (the error classes every layer raises) is the bottom of the picture; the
# `compiler` package itself (`from compiler import compile_rasp`) sits with `compiling`.
PACKAGE_OF: dict[str, str] = {
    "rasp": "rasp",
    "craft": "craft",
    "compiler.examples": "compiler.examples",
    "compiler.errors": "compiler.errors",
    "compiler.enums": "compiler.enums",
    "compiler.atomic": "compiler.atomic",
    "compiler.passes": "compiler.passes",
    "compiler.model": "compiler.model",
    "compiler.compiling": "compiler.compiling",
    "compiler": "compiler.compiling",
    "compiler.io": "compiler.io",
    "compiler.fuzzing": "compiler.fuzzing",
    "constructions": "constructions",
    "compression": "compression",
    "compression.learned": "compression.learned",
    "compression.analytic": "compression.analytic",
    "compiler.lab": "compiler.lab",
    "compiler.cli": "compiler.cli",
    "benchmarks": "benchmarks",
}

# The direct arrows of the package picture (docs/architecture.md): package -> what it may import.
ARROWS: dict[str, tuple[str, ...]] = {
    "compiler.errors": (),
    "compiler.enums": (),
    "compiler.atomic": ("compiler.errors",),
    "rasp": (),
    "craft": (),
    "compiler.examples": ("rasp",),
    "compiler.passes": ("rasp", "craft", "compiler.errors", "compiler.enums"),
    "compiler.model": ("compiler.passes",),
    "compiler.compiling": ("compiler.model",),
    "compiler.io": ("compiler.compiling", "compiler.atomic"),
    "compiler.fuzzing": ("compiler.compiling", "compiler.examples", "compiler.atomic"),
    "constructions": ("compiler.compiling",),
    "compression.learned": ("compiler.compiling", "compiler.atomic"),
    "compression.analytic": ("constructions",),
    "compression": ("compression.learned", "compression.analytic", "compiler.examples"),
    "compiler.lab": ("compression", "compiler.fuzzing", "compiler.io"),
    "compiler.cli": ("compiler.lab",),
    "benchmarks": ("compiler.cli",),
}
ROOTS = ("rasp", "craft", "compiler", "constructions", "compression", "benchmarks")


def package_of(module: str) -> str | None:
    matches = [p for p in PACKAGE_OF if module == p or module.startswith(p + ".")]
    return PACKAGE_OF[max(matches, key=len)] if matches else None


@functools.cache
def reachable(package: str) -> frozenset[str]:
    """The package itself and everything its arrows lead to."""
    found = {package}
    for target in ARROWS[package]:
        found |= reachable(target)
    return frozenset(found)


def allowed(importer: str, imported_package: str) -> bool:
    return imported_package in reachable(importer)


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


def forbidden_imports() -> list[str]:
    found = []
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            module = module_name(path)
            own = package_of(module)
            for name in imported(ast.parse(path.read_text(encoding="utf-8"))):
                target = package_of(name)
                if own and target and not allowed(own, target):
                    found.append(f"{module} ({own}) imports {name} ({target})")
    return found


def test_the_picture_has_no_cycle_and_names_every_package():
    assert set(ARROWS) == set(PACKAGE_OF.values())
    assert all(target in ARROWS for targets in ARROWS.values() for target in targets)
    for package in ARROWS:  # a cycle would put a package in the closure of one it points to
        assert all(package not in reachable(target) for target in ARROWS[package])


def test_every_module_belongs_to_a_package():
    modules = [module_name(p) for root in ROOTS for p in (REPO / root).rglob("*.py")]
    assert len(modules) > 100
    assert [m for m in modules if package_of(m) is None] == []


def test_no_module_imports_what_the_picture_forbids():
    assert forbidden_imports() == []


def test_the_checker_sees_forbidden_pairs():
    tree = ast.parse("def f():\n    from compiler.model.transformer import build\n")
    assert imported(tree) == ["compiler.model.transformer", "compiler.model.transformer.build"]
    assert package_of("compiler.model.config.ModelConfig") == "compiler.model"
    assert not allowed("compiler.passes", "compiler.model")  # the passes never see the Haiku model's records
    assert package_of("compiler") == package_of("compiler.compiling") == "compiler.compiling"
    assert allowed("compiler.model", "compiler.passes") and not allowed("compiler.passes", "compiler.model")
    # Side by side, neither above the other: a total order of layers allowed these.
    assert not allowed("craft", "rasp") and not allowed("rasp", "craft")
    assert not allowed("constructions", "compiler.io")
    assert not allowed("compiler.fuzzing", "constructions")
    # The command line sits on top: everything it offers may be imported by it, and nothing
    # but the benchmarks imports it.
    assert allowed("compiler.cli", "compression") and not allowed("compression", "compiler.cli")
    # The two ways of making W sit side by side; what compares them sits above both.
    assert not allowed("compression.learned", "compression.analytic")
    assert not allowed("compression.analytic", "compression.learned")
    assert not allowed("compression.learned", "compression") and allowed("compression", "compression.analytic")


LAB_FACES = ("compiler.lab.circuits", "compiler.lab.features", "compiler.lab.zoo")


def _past_the_face(name: str) -> bool:
    """Whether an imported module name reaches into a lab package's modules instead of its face."""
    return any(name.startswith(face + ".") for face in LAB_FACES)


def test_the_lab_is_used_through_its_package_faces():
    """The CLI, the benchmarks and the docs import the lab from `compiler.lab.circuits` (etc.),
    whose `__init__` lists the entry points, never from the modules behind it."""
    found = []
    for path in sorted((REPO / "benchmarks").glob("*.py")) + sorted((REPO / "compiler" / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
        modules += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        found += [f"{path.relative_to(REPO)}: {m}" for m in modules if _past_the_face(m)]
    for path in sorted((REPO / "docs").rglob("*.md")):
        for m in re.findall(r"^\s*(?:from|import)\s+(compiler\.lab\.[\w.]+)", path.read_text(encoding="utf-8"), re.M):
            if _past_the_face(m):
                found.append(f"{path.relative_to(REPO)}: {m}")
    assert found == []
    assert _past_the_face("compiler.lab.circuits.scoring") and not _past_the_face("compiler.lab.circuits")


def test_no_module_imports_itself_through_others():
    """Modules form no import circle (function-level imports included). Edges into a package's
    `__init__` are left out: a package re-exporting its modules' names is not a circle."""
    import networkx as nx

    paths = {module_name(p): p for root in ROOTS if root != "benchmarks" for p in (REPO / root).rglob("*.py")}
    graph = nx.DiGraph()
    for module, path in paths.items():
        if path.name == "__init__.py":
            continue
        for name in imported(ast.parse(path.read_text(encoding="utf-8"))):
            if name in paths and name != module and paths[name].name != "__init__.py":
                graph.add_edge(module, name)
    assert list(nx.simple_cycles(graph)) == []
