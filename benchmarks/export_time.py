"""Time of `to_transformer_lens` per library program: the first export in a process, and later ones.

Needs the export extra (with TransformerLens 3.9, as `.[all]` installs, the table times the 3.x route). Every
program runs in a fresh interpreter, so its first export is really the process's first:

* `import`: `import torch, transformer_lens` (what the first export pays once per process);
* `first`: the first `to_transformer_lens(model)` call after that import (TransformerLens' own
  lazy set-up, the tokenizer, the weights);
* `later`: median of `--repeats` further exports of the same model;
* `compressed`: median of exports with `projection=W` (a random `[D, D // 2]` matrix), to show
  what folding the projection costs;
* `numpy`: median of `export_weights(model)` alone (no torch), the floor the TransformerLens
  part is measured against; `later / numpy` is that ratio in the same process.

The example's default vocabulary and length. Timings on a shared machine are noisy; compare
the columns of one run rather than runs.

    python -m benchmarks.export_time
    python -m benchmarks.export_time --programs reverse,sort --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent

SNIPPET = """
import json, statistics, sys, time, warnings
sys.path.insert(0, {root!r})
import numpy as np
from compiler import compile_rasp
from compiler.examples import EXAMPLES
from compiler.io.export import ExportRouteWarning, export_weights, to_transformer_lens
warnings.simplefilter("ignore", ExportRouteWarning)
example = EXAMPLES[{name!r}]
model = compile_rasp(example.build(example.max_seq_len), set(example.vocab), example.max_seq_len)

def seconds(action):
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result

imported, _ = seconds(lambda: __import__("transformer_lens") and __import__("torch"))
first, tl_model = seconds(lambda: to_transformer_lens(model))
later = [seconds(lambda: to_transformer_lens(model))[0] for _ in range({repeats})]
width = model.config.residual_width
w = np.random.default_rng(0).normal(size=(width, max(1, width // 2))).astype(np.float32)
compressed = [seconds(lambda: to_transformer_lens(model, projection=w))[0] for _ in range({repeats})]
numpy_only = [seconds(lambda: export_weights(model))[0] for _ in range({repeats})]
print(json.dumps({{
    "route": tl_model.export_info.route, "d_model": width, "import": imported, "first": first,
    "later": statistics.median(later), "compressed": statistics.median(compressed),
    "numpy": statistics.median(numpy_only),
}}))
"""


def measure(name: str, repeats: int, timeout: float) -> dict | str:
    """The timings of one program in a fresh interpreter, or why there are none."""
    code = SNIPPET.format(root=str(ROOT), name=name, repeats=repeats)
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f} s"
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["failed"])[-1]
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    from compiler.examples import EXAMPLES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", default=",".join(EXAMPLES), help="comma-separated library programs")
    parser.add_argument("--repeats", type=int, default=5, help="exports per median (default 5)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per program (default 300)")
    args = parser.parse_args()
    names = [name.strip() for name in args.programs.split(",") if name.strip()]
    unknown = [name for name in names if name not in EXAMPLES]
    if unknown:
        parser.error(f"unknown programs {unknown}; the library programs are {list(EXAMPLES)}")
    rows = {}
    for name in tqdm(names, desc="export time", unit="program"):
        rows[name] = measure(name, args.repeats, args.timeout)
    routes = {row["route"] for row in rows.values() if isinstance(row, dict)}
    print(f"routes: {', '.join(sorted(routes)) or 'none'}; seconds; later and compressed are medians of {args.repeats}")
    header = f"{'program':16s} {'D':>4s} {'import':>7s} {'first':>7s} {'later':>7s} {'compr.':>7s} {'numpy':>7s} {'later/numpy':>11s}"
    print(header)
    done = []
    for name, row in rows.items():
        if isinstance(row, str):
            print(f"{name:16s} failed: {row}")
            continue
        done.append(row)
        print(
            f"{name:16s} {row['d_model']:4d} {row['import']:7.2f} {row['first']:7.2f} {row['later']:7.3f} "
            f"{row['compressed']:7.3f} {row['numpy']:7.4f} {row['later'] / row['numpy']:11.0f}"
        )
    if done:
        medians = {key: statistics.median(row[key] for row in done) for key in ("import", "first", "later", "compressed", "numpy")}
        print(
            f"{'median':16s} {'':4s} {medians['import']:7.2f} {medians['first']:7.2f} {medians['later']:7.3f} "
            f"{medians['compressed']:7.3f} {medians['numpy']:7.4f}"
        )


if __name__ == "__main__":
    main()
