"""Does GD's objective prefer exact projections? The training loss of the exact packed W vs GD's.

For one library program (n tokens, length n) at width ``d``: the loss parts under the paper's
objective (``LossConfig()``: cross-entropy + L_layer read back through W) and under the exactness
objective (``LossConfig.exact()``: logit-gap margin + the layers' own outputs + attention KL +
ReLU pre-activation margin), and
the sequence accuracy, of (a) the packed projection at d, (b) W trained by GD from an orthogonal
start with the paper's objective and (c) with the exactness objective (default recipe otherwise,
seed 0, stopped early if exact). The loss is averaged over ``--per-length`` inputs of every
length, drawn from all inputs, as the training batches weight lengths. Where an inexact W has
the lower loss, that objective is minimising the wrong thing.

Run: ``python benchmarks/gd_objective.py length 10``
"""

from __future__ import annotations

import argparse
import dataclasses
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
    from compression.analytic.structure import residual_structure
    from compression.exactness import exactness_check, never_on
    from compression.experiments.sweep import program_task
    from compression.learned.config import GDRecipe, LossConfig
    from compression.learned.losses import compression_loss
    from compression.width_search import gd_run

    task = program_task(args.program, args.size)
    check = exactness_check(task)
    structure = residual_structure(task.compiled, never_on(check) if check.enumerated else ())
    ids = np.asarray(check.refs.ids)
    lengths = (ids != task.model.pad_id).sum(axis=1) - 1  # BOS excluded
    rng = np.random.default_rng(0)
    batch = np.concatenate([ids[rng.choice(np.nonzero(lengths == n)[0], args.per_length)]
                            for n in np.unique(lengths)])
    objectives = {"paper": LossConfig(), "exact": LossConfig.exact()}

    def losses(w: np.ndarray, config: LossConfig) -> str:
        _, parts = compression_loss(jnp.asarray(w), task.model, jnp.asarray(batch), config)
        return " ".join(f"{name} {float(value):.3f}" for name, value in parts.items())

    rows = [("packed", packed_projection(structure, args.d), "")]
    for name, config in objectives.items():
        recipe = dataclasses.replace(GDRecipe(seeds=1), loss=config)
        run, learned = gd_run(check, args.d, recipe, "orthogonal", structure, seed=0)
        rows.append((f"GD ({name})", learned, f"({run.steps} steps)"))
    print(f"{args.program} {args.size}/{args.size}, d = {args.d}, {len(batch)} inputs ({args.per_length} per length)")
    for label, w, note in rows:
        print(f"{label:12s} accuracy {check.sequence_accuracy(w):.4f} {note}")
        for name, config in objectives.items():
            print(f"    {name:5s} objective: {losses(w, config)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
