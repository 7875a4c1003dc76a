"""This compiler and DeepMind's Tracr side by side on the library programs, each in a fresh process.

Tracr is not a dependency: it runs from its own virtual environment (`--tracr-python`, default
`/work/wt/venvs/tracr/bin/python`; make one with `python -m venv DIR && DIR/bin/pip install
tracr-pypi`). Both sides compile the same library call (`compiler.examples`: Tracr's `lib` has
the same functions) with the same vocabulary and length, then run one full-length input once.

Per program and setting: `ours_s` is our compile plus first forward call (trace, XLA compilation
and run included), `tracr_s` Tracr's first forward call alone (its compile excluded), `ratio`
their quotient (below 1: our compile and first call together are faster than Tracr's first
call); then layers, widest MLP, total hidden units (`hid`: units with a non-zero weight, summed
over the MLPs; Tracr pads every MLP to its widest, the padding is not counted) and non-zero
weights of both (`nz_ratio`: ours / Tracr's). Tracr's
unembedding is not a parameter (it reads the output s-op's directions), so our non-zeros are
counted without ours (an identity on those directions).

    python benchmarks/tracr_side.py --sizes 25
    python benchmarks/tracr_side.py --sizes 5,10,25,50 --examples sort,hist

`--json PATH` also saves the table with its command and machine (benchmarks/results.py).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import Table, add_json_argument, publish
from compiler.examples import EXAMPLES

TRACR_PYTHON = Path("/work/wt/venvs/tracr/bin/python")

TRACR_SNIPPET = r"""
import json, time
import numpy as np
from tracr.rasp import rasp
from tracr.compiler import compiling, lib
max_seq_len = {n}
try:
    program = eval({call!r})
except AttributeError as error:  # a library function Tracr does not have
    print(json.dumps(dict(note=f"not in its library ({{error.name}})")))
    raise SystemExit(0)
vocab = {vocab!r}
model = compiling.compile_rasp_to_model(program, vocab=set(vocab), max_seq_len=max_seq_len, compiler_bos="BOS")
tokens = ["BOS"] + [vocab[i % len(vocab)] for i in range(max_seq_len)]
start = time.perf_counter()
out = model.apply(tokens)
np.asarray(out.transformer_output)
first = time.perf_counter() - start
nonzero = sum(int(np.count_nonzero(np.asarray(v))) for m in model.params.values() for v in m.values())
cfg = model.model_config
units = []  # per MLP layer: hidden units with a non-zero weight (Tracr pads every MLP to the widest)
for key, value in model.params.items():
    if key.endswith("mlp/linear_1"):
        w_in = np.asarray(value["w"]) != 0
        w_out = np.asarray(model.params[key[: -len("linear_1")] + "linear_2"]["w"]) != 0
        units.append(int((w_in.any(axis=0) | w_out.any(axis=1)).sum()))
print(json.dumps(dict(first_s=first, layers=cfg.num_layers, mlp=max(units, default=0), hidden=sum(units),
                      nonzero=nonzero)))
"""

OURS_SNIPPET = r"""
import json, sys, time
sys.path.insert(0, {root!r})
start = time.perf_counter()
from compiler import compile_rasp
from compiler.examples import EXAMPLES
from compiler.model.config import MLPSpec
from compiler.model.weights import module_params, parameter_counts
example = EXAMPLES[{name!r}]
vocab = {vocab!r}
start = time.perf_counter()
model = compile_rasp(example.build({n}), vocab, {n})
compiled = time.perf_counter()
model.apply(["BOS"] + [vocab[i % len(vocab)] for i in range({n})])
first = time.perf_counter()
units = []  # per MLP sub-layer: hidden units with a non-zero weight
for index, layer in enumerate(model.config.layers):
    if isinstance(layer, MLPSpec):
        weights = module_params(model, f"layer_{{index}}")
        w_in = layer.w_in.full_matrix(weights["w_in"], model.config.residual_width, layer.w_in.shape[1]) != 0
        w_out = layer.w_out.full_matrix(weights["w_out"], layer.w_out.shape[0], model.config.residual_width) != 0
        units.append(int((w_in.any(axis=0) | w_out.any(axis=1)).sum()))
print(json.dumps(dict(compile_s=compiled - start, first_s=first - compiled, total_s=first - start,
                      layers=model.config.num_layers, mlp=max(units, default=0), hidden=sum(units),
                      nonzero=parameter_counts(model)[1] - int((module_params(model, "unembed")["w_u"] != 0).sum()))))
"""


def _run(python: Path | str, code: str, timeout: float) -> dict:
    try:
        done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"note": f"over {timeout:.0f} s"}
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["failed"]
        return {"note": lines[-1][:70]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(name: str, size: int, tracr_python: Path, timeout: float) -> dict:
    example = EXAMPLES[name]
    vocab = list(example.scaled_vocab(size))
    ours = _run(sys.executable, OURS_SNIPPET.format(root=str(ROOT), name=name, vocab=vocab, n=size), timeout)
    theirs = _run(tracr_python, TRACR_SNIPPET.format(call=example.call, vocab=vocab, n=size), timeout)
    row = {"example": name, "setting": f"{len(vocab)}/{size}"}
    row.update({f"ours_{k}": v for k, v in ours.items()})
    row.update({f"tracr_{k}": v for k, v in theirs.items()})
    if "ours_total_s" in row and "tracr_first_s" in row:
        row["ratio"] = row["ours_total_s"] / row["tracr_first_s"]
    if "ours_nonzero" in row and "tracr_nonzero" in row:
        row["nz_ratio"] = row["ours_nonzero"] / max(row["tracr_nonzero"], 1)
    return row


COLUMNS = (  # (key, header, format)
    ("example", "example", "{:<15}"), ("setting", "setting", "{:>7}"), ("ours_total_s", "ours_s", "{:>7.2f}"),
    ("tracr_first_s", "tracr_s", "{:>7.2f}"), ("ratio", "ratio", "{:>6.2f}"), ("ours_layers", "lay", "{:>4}"),
    ("tracr_layers", "lay_t", "{:>5}"), ("ours_mlp", "mlp", "{:>5}"), ("tracr_mlp", "mlp_t", "{:>6}"),
    ("ours_hidden", "hid", "{:>6}"), ("tracr_hidden", "hid_t", "{:>6}"),
    ("ours_nonzero", "nz", "{:>8}"), ("tracr_nonzero", "nz_t", "{:>8}"), ("nz_ratio", "nz_rat", "{:>6.2f}"),
)


def format_row(row: dict) -> str:
    cells = []
    for key, header, fmt in COLUMNS:
        width = max(len(header), len(fmt.format(0)) if key not in ("example", "setting") else len(header))
        cells.append(fmt.format(row[key]).rjust(width) if key in row else "-".rjust(width))
    notes = [f"{side}: {row[f'{side}_note']}" for side in ("ours", "tracr") if f"{side}_note" in row]
    return " ".join(cells) + ("  " + "; ".join(notes) if notes else "")


TIMED = ("ours: compile + first call s", "Tracr: first call s", "time ratio")


def table(rows: list[dict], caption: str) -> Table:
    """The rows as a published table (`benchmarks/results.py`), by program then size: sizes are
    compared by `python -m benchmarks.results --check`, seconds are measurements of the machine."""
    def pair(row: dict, key: str) -> str:
        ours, theirs = row.get(f"ours_{key}"), row.get(f"tracr_{key}")
        return f"{'-' if ours is None else f'{ours:,}'} / {'-' if theirs is None else f'{theirs:,}'}"

    def number(row: dict, key: str, fmt: str) -> str:
        return fmt.format(row[key]) if key in row else "-"

    order = {name: i for i, name in enumerate(EXAMPLES)}
    cells = []
    for row in sorted(rows, key=lambda r: (order.get(r["example"], len(order)), int(r["setting"].split("/")[1]))):
        notes = "; ".join(f"{side}: {row[f'{side}_note']}" for side in ("ours", "tracr") if f"{side}_note" in row)
        cells.append((row["example"], row["setting"], number(row, "ours_total_s", "{:.2f}"),
                      number(row, "tracr_first_s", "{:.2f}"), number(row, "ratio", "{:.2f}"), pair(row, "layers"),
                      pair(row, "mlp"), pair(row, "hidden"), pair(row, "nonzero"), number(row, "nz_ratio", "{:.2f}"),
                      notes or "-"))
    columns = ("program", "vocab/len", *TIMED, "layers ours / Tracr", "widest MLP ours / Tracr",
               "hidden units ours / Tracr", "non-zeros ours / Tracr", "non-zero ratio", "note")
    return Table(columns, tuple(cells), timings=TIMED, caption=caption)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="25", help="comma list of vocab size = max_seq_len")
    parser.add_argument("--examples", default=",".join(EXAMPLES), help="comma list of example names")
    parser.add_argument("--tracr-python", type=Path, default=TRACR_PYTHON, help="python of a venv with tracr")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per process")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    print(" ".join(fmt.format(header) if key == "example" else header.rjust(max(len(header), len(fmt.format(0))))
                   for key, header, fmt in COLUMNS))
    ratios, rows = [], []
    for size in (int(s) for s in args.sizes.split(",")):
        for name in args.examples.split(","):
            row = measure(name, size, args.tracr_python, args.timeout)
            rows.append(row)
            ratios += [row["ratio"]] if "ratio" in row else []
            print(format_row(row), flush=True)
    summary = ""
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        summary = (f"first call (ours: compile + first call; Tracr: first call): geometric mean ratio {geo:.2f}, "
                   f"ours faster on {sum(r < 1 for r in ratios)}/{len(ratios)}")
        print(summary)
    caption = ("Each side in a fresh process per setting, one full-length input; Tracr 1.0 from PyPI in its own "
               "environment, its compile not timed (a timeout there is a note); hidden units counted with a non-zero "
               "weight, non-zeros ours without the unembedding" + (f". {summary[0].upper()}{summary[1:]}." if summary
                                                                   else "."))
    print()
    publish(table(rows, caption), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
