"""Peak memory and first-call cost of one compiled forward pass, each setting in a fresh process.

Per example and setting: `compile_rasp`'s seconds, the process's peak resident memory after it and after the
first forward call (ru_maxrss, MB; the difference is what tracing, XLA compilation and running
the batch added), XLA's own account of the executable (arguments + outputs + temporaries, MB,
from `jitted.lower(...).compile().memory_analysis()`), the first call's seconds (trace + XLA
compile + run) and the median of later calls, the floor (`benchmarks/floor.py`: one dense or
sparse matmul chain over the same non-zeros, measured in the same process) and warm / floor,
the same three in process CPU seconds (`cpu_s`, `floor_cpu`, `cpu_ratio`: on a machine shared
with other jobs the wall clock measures the load, the CPU seconds the work), and how many
weights run in each form (`compiler.model.forms`).

    python benchmarks/forward_memory.py                       # sort 50/50, batch 64
    python benchmarks/forward_memory.py --examples sort,reverse --sizes 25,50 --batch 64
    python benchmarks/forward_memory.py --root /path/to/other/checkout   # compare before/after
    python benchmarks/forward_memory.py --examples hist,sort --sizes 32 --vocab 1000   # 1,000 tokens
    python benchmarks/forward_memory.py --examples sort --sizes 200 --batch 8 --outputs-only --no-floor

`--outputs-only` times and measures `forward(..., outputs_only=True)`: the output alone, without
the residual snapshot after every sub-layer (what `apply_batch` runs); the default measures the
full `ModelOutput`.

`match` is the fraction of the `checked` random sequences (the timed batch, or `--match N`
of them, run in batches of `--batch`) whose decoded output equals `rasp.evaluate`'s (the compiled
model checked at the measured size). `--json PATH` also saves the table with its command and
machine (benchmarks/results.py).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.results import Table, add_json_argument, publish

SNIPPET = r"""
import json, resource, statistics, sys, time
sys.path.insert(0, {root!r})
import collections
import jax, jax.numpy as jnp, numpy as np
from benchmarks.floor import floor_times, median_times
from compiler import compile_rasp
from compiler.examples import EXAMPLES
from compiler.model.agree import same_value
from rasp import rasp

def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB

example = EXAMPLES[{name!r}]
vocab = example.scaled_vocab({vocab})
program = example.build({size})
start = time.perf_counter()
model = compile_rasp(program, vocab, {size})
compile_s = time.perf_counter() - start
after_compile = rss_mb()
rng = np.random.default_rng(1)
batch = [["BOS"] + [vocab[i] for i in rng.integers(len(vocab), size={size})] for _ in range({batch})]
ids = jnp.asarray(model.input_encoder.encode_batch(batch))
start = time.perf_counter()
jax.block_until_ready(model.forward(model.params, ids, outputs_only={outputs_only}).output)
first = time.perf_counter() - start
after_forward = rss_mb()
warm, warm_cpu = median_times(lambda: model.forward(model.params, ids, outputs_only={outputs_only}).output)
floor, floor_cpu = floor_times(model, {batch}, {size} + 1) if {floor} else (float('nan'), float('nan'))
checked = batch + [["BOS"] + [vocab[i] for i in rng.integers(len(vocab), size={size})]
                   for _ in range(max(0, {match} - len(batch)))]
decoded = [out for start in range(0, len(checked), {batch}) for out in model.apply_batch(checked[start:start + {batch}])]
match = sum(
    all(same_value(g, w) for g, w in zip(got[1:], rasp.evaluate(program, row[1:])))
    for got, row in zip(decoded, checked)
) / len(checked)
forms = collections.Counter(spec.applied_form for spec in model.config.linears().values())
analysis = model.forward.lower(model.params, ids, outputs_only={outputs_only}).compile().memory_analysis()
xla = analysis.argument_size_in_bytes + analysis.output_size_in_bytes + analysis.temp_size_in_bytes
print(json.dumps(dict(
    width=model.config.residual_width, compile_s=compile_s, rss_compile=after_compile, rss_forward=after_forward,
    xla_mb=xla / 2**20, temp_mb=analysis.temp_size_in_bytes / 2**20, first_s=first,
    warm_s=warm, floor_s=floor, ratio=warm / floor, cpu_s=warm_cpu, floor_cpu=floor_cpu,
    cpu_ratio=warm_cpu / floor_cpu,
    match=match, checked=len(checked), forms=" ".join(f"{{k}}:{{v}}" for k, v in sorted(forms.items())))))
"""

COLUMNS = (
    ("example", "{:<15}"), ("setting", "{:>7}"), ("width", "{:>6}"), ("compile_s", "{:>9.2f}"), ("rss_compile", "{:>11.0f}"),
    ("rss_forward", "{:>11.0f}"), ("xla_mb", "{:>8.0f}"), ("temp_mb", "{:>8.0f}"),
    ("first_s", "{:>8.2f}"), ("warm_s", "{:>8.3f}"), ("floor_s", "{:>8.3f}"), ("ratio", "{:>6.2f}"),
    ("cpu_s", "{:>8.3f}"), ("floor_cpu", "{:>9.3f}"), ("cpu_ratio", "{:>9.2f}"),
    ("match", "{:>5.2f}"), ("checked", "{:>7}"),
    ("forms", "  {}"),
)


def measure(
    root: Path, name: str, size: int, batch: int, timeout: float, vocab: int | None = None, floor: bool = True,
    outputs_only: bool = False, match: int = 0,
) -> dict:
    vocab = size if vocab is None else vocab
    match = -(-max(match, batch) // batch) * batch  # whole batches: one executable
    code = SNIPPET.format(root=str(root), name=name, size=size, batch=batch, vocab=vocab, floor=floor,
                          outputs_only=outputs_only, match=match)
    row = {"example": name, "setting": f"{vocab}/{size}"}
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return row | {"note": f"over {timeout:.0f} s"}
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return row | {"note": lines[-1][:80] if lines else f"exit code {done.returncode} (killed: out of memory?)"}
    return row | json.loads(done.stdout.strip().splitlines()[-1])


def format_row(row: dict) -> str:
    cells = [fmt.format(row[key]) if key in row else "-".rjust(len(fmt.format(0)) if key != "example" else 15)
             for key, fmt in COLUMNS]
    return " ".join(cells) + (f"  {row['note']}" if "note" in row else "")


# The published table (`--json`): XLA's memory account, the width, the forms and `match` are
# deterministic and compared by `python -m benchmarks.results --check`; seconds and the process's
# peak resident memory are measurements of the machine at that moment.
TABLE_COLUMNS = (
    ("example", "program", "{}"), ("setting", "vocab/len", "{}"), ("width", "width", "{:,}"),
    ("rss_compile", "peak MB after compile", "{:,.0f}"), ("rss_forward", "peak MB after forward", "{:,.0f}"),
    ("xla_mb", "XLA MB", "{:,.1f}"), ("compile_s", "compile s", "{:.2f}"), ("first_s", "first call s", "{:.2f}"),
    ("warm_s", "warm s", "{:.3f}"), ("floor_s", "floor s", "{:.3f}"), ("ratio", "ratio", "{:.2f}"),
    ("cpu_s", "warm CPU s", "{:.3f}"), ("floor_cpu", "floor CPU s", "{:.3f}"), ("cpu_ratio", "cpu ratio", "{:.2f}"),
    ("match", "match (of checked)", "{:.2f}"), ("forms", "weight forms", "{}"), ("note", "note", "{}"),
)
MEASURED = ("peak MB after compile", "peak MB after forward", "compile s", "first call s", "warm s", "floor s", "ratio",
            "warm CPU s", "floor CPU s", "cpu ratio")


def table(rows: list[dict], caption: str) -> Table:
    """The rows as a published table (`benchmarks/results.py`); a cell the run did not measure is "-"."""
    def cell(row: dict, key: str, fmt: str) -> str:
        value = row.get(key)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        text = fmt.format(value)
        return f"{text} ({row['checked']})" if key == "match" else text

    cells = tuple(tuple(cell(row, key, fmt) for key, _, fmt in TABLE_COLUMNS) for row in rows)
    return Table(tuple(title for _, title, _ in TABLE_COLUMNS), cells, timings=MEASURED, caption=caption)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", default="sort", help="comma list of example names")
    parser.add_argument("--sizes", default="50", help="comma list of vocab size = max_seq_len")
    parser.add_argument("--batch", type=int, default=64, help="sequences per forward call")
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout whose compiler is measured")
    parser.add_argument("--vocab", type=int, default=None, help="vocabulary size (default: each size)")
    parser.add_argument("--no-floor", action="store_true", help="skip the floor (slow at 200/200)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per setting")
    parser.add_argument("--outputs-only", action="store_true",
                        help="run forward(..., outputs_only=True): no residual snapshots (docstring)")
    parser.add_argument("--match", type=int, default=0,
                        help="random inputs checked against rasp.evaluate (default: the timed batch), in batches")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    kept = "output only" if args.outputs_only else "output, residuals and attention"
    print(f"batch {args.batch}, {kept}; memory in MB (peak RSS of the process; XLA = args + outputs + temps)")
    print(" ".join(key.rjust(len(fmt.format(0))) if key != "example" else key.ljust(15) for key, fmt in COLUMNS))
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        for name in args.examples.split(","):
            row = measure(args.root, name, size, args.batch, args.timeout, args.vocab, not args.no_floor,
                          args.outputs_only, args.match)
            rows.append(row)
            print(format_row(row), flush=True)
    caption = (f"Batch {args.batch}, {kept}; each setting in a fresh process. Peak MB is the process's peak resident "
               "memory; XLA MB is the executable's arguments, outputs and temporaries by XLA's own account; ratio is "
               "warm / floor (one matmul chain over the same non-zeros), cpu ratio the same in CPU seconds; match is "
               "the share of random inputs decoded as rasp.evaluate does.")
    print()
    publish(table(rows, caption), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
