"""Does GD reach exactness sooner from the analytic packed W than from an orthogonal start?

For each program (n tokens, length n) and each width d, trains W with the sweep's GD recipe
(:class:`~compression.learned.config.GDRecipe`) from every start in ``--inits`` over ``--seeds`` seeds, each
run stopped at its first exact check, and reports per (program, d, start): how many seeds became
exact within the budget and the median steps to exactness (a run that never became exact counts
as taking longer than the budget, so the median is a number only when most seeds got there).

Starts (``compression.width_search.gd_start``): ``orthogonal``; ``packed`` (the packed
construction at d itself); ``packed_truncated`` (the exact packed W cut to its best rank-d
approximation). Default widths: one and two below the packed projection's measured exact width,
where the packed start is not yet exact, if the construction exists there.

Writes ``gd_start_runs.csv`` (every run), ``gd_start.csv`` (the summary), ``gd_start.png`` (median
sequence accuracy against d, one line per start and program) and ``gd_start.json`` into ``--out``.
``--quick``: ``shift_by_1`` at size 3, one seed, the sweep's quick budget (well under a minute).
Usage: ``python -m compression.experiments.gd_start --programs frac_prevs shift_by_1``
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from compression import plots
from compression.analytic.packing import min_width
from compression.analytic.structure import residual_structure
from compression.exactness import exactness_check
from compression.experiments.common import base_parser, environment, write_csv, write_json
from compression.experiments.sweep import add_objective_argument, gd_recipe_from_args, program_task
from compression.learned.config import GDRecipe
from compression.width_search import GD_INITS, GDRun, analytic_exact_width, gd_run

DEFAULT_PROGRAMS = ("shift_by_1", "length", "count_less_freq", "detect_abc", "nary_sum_mod_4", "sort_unique", "reverse")
QUICK_PROGRAMS, QUICK_SIZE = ("shift_by_1",), 3


def median_steps(runs: Sequence[GDRun]) -> float | None:
    """Median steps to exactness, a run that never got there counting as infinitely long
    (None when that median is infinite, i.e. at most half the runs got there)."""
    steps = sorted(r.steps_to_exact if r.exact and r.steps_to_exact is not None else np.inf for r in runs)
    value = float(np.median(steps)) if steps else np.inf
    return value if np.isfinite(value) else None


def summarise(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (program, size, d, init): seeds exact, median steps to exactness, best accuracy."""
    keys = sorted({(r["program"], r["size"], r["d"], r["requested_init"]) for r in runs},
                  key=lambda k: (k[0], k[1], -k[2], GD_INITS.index(k[3])))
    rows = []
    for key in keys:
        mine = [r for r in runs if (r["program"], r["size"], r["d"], r["requested_init"]) == key]
        as_runs = [GDRun(**{f.name: r[f.name] for f in dataclasses.fields(GDRun)}) for r in mine]
        rows.append({"program": key[0], "size": key[1], "d": key[2], "init": key[3],
                     "seeds": len(mine), "exact": sum(r.exact for r in as_runs),
                     "median_steps_to_exact": median_steps(as_runs),
                     "median_accuracy": float(np.median([r.sequence_accuracy for r in as_runs]))})
    return rows


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = base_parser("gd_start", __doc__.splitlines()[0])
    parser.add_argument("--programs", nargs="+", default=None, help=f"default: {' '.join(DEFAULT_PROGRAMS)}")
    parser.add_argument("--size", type=int, default=None, help="n tokens, length n (default: 5; quick: 3)")
    parser.add_argument("--widths", nargs="*", type=int, default=None,
                        help="widths d (default: packed exact width - 1 and - 2)")
    parser.add_argument("--below", nargs="+", type=int, default=[1, 2],
                        help="default widths: this far below the packed exact width (default: 1 2)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per (d, start) (default: 5; quick: 1)")
    parser.add_argument("--inits", nargs="+", default=["orthogonal", "packed"], choices=GD_INITS,
                        help="starts to compare (default: %(default)s)")
    add_objective_argument(parser)
    args = parser.parse_args(argv)
    args.programs = args.programs or list(QUICK_PROGRAMS if args.quick else DEFAULT_PROGRAMS)
    args.size = args.size or (QUICK_SIZE if args.quick else 5)
    args.seeds = args.seeds or (1 if args.quick else 5)
    return args


def program_runs(name: str, args: argparse.Namespace, recipe: GDRecipe) -> list[dict[str, Any]]:
    """Every (d, start, seed) run of one program, as table rows."""
    task = program_task(name, args.size)
    structure = residual_structure(task.compiled)
    check = exactness_check(task, seed=args.seed)
    packed = analytic_exact_width(check, structure, "packed", args.seed) or structure.residual_dim
    # by default only widths where the packed construction exists (else both starts are orthogonal)
    widths = args.widths or [packed - b for b in args.below if packed - b >= min_width(structure, "packed")]
    runs = []
    for d in widths:
        for init in args.inits:
            if init == "packed" and d < min_width(structure, "packed"):
                continue  # the construction does not exist there (it would be the orthogonal start)
            for k in range(args.seeds):
                run, _ = gd_run(check, d, recipe, init, structure, args.seed + k, packed_exact=packed)
                runs.append({"program": name, "size": args.size, "packed_exact": packed, "requested_init": init,
                             **dataclasses.asdict(run)})
                print(f"{name} d={d} {init} seed={args.seed + k}: exact={run.exact} "
                      f"steps={run.steps_to_exact} acc={run.sequence_accuracy:.3f}", flush=True)
    return runs


def write_outputs(args: argparse.Namespace, runs: list[dict[str, Any]], recipe: GDRecipe) -> list[dict[str, Any]]:
    """The run table, the summary, the picture and the JSON record; returns the summary rows."""
    rows = summarise(runs)
    write_csv(args.out / "gd_start_runs.csv", runs)
    write_csv(args.out / "gd_start.csv", rows)
    panels: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for row in rows:
        panels.setdefault(row["program"], {}).setdefault(row["init"], []).append((row["d"], row["median_accuracy"]))
    plots.plot_accuracy_vs_width(panels, args.out / "gd_start.png",
                                 f"GD from each start, size {args.size}: median sequence accuracy")
    write_json(args.out / "gd_start.json", {"environment": environment(), "recipe": dataclasses.asdict(recipe),
                                            "rows": rows})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    recipe = dataclasses.replace(gd_recipe_from_args(args), seeds=args.seeds)
    runs: list[dict[str, Any]] = []
    for name in args.programs:
        runs += program_runs(name, args, recipe)
        rows = write_outputs(args, runs, recipe)
    for row in rows:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
