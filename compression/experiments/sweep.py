"""How far can each library program be compressed and stay exact? Analytic projections vs GD vs PCA.

For every program of ``compiler.examples`` at each size n (vocabulary of n tokens, length n):
D, the protected coordinates p, and the smallest d at which each method is exact on every input
(or on >= 2,000 sampled inputs when there are more than 5,000):

* ``random`` / ``packed``: the analytic projections (:mod:`compression.analytic.packing`), the d their
  bound claims and the d measured;
* ``pca``: the uncentred PCA of the compiled activations;
* ``gd`` / ``gd_packed`` / ``gd_shrink``: the trainer (:class:`~compression.learned.config.GDRecipe`:
  ``--steps`` budget per run, AdamW with warmup + cosine, checked for exactness every
  ``check_every`` steps and stopped once exact, ``--gd-seeds`` seeds per width) from an orthogonal
  start / from the packed projection narrowed to d / from the exact packed projection, one column
  faded out at a time (``--gd-starts`` picks them); only at the sizes in ``--gd-sizes``.

Where every input is enumerated, the analytic projections also zero the coordinates that are
never on (``compression.exactness.never_on``: a fact about the whole input space there); with
sampled inputs they use the weights alone. ``never_on`` in the table counts them.

Analytic and PCA widths come from binary searches (their exactness grows with d). GD's does not
always (a run at a larger d can fail where a smaller one succeeds), so GD widths come from scans
(``compression.width_search.gd_width_scan``), one width at a time: from an orthogonal start
around the packed exact width (upwards from it until a width is reached, then downwards,
``scan_from``), from the packed start downwards from one below the packed exact width to the packed
construction's smallest width; both stop after ``--patience`` widths in a row that no seed made
exact. The reported d is the smallest width any seed made exact, with the median steps it took,
and ``*_tried`` gives the widths tried.

Writes ``sweep.csv`` (the table), ``sweep_gd_runs.csv`` (every GD run: d, init, seed, steps to
exactness, steps/s), ``sweep_curves.csv`` and ``sweep_accuracy.png`` (sequence accuracy vs d per
method and program; for GD the best seed at each width tried) and ``sweep.json`` into ``--out``;
prints the table. Runs unchanged on CPU or GPU (JAX's default backend).

Usage: ``python -m compression.experiments.sweep [--quick] [--programs length sort] [--sizes 5 10]``
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from compiler.errors import CompressionError
from compiler.examples import CATALOGUE, EXAMPLES
from compression import plots
from compression.analytic.packing import make_projection, min_width, packed_width
from compression.analytic.structure import ResidualStructure, residual_structure
from compression.claims import claim_exactness
from compression.exactness import ExactnessCheck, exactness_check, never_on
from compression.experiments.common import base_parser, environment, read_csv, write_csv, write_json
from compression.learned.config import GDRecipe, LossConfig
from compression.task import CompressionTask, make_task
from compression.width_search import (
    GDRun,
    analytic_exact_width,
    claimed_width,
    gd_shrink_scan,
    gd_width_scan,
    pca_exact_width,
    pca_projection,
)

# Programs whose inputs must not repeat a token (their RASP semantics assume distinct keys).
UNIQUE_TOKENS = frozenset({"sort_unique"})
DEFAULT_STEPS, QUICK_STEPS = GDRecipe().steps, 100
DEFAULT_PATIENCE = 2
# the start GD from packed uses (see compression.experiments.gd_start for the comparison)
PACKED_START = "packed"
# GD starts and their table keys: orthogonal, the packed projection narrowed to d, and the exact
# packed projection shrunk one column at a time (compression.width_search.gd_shrink_scan)
GD_KEYS = {"orthogonal": "gd", PACKED_START: "gd_packed", "shrink": "gd_shrink"}
QUICK_PROGRAMS, QUICK_SIZES = ("length",), (3,)
CURVE_POINTS = 6


def check_programs(names: Sequence[str]) -> None:
    """Raise CompressionError naming the first of ``names`` that is not in the examples catalogue."""
    for name in names:
        if name not in CATALOGUE:
            raise CompressionError(f"unknown program {name!r}; choose from {', '.join(CATALOGUE)}")


def program_task(name: str, size: int, optimize: bool = False) -> CompressionTask:
    """The library program ``name`` with ``size`` tokens (``Example.scaled_vocab``) and length ``size``.

    Any program of the catalogue, loops (``compiler.examples.LOOP_EXAMPLES``) included: a loop's
    tied block is trained as it runs, and the analytic side reads it written out
    (``compression.analytic.structure.residual_structure``). The sweep's default list is the
    straight-line ``EXAMPLES``.
    """
    check_programs([name])
    example = CATALOGUE[name]
    return make_task(name, example.build(size), example.scaled_vocab(size), size, unique_tokens=name in UNIQUE_TOKENS,
                     optimize=optimize)


def _grid(lo: int, hi: int, points: int) -> list[int]:
    return sorted({int(round(v)) for v in np.linspace(lo, hi, points)}) if lo <= hi else []


def sweep_program(name: str, size: int, recipe: GDRecipe | None, seed: int = 0, curve_points: int = CURVE_POINTS,
                  quick: bool = False, patience: int = DEFAULT_PATIENCE, starts: Sequence[str] = tuple(GD_KEYS),
                  depth: int | None = None, up: int | None = None) -> tuple[dict[str, Any], list[GDRun], dict[str, list]]:
    """The table row, the GD runs and the accuracy curves of one program at one size.

    GD (when ``recipe`` is given) scans widths (:func:`~compression.width_search.gd_width_scan`):
    from an orthogonal start around the packed exact width (``scan_from``), from the packed start
    downwards from one below it to the packed construction's smallest width, stopping after
    ``patience`` widths in a row that no seed made exact; ``shrink`` runs
    :func:`~compression.width_search.gd_shrink_scan` from the exact packed W. ``starts`` picks
    among the three. ``quick`` makes one scan step per start: orthogonal at the packed width, the
    others one below it. ``depth``: the orthogonal and narrowed-packed scans go at most that many
    widths below the packed exact width (None: down to 1); ``up``: the orthogonal scan goes at most
    that many widths above it (None: up to D - 1).
    """
    start = time.perf_counter()
    task = program_task(name, size)
    check = exactness_check(task, seed=seed)
    dead = never_on(check) if check.enumerated else ()
    structure = residual_structure(task.compiled, never_on=dead)
    big_d = structure.residual_dim
    row: dict[str, Any] = {"program": name, "size": size, "D": big_d, "protected": len(structure.protected),
                           "inputs": check.size, "enumerated": check.enumerated, "never_on": len(dead),
                           "classes": len(structure.classes)}
    curves = analytic_columns(row, check, structure, seed, curve_points)
    runs = gd_columns(row, curves, check, structure, recipe, seed, quick, patience, starts, depth, up)
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row, runs, curves


def analytic_columns(row: dict[str, Any], check: ExactnessCheck, structure: ResidualStructure, seed: int,
                     curve_points: int) -> dict[str, list]:
    """Fill ``row``'s random, packed and PCA columns; returns their accuracy curves."""
    big_d = structure.residual_dim
    curves: dict[str, list] = {}
    for method in ("random", "packed"):
        claimed = row[f"{method}_claimed"] = claimed_width(structure, method, seed)
        # the bound's promise, checked as every claim is (compression.claims): every input up to
        # 10^5 of them, else a sample plus the inputs where the bound's margin is tightest
        claim = None if claimed is None else claim_exactness(check.task, make_projection(structure, method, claimed, seed),
                                                              structure, seed=seed)
        row[f"{method}_claim_holds"] = None if claim is None else claim.check.passed
        row[f"{method}_claim_check"] = None if claim is None else claim.check.describe()
        row[f"{method}_exact"] = analytic_exact_width(check, structure, method, seed)
        curves[method] = [(d, check.sequence_accuracy(make_projection(structure, method, d, seed)))
                          for d in _grid(min_width(structure, method), big_d, curve_points)]
    row["packed_full_margin"] = packed_width(structure, seed)
    row["pca_exact"] = pca_exact_width(check)
    curves["pca"] = [(d, check.sequence_accuracy(pca_projection(check, d))) for d in _grid(1, big_d, curve_points)]
    return curves


def gd_columns(row: dict[str, Any], curves: dict[str, list], check: ExactnessCheck, structure: ResidualStructure,
               recipe: GDRecipe | None, seed: int, quick: bool, patience: int, starts: Sequence[str],
               depth: int | None = None, up: int | None = None) -> list[GDRun]:
    """Fill ``row``'s GD columns (None where not run) and ``curves``' GD curves; returns every run
    (``depth``, ``up``: see :func:`sweep_program`)."""
    big_d = structure.residual_dim
    runs: list[GDRun] = []
    for key in GD_KEYS.values():
        row[f"{key}_exact"] = row[f"{key}_steps"] = row[f"{key}_tried"] = None  # not run
    row["gd_shrink_chain_steps"] = None
    if recipe is None:
        return runs
    packed_hi = row["packed_exact"] or big_d
    # orthogonal: every d below D (d = D is the square orthogonal start, exact before training);
    # from packed: below the packed exact width (the packed start is exact there at step 0) down
    # to the construction's smallest width (below it there is no packed start)
    floor = 1 if depth is None else max(1, packed_hi - depth)
    top = big_d - 1 if up is None else min(big_d - 1, packed_hi + up)
    widths: dict[str, Sequence[int]] = {"gd": range(top, floor - 1, -1),
              "gd_packed": range(packed_hi - 1, max(min_width(structure, "packed"), floor) - 1, -1)}
    scan_starts = {"gd": min(packed_hi, big_d - 1), "gd_packed": None}
    if quick:  # one training run per start: at the packed width, and one below it
        widths = {"gd": [packed_hi], "gd_packed": [packed_hi - 1]}
        scan_starts["gd"] = None
    for init in starts:
        key = GD_KEYS[init]
        if init == "shrink":
            if not row["packed_exact"]:
                continue
            exact_w = make_projection(structure, "packed", packed_hi, seed)
            scan = gd_shrink_scan(check, exact_w, recipe, seed, patience, lo=packed_hi - 1 if quick else 1)
        else:
            scan = gd_width_scan(check, widths[key], recipe, init, structure, seed, patience,
                                 packed_exact=packed_hi, start=scan_starts[key])
        smallest = scan.smallest
        from_packed = init != "orthogonal"
        if from_packed and (smallest is None or smallest > packed_hi):
            smallest = packed_hi if row["packed_exact"] else None
        row[f"{key}_exact"] = smallest
        row[f"{key}_steps"] = (0.0 if from_packed and smallest == packed_hi
                               else scan.median_steps_to_exact(smallest) if smallest else None)
        row[f"{key}_tried"] = f"{min(scan.tried)}-{max(scan.tried)}" if scan.tried else None
        if init == "shrink":  # every step of the chain from the packed width down to the smallest reached
            row["gd_shrink_chain_steps"] = sum(r.steps for r in scan.runs if smallest and r.d >= smallest)
        best: dict[int, float] = {}
        for r in scan.runs:  # the best accuracy any seed reached at each width
            best[r.d] = max(best.get(r.d, 0.0), r.sequence_accuracy)
        curves[key] = sorted(best.items())
        runs.extend(scan.runs)
    return runs


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The table as GitHub markdown (``-`` where a method is not exact up to D or was not run;
    ``none in a-b`` where a GD scan tried widths a-b and reached none)."""
    columns = ["program", "size", "D", "protected", "never_on", "random_claimed", "random_exact", "packed_claimed",
               "packed_exact", "gd_exact", "gd_steps", "gd_packed_exact", "gd_packed_steps", "gd_shrink_exact",
               "gd_shrink_steps", "pca_exact"]
    header = ["program", "n", "D", "p", "never on", "random (bound)", "random", "packed (bound)", "packed", "GD", "GD steps",
              "GD from packed", "steps", "GD shrinking packed", "steps", "PCA"]

    def cell(row: dict[str, Any], column: str) -> str:
        v = row.get(column)
        if v is None:
            tried = row.get(column.replace("_exact", "_tried")) if column.startswith("gd") else None
            return f"none in {tried}" if column.endswith("_exact") and tried else "-"
        if isinstance(v, str):  # read back from a CSV
            text = v
            try:
                v = float(text)
            except ValueError:
                return text
        return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(r, c) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


OBJECTIVES = {"exact": LossConfig.exact(), "paper": LossConfig(), "balanced": LossConfig.exact(balance_outputs=True),
              "balanced-written": LossConfig.exact(balance_outputs=True, written_margin=False)}


def add_objective_argument(parser: argparse.ArgumentParser) -> None:
    """``--objective``: the loss GD minimises (``balanced``: :meth:`LossConfig.exact` with every
    compiled output value weighing the same per batch, the default recipe's; ``exact``: without
    that weighting; ``balanced-written``: ``balanced`` with the written outputs compared
    coordinate by coordinate, as the sweeps before ``written_margin`` ran; ``paper``: the paper's
    cross-entropy + L_layer, as the first sweeps ran)."""
    parser.add_argument("--objective", choices=tuple(OBJECTIVES), default=None,
                        help="GD's loss: balanced (default: the exactness objective, each output value weighing "
                             "the same), exact (unweighted), balanced-written (the written outputs compared two-sided) "
                             "or paper (cross-entropy + L_layer read back through W)")


def gd_recipe_from_args(args: argparse.Namespace) -> GDRecipe:
    """The GD recipe of an experiment run: :class:`GDRecipe` defaults with the command line's
    steps, learning rate, weight decay, batch, check interval, seeds, objective and replay share."""
    base = GDRecipe()
    quick = getattr(args, "quick", False)
    objective = getattr(args, "objective", None)
    return GDRecipe(
        steps=args.steps or (QUICK_STEPS if quick else base.steps), batch_size=args.batch_size,
        check_every=args.chunk_size or (50 if quick else base.check_every),
        seeds=getattr(args, "gd_seeds", None) or (1 if quick else base.seeds),
        optimizer=dataclasses.replace(base.optimizer, lr_init=args.lr,
                                      weight_decay=base.optimizer.weight_decay if getattr(args, "weight_decay", None) is None
                                      else args.weight_decay),
        loss=OBJECTIVES[objective] if objective else base.loss,
        sampling=base.sampling if getattr(args, "replay", None) is None
        else dataclasses.replace(base.sampling, replay_fraction=args.replay))


def write_outputs(out: Path, rows: list[dict], runs: list[dict], panels: dict, recipe: GDRecipe,
                  gd_sizes: set[int]) -> list[float]:
    """Write the table, GD runs, curves, plot and summary so far; returns the GD steps/s seen."""
    write_csv(out / "sweep.csv", rows)
    write_csv(out / "sweep_gd_runs.csv", runs)
    write_csv(out / "sweep_curves.csv", [{"program": p, "method": m, "d": d, "sequence_accuracy": a}
                                         for p, methods in panels.items() for m, pts in methods.items() for d, a in pts])
    plots.plot_accuracy_vs_width(panels, out / "sweep_accuracy.png", "exactness vs residual width d")
    rates = [r["steps_per_s"] for r in runs if np.isfinite(r["steps_per_s"])]
    write_json(out / "sweep.json", {"environment": environment(), "gd_recipe": dataclasses.asdict(recipe),
                                    "gd_sizes": sorted(gd_sizes), "rows": rows,
                                    "gd_steps_per_s_median": float(np.median(rates)) if rates else None})
    return rates


def combine_runs(folders: Sequence[Path], out: Path) -> list[dict[str, Any]]:
    """Merge the outputs of sweeps run in parts (same programs and code, different ``--gd-starts``
    or programs) into ``out``: per (program, size) each cell is taken from the first folder that
    filled it; curves and GD runs are pooled. Writes the table, runs, curves, plot and summary."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    runs: list[dict[str, Any]] = []
    points: dict[tuple[str, str, str], float] = {}
    for folder in folders:
        for row in read_csv(folder / "sweep.csv"):
            merged = rows.setdefault((row["program"], row["size"]), {})
            for k, v in row.items():
                if merged.get(k) is None:
                    merged[k] = v
        if (folder / "sweep_gd_runs.csv").exists():
            runs += read_csv(folder / "sweep_gd_runs.csv")
        for c in read_csv(folder / "sweep_curves.csv"):
            points.setdefault((c["program"], c["method"], c["d"]), float(c["sequence_accuracy"]))
    columns = list(dict.fromkeys(k for row in rows.values() for k in row))
    table = [{k: row.get(k) for k in columns} for row in rows.values()]
    panels: dict[str, dict[str, list]] = {}
    for (program, method, d), accuracy in points.items():
        panels.setdefault(program, {}).setdefault(method, []).append((int(d), accuracy))
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "sweep.csv", table)
    if runs:
        write_csv(out / "sweep_gd_runs.csv", [{k: r.get(k) for k in runs[0]} for r in runs])
    write_csv(out / "sweep_curves.csv", [{"program": p, "method": m, "d": d, "sequence_accuracy": a}
                                         for (p, m, d), a in points.items()])
    plots.plot_accuracy_vs_width(panels, out / "sweep_accuracy.png", "exactness vs residual width d")
    rates = [float(r["steps_per_s"]) for r in runs if r.get("steps_per_s") not in (None, "nan")]
    write_json(out / "sweep.json", {"combined_from": [str(f) for f in folders], "rows": table,
                                    "gd_steps_per_s_median": float(np.median(rates)) if rates else None})
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser("sweep", __doc__.splitlines()[0])
    parser.add_argument("--programs", nargs="+", default=None, help="library programs, loops included (default: every straight-line one)")
    parser.add_argument("--sizes", nargs="+", type=int, default=None, help="sizes n: n tokens, length n (default: 5 10)")
    parser.add_argument("--gd-sizes", nargs="*", type=int, default=None,
                        help="sizes at which GD runs (default: the smallest size); empty: no GD")
    parser.add_argument("--gd-programs", nargs="*", default=None, help="programs for GD (default: all swept)")
    parser.add_argument("--gd-seeds", type=int, default=None,
                        help=f"GD seeds tried per width (default: {GDRecipe().seeds}; quick: 1)")
    parser.add_argument("--weight-decay", type=float, default=None,
                        help=f"AdamW weight decay of GD (default: {GDRecipe().optimizer.weight_decay})")
    parser.add_argument("--gd-starts", nargs="+", choices=tuple(GD_KEYS), default=tuple(GD_KEYS),
                        help="GD starts to scan (default: all): orthogonal, the packed projection narrowed to d, "
                             "the exact packed projection shrunk one column at a time")
    parser.add_argument("--patience", type=int, default=None,
                        help=f"GD scans stop after this many unreached widths in a row (default: {DEFAULT_PATIENCE})")
    parser.add_argument("--gd-up", type=int, default=None,
                        help="the orthogonal GD scan goes at most this many widths above the packed exact width "
                             "(default: up to D - 1; 0: the packed width and below only)")
    parser.add_argument("--gd-depth", type=int, default=None,
                        help="GD scans go at most this many widths below the packed exact width (default: no limit)")
    add_objective_argument(parser)
    parser.add_argument("--replay", type=float, default=None,
                        help="share of every GD batch drawn from the inputs the last exactness check found wrong "
                             f"(default: {GDRecipe().sampling.replay_fraction})")
    parser.add_argument("--combine", nargs="+", type=Path, default=None, metavar="DIR",
                        help="run nothing: merge the outputs of earlier runs (e.g. one per GD start) into --out")
    args = parser.parse_args(argv)
    if args.combine:
        rows = combine_runs(args.combine, args.out)
        print(format_table(rows))
        return 0
    programs = args.programs or (list(QUICK_PROGRAMS) if args.quick else list(EXAMPLES))
    check_programs(programs)  # before any compiling
    if args.gd_depth is not None and args.gd_depth < 1:
        parser.error(f"--gd-depth must be >= 1, got {args.gd_depth}")
    if args.gd_up is not None and args.gd_up < 0:
        parser.error(f"--gd-up must be >= 0, got {args.gd_up}")
    sizes = args.sizes or (list(QUICK_SIZES) if args.quick else [5, 10])
    gd_sizes = set(args.gd_sizes if args.gd_sizes is not None else [min(sizes)])
    gd_programs = set(args.gd_programs if args.gd_programs is not None else programs)
    recipe = gd_recipe_from_args(args)
    patience = args.patience or (1 if args.quick else DEFAULT_PATIENCE)
    points = 3 if args.quick else CURVE_POINTS
    rows, all_runs, panels, rates = [], [], {}, []
    for size in sizes:
        for name in programs:
            gd = recipe if size in gd_sizes and name in gd_programs else None
            row, runs, curves = sweep_program(name, size, gd, args.seed, points, args.quick, patience, args.gd_starts,
                                              args.gd_depth, args.gd_up)
            rows.append(row)
            all_runs += [{"program": name, "size": size, **dataclasses.asdict(r)} for r in runs]
            panels[f"{name} {size}/{size} (D={row['D']})"] = curves
            print(format_table([row]).splitlines()[-1], flush=True)
            rates = write_outputs(args.out, rows, all_runs, panels, recipe, gd_sizes)  # after each program
    print(format_table(rows))
    if rates:
        print(f"GD steps/s (median over {len(rates)} runs, {environment()['backend']}): {np.median(rates):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
