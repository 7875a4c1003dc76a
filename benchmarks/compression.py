"""Compression speed: steps per second and wall time to reach the compiled model's accuracy.

Cases (the paper's two compression experiments): ``frac_prevs`` at d = 6 and ``sort_unique`` at
the width its experiment uses. For each: the time of the first (compiling) chunk, steady steps
per second (accuracy checks included), and the wall time and step count at which, checked after
every chunk on the whole enumerated input space against the RASP evaluator,

* ``quality``: the paper's claim first holds — for ``frac_prevs`` ("as good as the compiled
  model") RMS error below half the gap between output values, so the typical position decodes
  right; for ``sort_unique`` ("almost perfect accuracy") accuracy of at least 98%;
* ``compiled acc``: the compressed model's accuracy first reaches the compiled model's.

The run stops once both are reached, or at ``--steps``.

Run: ``python benchmarks/compression.py [--cases frac_prevs sort_unique] [--steps N]
[--cpu-devices N]``. ``--cpu-devices N`` splits the host CPU into N XLA devices (data parallel
over cores); on a GPU/TPU machine every local accelerator is used. Prints one row per case.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


NEAR_PERFECT = 0.98  # the accuracy read as the paper's "almost perfect" for sort_unique


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="*", default=["frac_prevs", "sort_unique"],
                        help="cases, optionally with a width: frac_prevs:8 (default widths: 6 and 12)")
    parser.add_argument("--steps", type=int, default=None,
                        help="step budget (and schedule length) per case; default: the experiment's")
    parser.add_argument("--chunk-size", type=int, default=250, help="steps per jitted call (accuracy checked between)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=None, help="initial learning rate (default: the experiments')")
    parser.add_argument("--cpu-devices", type=int, default=None, help="XLA host devices to split the CPU into")
    return parser.parse_args()


def main() -> None:
    args = _parse()
    if args.cpu_devices:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                   + f" --xla_force_host_platform_device_count={args.cpu_devices}").strip()
    import jax

    from compression.evaluation import accuracy, nearest_value_tolerance
    from compression.experiments import frac_prevs as fp_exp
    from compression.experiments import sort_unique as su_exp
    from compression.experiments.common import EXPERIMENT_LR
    from compression.learned.config import OptimizerConfig, TrainConfig
    from compression.learned.sampling import enumerate_inputs
    from compression.learned.train import Compressor
    from compression.task import frac_prevs_task, sort_unique_task

    cases = {"frac_prevs": (frac_prevs_task, fp_exp.BENCHMARK_D, fp_exp.DEFAULT_STEPS),
             "sort_unique": (sort_unique_task, su_exp.DEFAULT_D, su_exp.DEFAULT_STEPS)}
    devices = jax.local_devices()
    budget = args.steps or "experiment default"
    print(f"backend={jax.default_backend()} devices={len(devices)} ({devices[0].device_kind}) "
          f"cpu_count={os.cpu_count()} batch={args.batch_size} chunk={args.chunk_size} step budget={budget} "
          f"lr_init={args.lr or EXPERIMENT_LR}")
    header = (f"{'case':<12} {'D':>3} {'d':>3} {'compile s':>9} {'steps/s':>8} {'quality at':>16} "
              f"{'compiled acc at':>16} {'best acc':>8} {'final mse':>9}")
    print(header)
    print("-" * len(header))
    for name in args.cases:
        name, _, width = name.partition(":")
        make, d, default_steps = cases[name]
        d = int(width) if width else d
        task = make()
        refs = task.reference_set(enumerate_inputs(task.space))
        numerical = task.model.output_kind == "numerical"
        tol = nearest_value_tolerance(refs) if numerical else 0.5
        target = accuracy(task.model, None, refs, tol).position
        config = TrainConfig(d=d, steps=args.steps or default_steps, batch_size=args.batch_size,
                             chunk_size=args.chunk_size, seed=args.seed,
                             optimizer=OptimizerConfig(lr_init=args.lr or EXPERIMENT_LR))
        compressor = Compressor(task.model, task.space, config)
        marks: list[tuple[int, float, float, float]] = []  # (step, seconds, accuracy, mse)
        start = time.perf_counter()

        def quality(acc, mse) -> bool:
            return mse <= tol**2 if numerical else acc >= NEAR_PERFECT

        def check(state, history) -> bool:
            got = accuracy(task.model, state.projection, refs, tol)
            marks.append((len(history["total"]), time.perf_counter() - start, got.position, got.mse))
            return any(quality(a, m) for _, _, a, m in marks) and got.position >= target

        compressor.train(progress=False, on_chunk=check)
        if len(marks) > 1:
            steady = (marks[-1][0] - marks[0][0]) / (marks[-1][1] - marks[0][1])
            compile_s = max(marks[0][1] - marks[0][0] / steady, 0.0)
        else:
            steady, compile_s = float("nan"), marks[0][1]

        def first(pred) -> str:
            hit = next(((s, t) for s, t, a, m in marks if pred(a, m)), None)
            return f"{hit[1]:.1f}s/{hit[0]}st" if hit else f"not in {marks[-1][0]}"

        print(f"{name:<12} {task.model.residual_dim:>3} {d:>3} {compile_s:>9.1f} {steady:>8.0f} "
              f"{first(quality):>16} {first(lambda a, m: a >= target):>16} {max(m[2] for m in marks):>8.4f} "
              f"{marks[-1][3]:>9.2e}", flush=True)


if __name__ == "__main__":
    main()
