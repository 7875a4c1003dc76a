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
    import compiler.model.assemble
    import compiler.model.reuse
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
    assert count >= 15  # graph, values, ..., layout, and the optimize sub-package


def test_a_library_program_compiles_to_numpy_weights_without_jax():
    # Every pass compile_rasp runs, up to the weights; the numbers are checked in numpy.
    out = run_blocked(
        """
        import numpy as np
        from compiler.model import assemble
        from compiler.passes import graph as g, nodes
        from compiler.passes.allocate import place_blocks
        from compiler.passes.layout import lay_out
        from compiler.passes.discretise import discretise_numerical_inputs
        from compiler.passes.fuse import fuse_elementwise
        from compiler.passes.lower import LoweringOptions, lower, output_space
        from compiler.passes.optimize import PASSES, optimize_graph
        from compiler.passes.validate import check_graph
        from compiler.passes.values import infer_values
        from craft.bases import TOKENS_NAME, BasisDirection, bos_direction
        from rasp import lib, rasp

        program = lib.make_sort_unique(rasp.tokens, rasp.tokens)
        vocab, max_seq_len = (1, 2, 3), 3
        bos, pad = bos_direction("BOS"), BasisDirection(TOKENS_NAME, "PAD")
        traced = g.trace(discretise_numerical_inputs(program))
        infer_values(traced, vocab, max_seq_len)
        fused = fuse_elementwise(traced)
        assert check_graph(traced, fused, causal=False, bos=bos) == []
        graph = optimize_graph(fused, PASSES)
        lower(graph, LoweringOptions(max_seq_len=max_seq_len, causal=False, bos=bos))
        sublayers = place_blocks(graph)
        token_ids = {1: 0, 2: 1, 3: 2, "BOS": 3, "PAD": 4}
        craft = lay_out(graph, sublayers, token_ids, "BOS", "PAD", max_seq_len=max_seq_len, causal=False)
        residual, tables = craft.residual, craft.embeddings
        assert craft.output_space == output_space(graph, graph.graph[nodes.SINK])
        config, weights = assemble.assemble(
            residual, list(craft.sublayers), tables, craft.output_space,
            max_seq_len=max_seq_len, causal=False, numerical_output=False,
        )
        assert config.residual_width == residual.num_dims
        assert all(isinstance(w, np.ndarray) for part in weights.values() for w in part.values())
        # BOS writes exactly one and tokens:BOS; token 2 writes one and tokens:2.
        row = tables.token[token_ids["BOS"]]
        assert sorted(residual.basis[i].name + ":" + str(residual.basis[i].value) for i in np.flatnonzero(row)) == [
            "one:None", "tokens:BOS"
        ]
        assert row[residual.index(BasisDirection("one"))] == 1.0
        assert tables.token[1, residual.index(BasisDirection("tokens", 2))] == 1.0
        print("layers", config.num_layers)
        """
    )
    assert "layers 2" in out, out
