"""Generation throughput: activations with their true codes at a stage's last residual site.

Times :func:`compiler.lab.features.stream.stream_activations` (sampling, the compressed and the
exact forward pass, code extraction; nothing written) on a saved stage model and projection, and
prints the rate of every repeat and the median: wall-clock over the batches (``rates``), wall-clock
over the whole call, set-up included (``call_rates``), and CPU seconds of this process over the
whole call (all its threads, ``cpu_rates``), with the time the medians give for 10^7 activations
and the load average at the end. The model and projection are built and saved on
the first run (the 16k build takes many minutes), so later runs, and runs of another checkout of
this file on the same files, time generation alone:

    python benchmarks/feature_generation.py --stage 4k --model /tmp/m4k.tracr --projection /tmp/w4k.npy

To compare two versions of the code under the same load, run each checkout's copy in turns.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler import compile_rasp, load_model, save_model
from compiler.lab.features import STAGES, Site, build_stage, default_batch, stream_activations


def model_and_projection(stage: str, model_path: Path, projection_path: Path):
    """The stage's compiled model and packed projection, from the files or built and saved there."""
    spec = STAGES[stage]
    if not projection_path.exists():
        built = build_stage(spec)
        save_model(built.compiled, model_path, storage="sparse")
        np.save(projection_path, built.projection)
        return built.compiled, built.projection
    if not model_path.exists():
        save_model(compile_rasp(list(spec.programs()), set(range(spec.vocab_size)), spec.max_seq_len,
                                optimize=False), model_path, storage="sparse")
    return load_model(model_path), np.load(projection_path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", default="4k", choices=sorted(STAGES))
    parser.add_argument("--model", required=True, help="saved compiled model (written if missing)")
    parser.add_argument("--projection", required=True, help=".npy packed projection (written if missing)")
    parser.add_argument("--tokens", type=int, default=10_000, help="activations timed per repeat")
    parser.add_argument("--batch", type=int, default=None,
                        help="inputs per jitted batch (default: stream.default_batch, by the model's size)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--label", default=str(ROOT), help="name of this row")
    args = parser.parse_args()
    model, w = model_and_projection(args.stage, Path(args.model), Path(args.projection))
    site = Site("resid", len(model.config.layers))
    folder = Path(tempfile.mkdtemp(prefix="generation-"))
    args.batch = args.batch or default_batch(model)
    start = time.perf_counter()
    stream_activations(model, site, folder, args.batch, w, batch_inputs=args.batch, progress=False, write=False)
    warmup = time.perf_counter() - start
    rates, call_rates, cpu_rates = [], [], []
    for r in range(args.repeats):
        cpu, start = time.process_time(), time.perf_counter()
        report = stream_activations(model, site, folder, args.tokens, w, batch_inputs=args.batch, progress=False,
                                    write=False, seed=7 + r)
        rates.append(report.tokens_per_second)  # batches only
        call_rates.append(report.tokens / (time.perf_counter() - start))  # the whole call, set-up included
        cpu_rates.append(report.tokens / (time.process_time() - cpu))  # the whole call, CPU of all threads
    wall, cpu = float(np.median(rates)), float(np.median(cpu_rates))
    print(json.dumps({"label": args.label, "stage": args.stage, "D": model.config.residual_width,
                      "d": int(w.shape[1]), "batch": args.batch, "tokens": args.tokens, "warmup_s": round(warmup, 1),
                      "rates": [round(r, 1) for r in rates], "median_per_s": round(wall, 1),
                      "call_rates": [round(r, 1) for r in call_rates],
                      "cpu_rates": [round(r, 1) for r in cpu_rates], "median_per_cpu_s": round(cpu, 1),
                      "hours_for_1e7": round(1e7 / wall / 3600, 2), "cpu_hours_for_1e7": round(1e7 / cpu / 3600, 2),
                      "load_average": [round(x, 1) for x in os.getloadavg()]}),
          flush=True)


if __name__ == "__main__":
    main()
