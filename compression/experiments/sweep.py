"""How far can each library program be compressed and stay exact? Analytic projections vs GD vs PCA.

For every program of ``compiler.cli.examples`` at each size n (vocabulary of n tokens, length n):
D, the protected coordinates p, and the smallest d at which each method is exact on every input
(or on >= 2,000 sampled inputs when there are more than 5,000):

* ``random`` / ``packed``: the analytic projections (:mod:`compression.analytic`), the d their
  bound claims and the d measured;
* ``pca``: the uncentred PCA of the compiled activations;
* ``gd`` / ``gd_packed``: the trainer from an orthogonal start (searched over 1..D) / from the
  packed projection (searched between the packed projection's smallest width and its measured
  exact width: it starts exact there), a fixed step budget per run (``--steps``, default 1,500,
  lr 1e-2, no weight decay), stopped once exact; only at the sizes in ``--gd-sizes``.

Measured widths come from binary searches (``compression.width_search``). Writes ``sweep.csv``
(the table), ``sweep_gd_runs.csv`` (every GD run: d, init, steps to exactness, steps/s),
``sweep_curves.csv`` and ``sweep_accuracy.png`` (sequence accuracy vs d per method and program)
and ``sweep.json`` into ``--out``; prints the table. Runs unchanged on CPU or GPU (JAX's default
backend).

Usage: ``python -m compression.experiments.sweep [--quick] [--programs length sort] [--sizes 5 10]``
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from compiler.cli.examples import EXAMPLES
from compression import plots
from compression.analytic import min_width, packed_width, projection
from compression.experiments.common import base_parser, environment, write_csv, write_json
from compression.exactness import exactness_check
from compression.structure import residual_structure
from compression.task import CompressionTask, make_task
from compression.width_search import (
    GDRun, analytic_exact_width, claimed_width, gd_exact_width, pca_exact_width, pca_projection,
)

# Programs whose inputs must not repeat a token (their RASP semantics assume distinct keys).
UNIQUE_TOKENS = frozenset({"sort_unique"})
DEFAULT_STEPS, QUICK_STEPS = 1_500, 100
QUICK_PROGRAMS, QUICK_SIZES = ("length",), (3,)
CURVE_POINTS = 6


def program_task(name: str, size: int) -> CompressionTask:
    """The library program ``name`` with ``size`` tokens (``Example.scaled_vocab``) and length ``size``."""
    if name not in EXAMPLES:
        raise ValueError(f"unknown program {name!r}; choose from {', '.join(EXAMPLES)}")
    example = EXAMPLES[name]
    return make_task(name, example.build(size), example.scaled_vocab(size), size, unique_tokens=name in UNIQUE_TOKENS)


def _grid(lo: int, hi: int, points: int) -> list[int]:
    return sorted({int(round(v)) for v in np.linspace(lo, hi, points)}) if lo <= hi else []


def sweep_program(name: str, size: int, gd_steps: int | None, seed: int = 0, curve_points: int = CURVE_POINTS,
                  quick: bool = False) -> tuple[dict[str, Any], list[GDRun], dict[str, list]]:
    """The table row, the GD runs and the accuracy curves of one program at one size.

    ``quick`` runs GD from the orthogonal start only at the packed width, and from the packed start
    only there and one below.
    """
    start = time.perf_counter()
    task = program_task(name, size)
    structure = residual_structure(task.compiled)
    check = exactness_check(task, seed=seed)
    big_d = structure.residual_dim
    row: dict[str, Any] = {"program": name, "size": size, "D": big_d, "protected": len(structure.protected),
                           "inputs": check.size, "enumerated": check.enumerated}
    curves: dict[str, list] = {}
    for method in ("random", "packed"):
        claimed = row[f"{method}_claimed"] = claimed_width(structure, method, seed)
        # the bound's promise, checked: exact on every evaluated input at the claimed width
        row[f"{method}_claim_holds"] = None if claimed is None else check.is_exact(
            projection(structure, method, claimed, seed))
        row[f"{method}_exact"] = analytic_exact_width(check, structure, method, seed)
        curves[method] = [(d, check.sequence_accuracy(projection(structure, method, d, seed)))
                          for d in _grid(min_width(structure, method), big_d, curve_points)]
    row["packed_full_margin"] = packed_width(structure, seed)
    row["pca_exact"] = pca_exact_width(check)
    curves["pca"] = [(d, check.sequence_accuracy(pca_projection(check, d))) for d in _grid(1, big_d, curve_points)]
    runs: list[GDRun] = []
    row["gd_exact"] = row["gd_packed_exact"] = None  # not run
    if gd_steps:
        # From the packed start GD is exact at step 0 wherever packed is, and below the packed
        # minimum width it would start orthogonal: search only in between.
        packed_hi = row["packed_exact"] or big_d
        ranges = {"gd": (1, big_d), "gd_packed": (min_width(structure, "packed"), packed_hi)}
        if quick:  # one training run per start: at the packed width, and one below it
            ranges = {"gd": (packed_hi, packed_hi), "gd_packed": (max(packed_hi - 1, ranges["gd_packed"][0]), packed_hi)}
        for init, key in (("orthogonal", "gd"), ("packed", "gd_packed")):
            mine: list[GDRun] = []
            lo, hi = ranges[key]
            row[f"{key}_exact"] = gd_exact_width(check, gd_steps, hi, init, structure, seed, mine, lo=lo)
            curves[key] = [(r.d, r.sequence_accuracy) for r in mine]
            runs.extend(mine)
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row, runs, curves


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The table as GitHub markdown (``-`` where a method is not exact up to D or was not run)."""
    columns = ["program", "size", "D", "protected", "random_claimed", "random_exact", "packed_claimed",
               "packed_exact", "gd_exact", "gd_packed_exact", "pca_exact"]
    header = ["program", "n", "D", "p", "random (bound)", "random", "packed (bound)", "packed", "GD",
              "GD from packed", "PCA"]
    cell = lambda v: "-" if v is None else str(v)  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def write_outputs(out: Path, rows: list[dict], runs: list[dict], panels: dict, steps: int,
                  gd_sizes: set[int]) -> list[float]:
    """Write the table, GD runs, curves, plot and summary so far; returns the GD steps/s seen."""
    write_csv(out / "sweep.csv", rows)
    write_csv(out / "sweep_gd_runs.csv", runs)
    write_csv(out / "sweep_curves.csv", [{"program": p, "method": m, "d": d, "sequence_accuracy": a}
                                         for p, methods in panels.items() for m, pts in methods.items() for d, a in pts])
    plots.plot_accuracy_vs_width(panels, out / "sweep_accuracy.png", "exactness vs residual width d")
    rates = [r["steps_per_s"] for r in runs if np.isfinite(r["steps_per_s"])]
    write_json(out / "sweep.json", {"environment": environment(), "gd_steps": steps, "gd_sizes": sorted(gd_sizes),
                                    "rows": rows, "gd_steps_per_s_median": float(np.median(rates)) if rates else None})
    return rates


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser("sweep", __doc__.splitlines()[0])
    parser.add_argument("--programs", nargs="+", default=None, help="library programs (default: all)")
    parser.add_argument("--sizes", nargs="+", type=int, default=None, help="sizes n: n tokens, length n (default: 5 10)")
    parser.add_argument("--gd-sizes", nargs="*", type=int, default=None,
                        help="sizes at which GD runs (default: the smallest size); empty: no GD")
    parser.add_argument("--gd-programs", nargs="*", default=None, help="programs for GD (default: all swept)")
    args = parser.parse_args(argv)
    programs = args.programs or (list(QUICK_PROGRAMS) if args.quick else list(EXAMPLES))
    sizes = args.sizes or (list(QUICK_SIZES) if args.quick else [5, 10])
    gd_sizes = set(args.gd_sizes if args.gd_sizes is not None else [min(sizes)])
    gd_programs = set(args.gd_programs if args.gd_programs is not None else programs)
    steps = args.steps or (QUICK_STEPS if args.quick else DEFAULT_STEPS)
    points = 3 if args.quick else CURVE_POINTS
    rows, all_runs, panels, rates = [], [], {}, []
    for size in sizes:
        for name in programs:
            gd = steps if size in gd_sizes and name in gd_programs else None
            row, runs, curves = sweep_program(name, size, gd, args.seed, points, args.quick)
            rows.append(row)
            all_runs += [{"program": name, "size": size, **r.__dict__} for r in runs]
            panels[f"{name} {size}/{size} (D={row['D']})"] = curves
            print(format_table([row]).splitlines()[-1], flush=True)
            rates = write_outputs(args.out, rows, all_runs, panels, steps, gd_sizes)  # after each program
    print(format_table(rows))
    if rates:
        print(f"GD steps/s (median over {len(rates)} runs, {environment()['backend']}): {np.median(rates):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
