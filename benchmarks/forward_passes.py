"""The one forward pass, timed: compressed passes and feature-site captures against the plain pass.

For the library's `sort` at each `--sizes` (vocabulary and length n, batch `--batch`) it times,
after a first (compiling) call, the median of `--repeats` calls of:

* `plain`: `forward(params, ids, outputs_only=True)`, the compiled model (the floor);
* `compressed`: the same with a random `W` of width D/2 (`projection=W`): every sub-layer reads and
  writes only the rows of W it touches (`compiler.model.projected`);
* `snapshots`: the compressed pass keeping every residual snapshot (decompressed, `r @ Wᵀ`);
* `gradient`: the gradient with respect to W of the summed squared outputs (what training runs).

and, with `--stage`, the feature stage's `SiteRunner.capture` (every site, 512 inputs) exact and
compressed by its packed W. Prints one row per case with each time's ratio to `plain`.

Run: `python benchmarks/forward_passes.py [--sizes 10 40] [--batch 64] [--repeats 7] [--stage 1k]`.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the project's packages, when run from a clone


def median_ms(call: Callable[[], object], repeats: int) -> float:
    """Median wall time of `call` in milliseconds, after one untimed (compiling) call."""
    jax.block_until_ready(call())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def sort_row(size: int, batch: int, repeats: int) -> str:
    """Times of the plain, compressed, snapshot and gradient passes of `sort` at `size`."""
    from compiler import compile_rasp
    from compiler.examples import EXAMPLES

    example = EXAMPLES["sort"]
    model = compile_rasp(example.build(size), example.scaled_vocab(size), size)
    width = model.config.residual_width
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.standard_normal((width, width // 2)) / np.sqrt(width), jnp.float32)
    ids = jnp.asarray(model.input_encoder.encode_batch(
        [["BOS", *rng.choice(list(example.scaled_vocab(size)), size)] for _ in range(batch)]))
    gradient = jax.jit(jax.grad(lambda w: jnp.sum(model.forward(model.params, ids, projection=w).output ** 2)))
    plain = median_ms(lambda: model.forward(model.params, ids, outputs_only=True).output, repeats)
    times = {
        "compressed": median_ms(lambda: model.forward(model.params, ids, projection=w, outputs_only=True).output,
                                repeats),
        "snapshots": median_ms(lambda: model.forward(model.params, ids, projection=w).residuals, repeats),
        "gradient": median_ms(lambda: gradient(w), repeats),
    }
    cells = "  ".join(f"{name} {ms:8.2f} ms ({ms / plain:5.2f}x)" for name, ms in times.items())
    return f"sort {size:>3}/{size:<3} D={width:<6} plain {plain:8.2f} ms  {cells}"


def stage_row(name: str, repeats: int) -> str:
    """Times of the feature stage's exact and compressed captures of every site."""
    from compiler.lab.features import STAGES, SiteRunner, build_stage, sample_ids

    stage = build_stage(STAGES[name])
    ids = sample_ids(stage.compiled, 512, seed=1)
    plain = median_ms(lambda: stage.compiled.forward(stage.compiled.params, jnp.asarray(ids), outputs_only=True).output,
                      repeats)
    exact, compressed = SiteRunner(stage.compiled), SiteRunner(stage.compiled, stage.projection)
    times = {"exact capture": median_ms(lambda: exact.capture(ids).output, repeats),
             "compressed capture": median_ms(lambda: compressed.capture(ids).output, repeats)}
    cells = "  ".join(f"{key} {ms:8.2f} ms ({ms / plain:5.2f}x)" for key, ms in times.items())
    return (f"stage {name:<4} D={stage.compiled.config.residual_width} d={stage.projection.shape[1]}  "
            f"plain {plain:8.2f} ms  {cells}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10, 40], help="sort's vocabulary and length")
    parser.add_argument("--batch", type=int, default=64, help="inputs per call")
    parser.add_argument("--repeats", type=int, default=7, help="timed calls (median)")
    parser.add_argument("--stage", default="1k", help="feature stage to capture ('' for none)")
    args = parser.parse_args(argv)
    for size in args.sizes:
        print(sort_row(size, args.batch, args.repeats), flush=True)
    if args.stage:
        print(stage_row(args.stage, args.repeats), flush=True)


if __name__ == "__main__":
    main()
