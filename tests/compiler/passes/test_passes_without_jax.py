"""The passes are numpy and networkx only: they import, and compile a program to numpy weights,
with JAX and Haiku blocked."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

REPO = pathlib.Path(__file__).resolve().parents[3]

# Runs in a fresh interpreter whose import system refuses jax, jaxlib, haiku and optax.
SCRIPT = textwrap.dedent(
    """
    import importlib
    import importlib.abc
    import pkgutil
    import sys

    BLOCKED = ("jax", "jaxlib", "haiku", "optax")

    class Blocked(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is blocked in this test")
            return None

    sys.meta_path.insert(0, Blocked())

    import compiler.passes

    modules = [m.name for m in pkgutil.walk_packages(compiler.passes.__path__, "compiler.passes.")]
    for name in modules:
        importlib.import_module(name)
    import compiler
    from compiler import validate
    import compiler.model.config
    {body}
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not loaded, loaded
    print("modules", len(modules))
    """
)


def run_blocked(body: str) -> str:
    script = SCRIPT.replace("{body}", textwrap.dedent(body).strip())
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_every_pass_imports_without_jax():
    out = run_blocked("assert validate(__import__('rasp').lib.make_length(), {'a'}, 3) == []")
    count = int(out.split()[-1])
    assert count >= 15  # graph, values, ..., assemble, and the optimize sub-package
