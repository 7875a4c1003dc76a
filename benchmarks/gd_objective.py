"""Does GD's objective prefer exact projections? The training loss of the exact packed W vs a GD one.

For one library program (n tokens, length n) at width ``d``: the loss parts (``L_out``,
``L_layer``, total; ``compression.losses.compression_loss`` with the default ``GDRecipe``'s loss)
and the sequence accuracy of (a) the packed projection at d and (b) W trained by GD from an
orthogonal start with the default recipe (seed 0, stopped early if exact). The loss is averaged
over ``--per-length`` inputs of every length, drawn from all inputs, as the training batches
weight lengths. Where (b) is inexact but has the lower loss, GD is minimising the wrong thing.

Run: ``python benchmarks/gd_objective.py length 10``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program")
    parser.add_argument("d", type=int)
    parser.add_argument("--size", type=int, default=5)
    parser.add_argument("--per-length", type=int, default=600)
    args = parser.parse_args(argv)

    import jax.numpy as jnp
    import numpy as np

    from compression.analytic.packing import packed_projection
    from compression.learned.config import GDRecipe
    from compression.exactness import exactness_check, never_on
    from compression.experiments.sweep import program_task
    from compression.learned.losses import compression_loss
    from compression.analytic.structure import residual_structure
    from compression.width_search import gd_run

    task = program_task(args.program, args.size)
    check = exactness_check(task)
    structure = residual_structure(task.compiled, never_on(check) if check.enumerated else ())
    ids = np.asarray(check.refs.ids)
    lengths = (ids != task.model.pad_id).sum(axis=1) - 1  # BOS excluded
    rng = np.random.default_rng(0)
    batch = np.concatenate([ids[rng.choice(np.nonzero(lengths == n)[0], args.per_length)]
                            for n in np.unique(lengths)])
    recipe = GDRecipe(seeds=1)

    def losses(w: np.ndarray) -> str:
        _, parts = compression_loss(jnp.asarray(w), task.model, jnp.asarray(batch), recipe.loss)
        return "  ".join(f"{name} {float(value):.3f}" for name, value in parts.items())

    packed = packed_projection(structure, args.d)
    run, learned = gd_run(check, args.d, recipe, "orthogonal", structure, seed=0)
    print(f"{args.program} {args.size}/{args.size}, d = {args.d}, {len(batch)} inputs ({args.per_length} per length)")
    print(f"packed      accuracy {check.sequence_accuracy(packed):.4f}  {losses(packed)}")
    print(f"GD (orth.)  accuracy {run.sequence_accuracy:.4f}  {losses(learned)}  ({run.steps} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
