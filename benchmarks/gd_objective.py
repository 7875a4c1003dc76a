"""Does GD's objective prefer exact projections? The training loss of the exact packed W vs GD's.

For one library program (n tokens, length n) at width ``d``: the loss parts and the sequence
accuracy of (a) the packed projection at d and (b) W trained by GD from an orthogonal start with
each objective of ``--train`` (default recipe otherwise, seed ``--seed``, stopped at the first
exact check), each W scored under every objective of ``--objectives``:

* ``paper``: ``LossConfig()``, cross-entropy + L_layer read back through W;
* ``exact-written``: ``LossConfig.exact(written_margin=False)``, logit-gap margin + the layers'
  own outputs compared coordinate by coordinate + attention KL + ReLU pre-activation margin;
* ``exact``: ``LossConfig.exact()``, the same with the one-hot coordinates of the written
  outputs compared one-sidedly (``written_margin``: an off value read negative, an on value
  read larger count as right);
* ``balanced``: ``exact`` with every compiled output value weighing the same (the recipe's);
  ``balanced-written``: the same with ``written_margin=False`` (the recipe's before it).

GD trains with the default recipe's sampling, replay included, unless ``--no-replay``.

The loss is averaged over ``--per-length`` inputs of every length, drawn from all inputs, as the
training batches weight lengths. Where an inexact W has the lower loss, that objective is
minimising the wrong thing.

Run: ``python benchmarks/gd_objective.py length 10`` or
``python benchmarks/gd_objective.py dyck1 32 --train exact-written exact``
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def objectives() -> dict:
    """The objectives by name (see the module docstring)."""
    from compression.experiments.sweep import OBJECTIVES
    from compression.learned.config import LossConfig

    return {**OBJECTIVES, "exact-written": LossConfig.exact(written_margin=False)}


NAMES = ["paper", "exact-written", "exact", "balanced", "balanced-written"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program")
    parser.add_argument("d", type=int)
    parser.add_argument("--size", type=int, default=5)
    parser.add_argument("--per-length", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--objectives", nargs="+", default=["paper", "exact-written", "exact"],
                        choices=NAMES, help="objectives each W is scored under")
    parser.add_argument("--train", nargs="*", default=["paper", "exact"],
                        choices=NAMES, help="objectives GD trains with")
    parser.add_argument("--no-replay", action="store_true", help="GD without replaying the wrong inputs")
    args = parser.parse_args(argv)

    import jax.numpy as jnp
    import numpy as np

    from compression.analytic.packing import packed_projection
    from compression.analytic.structure import residual_structure
    from compression.exactness import exactness_check, never_on
    from compression.experiments.sweep import program_task
    from compression.learned.config import GDRecipe
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
    known = objectives()

    def losses(w: np.ndarray, name: str) -> str:
        _, parts = compression_loss(jnp.asarray(w), task.model, jnp.asarray(batch), known[name])
        return " / ".join(f"{float(value):.3f}" for value in parts.values()) + f" ({' / '.join(parts)})"

    rows = [("packed (analytic)", packed_projection(structure, args.d), "")]
    for name in args.train:
        recipe = dataclasses.replace(GDRecipe(seeds=1), loss=known[name])
        if args.no_replay:
            recipe = dataclasses.replace(recipe, sampling=dataclasses.replace(recipe.sampling, replay_fraction=0.0))
        run, learned = gd_run(check, args.d, recipe, "orthogonal", structure, seed=args.seed)
        note = f"exact after {run.steps} steps" if run.exact else f"{run.steps} steps"
        rows.append((f"GD, {name} objective", learned, f"({note})"))
    print(f"{args.program} {args.size}/{args.size}, d = {args.d}, {len(batch)} inputs ({args.per_length} per length)")
    for label, w, note in rows:
        print(f"{label} {note}: sequence accuracy {check.sequence_accuracy(w):.4f}")
        for name in args.objectives:
            print(f"    {name:13s} {losses(w, name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
