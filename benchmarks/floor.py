"""The floor of a compiled model's forward pass: one matmul chain over the same non-zeros.

`floor_function(model, batch, length)` returns a jitted function doing the arithmetic any
implementation of the model must do, with generic kernels and nothing else: per weight one
product `[tokens, rows] @ M`, `M` dense when it is at least `DENSE_FROM` full, else a
`jax.experimental.sparse.BCOO` matrix of its non-zeros; per head the two attention products
(`q @ kᵀ` and `pattern @ v`) over its widths. No gathers into the residual stream, no softmax,
no masks: the time of this chain is what the weights cost, and `warm / floor` says how far the
real forward pass is from it. Each time is given twice: wall-clock seconds and the process's CPU
seconds (`median_times`); on a shared machine the CPU ratio is the one to trust.

    python benchmarks/floor.py --examples sort,hist --sizes 25,50
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler import compile_rasp
from compiler.examples import EXAMPLES
from compiler.model.config import AttentionSpec
from compiler.model.weights import module_params

# A weight is multiplied densely when at least this fraction of its entries is non-zero.
DENSE_FROM = 1 / 16
PRECISION = jax.lax.Precision.HIGHEST


def _matrix(spec, param: np.ndarray):
    dense = spec.dense(param).astype(np.float32)
    if dense.size == 0 or np.count_nonzero(dense) >= DENSE_FROM * dense.size:
        return jnp.asarray(dense)
    return jsparse.BCOO.fromdense(dense)


def floor_function(model, batch: int, length: int) -> tuple[Callable[[], jax.Array], tuple]:
    """`(run, arguments)`: `run(*arguments)` computes the chain for `batch x length` tokens."""
    tokens = batch * length
    matrices, heads = [], []
    for (module, name), spec in model.config.linears().items():
        matrices.append(_matrix(spec, module_params(model, module)[name]))
    for layer in model.config.layers:
        if isinstance(layer, AttentionSpec):
            heads += [(head.w_q.shape[1], head.w_v.shape[1]) for head in layer.heads]
    widest = max([m.shape[0] for m in matrices] + [d for pair in heads for d in pair] + [1])
    x = jnp.asarray(np.random.default_rng(0).random((tokens, widest), dtype=np.float32))

    def run(x, matrices):
        total = jnp.zeros((), jnp.float32)
        for m in matrices:
            inputs = x[:, : m.shape[0]]
            if isinstance(m, jsparse.BCOO):
                total = total + jnp.sum(m.T @ inputs.T)  # sparse @ dense: [cols, tokens]
            else:
                total = total + jnp.sum(jnp.dot(inputs, m, precision=PRECISION))
        for d_qk, d_v in heads:
            q = x[:, :d_qk].reshape(batch, length, d_qk)
            v = x[:, :d_v].reshape(batch, length, d_v)
            pattern = jnp.einsum("btd,bsd->bts", q, q, precision=PRECISION)
            total = total + jnp.sum(jnp.einsum("bts,bsd->btd", pattern, v, precision=PRECISION))
        return total

    return jax.jit(run), (x, matrices)


def median_times(call: Callable[[], object], repeats: int = 5) -> tuple[float, float]:
    """`(wall, cpu)`: median wall-clock seconds and median process CPU seconds (every thread of
    the process, `time.process_time`) of `repeats` calls of `call`, whose result is waited for.

    On a machine shared with other jobs the wall clock measures the load as much as the work;
    the CPU seconds are close to what the call costs on an idle machine (summed over cores).
    """
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(call())
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def floor_times(model, batch: int, length: int, repeats: int = 5) -> tuple[float, float]:
    """`(wall, cpu)` median seconds of the chain (`median_times`, after one call that compiles it)."""
    run, arguments = floor_function(model, batch, length)
    jax.block_until_ready(run(*arguments))
    return median_times(lambda: run(*arguments), repeats)


def floor_seconds(model, batch: int, length: int, repeats: int = 5) -> float:
    """Median wall-clock seconds of the chain (after one call that compiles it)."""
    return floor_times(model, batch, length, repeats)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", default="sort", help="comma list of example names")
    parser.add_argument("--sizes", default="25", help="comma list of vocab size = max_seq_len")
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args(argv)
    print(f"{'example':<15} {'setting':>7} {'warm_s':>8} {'floor_s':>8} {'ratio':>6} {'warm_cpu':>8} {'floor_cpu':>9} {'cpu_ratio':>9}")
    for size in (int(s) for s in args.sizes.split(",")):
        for name in args.examples.split(","):
            example = EXAMPLES[name]
            vocab = example.scaled_vocab(size)
            model = compile_rasp(example.build(size), vocab, size)
            ids = np.full((args.batch, size + 1), model.input_encoder.bos_id, dtype=np.int32)
            model.warmup(args.batch)
            warm, warm_cpu = median_times(lambda: model.run(ids).output)
            floor, floor_cpu = floor_times(model, args.batch, size + 1)
            print(
                f"{name:<15} {size:>3}/{size:<3} {warm:>8.3f} {floor:>8.3f} {warm / floor:>6.2f} "
                f"{warm_cpu:>8.3f} {floor_cpu:>9.3f} {warm_cpu / floor_cpu:>9.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
