"""Which GD recipe makes a fair learned-compression baseline? Exactness per recipe at one width.

Trains W for one library program (n tokens, length n) at width ``d`` with each named recipe
(``compression.learned.config.GDRecipe`` variants: budget, schedule, peak rate, weight decay, loss terms)
over a few seeds, each run stopped at its first exact check (every 250 steps, on every input),
and prints one JSON line per run (``compression.width_search.GDRun``) and a summary per recipe:
seeds exact and their steps to exactness. This is how the sweep's default recipe was chosen
(docs/compression.md, "A fair GD baseline").

Run: ``python benchmarks/gd_recipes.py frac_prevs 8 --recipes old cos wd --seeds 0 1 2``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compression.learned.config import GDRecipe, LossConfig, OptimizerConfig


def _cosine(lr: float, weight_decay: float = 0.0) -> OptimizerConfig:
    return OptimizerConfig(lr_init=lr, weight_decay=weight_decay, schedule="warmup_cosine")


RECIPES: dict[str, GDRecipe] = {
    # the first sweep's recipe: 1,500 steps, linear decay over the first half, no weight decay
    "old": GDRecipe(steps=1500, seeds=1, optimizer=OptimizerConfig(lr_init=1e-2, weight_decay=0.0)),
    "linear": GDRecipe(steps=5000, optimizer=OptimizerConfig(lr_init=1e-2, weight_decay=0.0)),
    "cos": GDRecipe(steps=5000, optimizer=_cosine(1e-2)),
    "cos_3e-3": GDRecipe(steps=5000, optimizer=_cosine(3e-3)),
    "cos_3e-2": GDRecipe(steps=5000, optimizer=_cosine(3e-2)),
    "layer_0.1": GDRecipe(steps=5000, optimizer=_cosine(1e-2), loss=LossConfig(layer_weight=0.1)),
    "layer_mean": GDRecipe(steps=5000, optimizer=_cosine(1e-2), loss=LossConfig(layer_reduction="mean")),
    "wd": GDRecipe(steps=5000, optimizer=_cosine(1e-2, 0.1)),
    "wd_10k": GDRecipe(steps=10_000, optimizer=_cosine(1e-2, 0.1)),
    "default": GDRecipe(),
    # a gentler peak rate for starts that are already close (the packed start)
    "default_3e-3": GDRecipe(optimizer=_cosine(3e-3, 0.1)),
    "default_1e-3": GDRecipe(optimizer=_cosine(1e-3, 0.1)),
    # every compiled output value weighs the same in each batch (rare values such as hist's 5)
    "balanced": GDRecipe(loss=LossConfig.exact(balance_outputs=True)),
    # the default with twice the budget (shuffle_dyck2 at its packed width, 5/5)
    "default_12k": GDRecipe(steps=12_000),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program")
    parser.add_argument("d", type=int)
    parser.add_argument("--size", type=int, default=5)
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--init", default="orthogonal")
    args = parser.parse_args(argv)

    from compression.analytic.structure import residual_structure
    from compression.exactness import exactness_check
    from compression.experiments.sweep import program_task
    from compression.width_search import gd_run

    task = program_task(args.program, args.size)
    structure = residual_structure(task.compiled)
    check = exactness_check(task)
    for name in args.recipes:
        runs = [gd_run(check, args.d, RECIPES[name], args.init, structure, seed)[0] for seed in args.seeds]
        for run in runs:
            print(json.dumps({"program": args.program, "recipe": name, **dataclasses.asdict(run)}), flush=True)
        steps = [r.steps_to_exact for r in runs if r.exact]
        accuracies = [round(r.sequence_accuracy, 3) for r in runs]
        print(f"# {args.program} d={args.d} {name}: exact {len(steps)}/{len(runs)}, steps {steps}, "
              f"accuracy {accuracies}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
