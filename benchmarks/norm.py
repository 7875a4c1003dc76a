"""Pre-norm compiles: what a norm costs, whether it stays exact, and the Hugging Face export.

For every library program (`compiler.examples.CATALOGUE`) at each size (vocabulary and length),
compiled with `norm=None`, `"layernorm"` and `"rmsnorm"`:

* **cost**: residual width D, layers and non-zero parameters of each compile, and the ratio of
  the normalised ones to the plain one;
* **exactness**: the decoded outputs of each normalised model against `rasp.evaluate` on
  `--inputs` distinct random inputs (every input where the space holds fewer), counted as the
  inputs that differ anywhere (categorical values exactly, numbers within the agree rule), and
  the worst relative error of a numerical output;
* **Hugging Face** (`--huggingface`): the LayerNorm model exported with `to_huggingface`, run in a
  process that imports only torch and transformers, on every input at the first size (2,000
  random ones where the space holds more than 10^5) and on `--hf-inputs` random inputs at the
  others, against the compiled model's decoded outputs. With `--packed`, each checkpoint is the
  compressed model instead: the packed projection (`compression.analytic`, at its packed width)
  of the LayerNorm model's compiled coordinates, folded into it (`to_huggingface(...,
  projection=W)`), against the folded model's decoded outputs; the table adds the widths (D of
  the LayerNorm model, then the folded stream's), whether the interference bound claims the
  folded model exact, and the inputs on which it differs from RASP.

    python benchmarks/norm.py --sizes 5,10,25 --inputs 300
    python benchmarks/norm.py --sizes 5,10 --huggingface --hf-inputs 500
    python benchmarks/norm.py --sizes 5,10 --huggingface --packed --hf-inputs 500

`--json PATH` also saves the table (the cost table, with the exactness totals in its caption, or
the Hugging Face one) with its command and machine (benchmarks/results.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import Table, add_json_argument, publish
from compiler import compile_rasp
from compiler.errors import CausalSemanticsWarning
from compiler.examples import CATALOGUE
from compiler.io.huggingface import VALUE_TOKEN, expected_outputs, input_texts, run_in_fresh_process, to_huggingface
from compiler.model.agree import AGREE_TOLERANCE, same_outputs
from compiler.model.folding import folded_model
from compiler.model.weights import parameter_counts
from compression.analytic import interference_bound, packed_projection, packed_width, residual_structure
from compression.claims import ENUMERATE_LIMIT
from compression.learned.sampling import distinct_inputs, enumerate_inputs
from compression.task import input_space_of
from rasp import rasp

NORMS = (None, "layernorm", "rmsnorm")
SAMPLED = 2_000  # random inputs standing for "every input" of a space above ENUMERATE_LIMIT


def _compile(name: str, size: int, norm: str | None) -> Any:
    """The library program `name` at `size`."""
    example = CATALOGUE[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalSemanticsWarning)
        return compile_rasp(example.build(size), set(example.scaled_vocab(size)), size, norm=norm)


def _inputs(model: Any, count: int | None) -> list[list]:
    """Every input (`count` None, or a space no larger), else `count` distinct random ones; a
    space of more than `ENUMERATE_LIMIT` inputs gives `SAMPLED` random ones for "every"."""
    space = input_space_of(model)
    if count is None:
        count = None if space.size() <= ENUMERATE_LIMIT else SAMPLED
    ids = enumerate_inputs(space) if count is None or space.size() <= count else distinct_inputs(space, count, 0)
    return [space.decode(row) for row in ids]


def _relative(got: Any, want: Any) -> float:
    if isinstance(want, (int, float)) and not isinstance(want, bool) and isinstance(got, (int, float)):
        return abs(float(got) - float(want)) / max(1.0, abs(float(want)))
    return 0.0


def exactness(model: Any, program: Any, inputs: Sequence[list]) -> tuple[int, int, float]:
    """`(inputs checked, inputs that differ from RASP, worst relative numerical error)`."""
    decoded = cast(list[list[Any]], model.apply_batch([["BOS", *tokens] for tokens in inputs]))
    checked = wrong = 0
    worst = 0.0
    for tokens, row in zip(inputs, decoded):
        try:
            want = rasp.evaluate(program, tokens)
        except rasp.RaspEvaluationError:
            continue
        checked += 1
        wrong += not same_outputs(row[1:], want)
        worst = max([worst, *(_relative(g, w) for g, w in zip(row[1:], want) if w is not None and g is not None)])
    return checked, wrong, worst


COST_COLUMNS = ("program", "size", "D", "layers", "non-zeros", "x non-zeros (LN / RMS)")


def cost_and_exactness(sizes: Sequence[int], count: int) -> tuple[list[str], Table, bool]:
    """The printed cost and exactness tables, the cost table to publish (its caption the
    exactness totals; module docstring), and whether any normalised model differs from RASP."""
    rows: list[tuple[str, ...]] = []
    checked_all = wrong_all = 0
    worst_all: tuple[float, str] = (0.0, "")
    anchors: dict[str, list[float]] = {norm: [] for norm in NORMS[1:] if norm is not None}
    cost = [f"{'program':16s} {'size':>4s}  {'D':>15s}  {'layers':>8s}  {'non-zeros':>24s}  {'x nnz (LN, RMS)':>15s}"]
    exact = [f"{'program':16s} {'size':>4s} {'norm':9s} {'inputs':>6s} {'wrong':>5s} {'worst num. err':>14s} "
             f"{'spread':>8s} {'anchor':>8s} {'s':>6s}"]
    for name in CATALOGUE:
        for size in sizes:
            models, seconds = {}, {}
            for norm in NORMS:
                started = time.perf_counter()
                models[norm] = _compile(name, size, norm)
                seconds[norm] = time.perf_counter() - started
            dims = "/".join(str(models[n].config.residual_width) for n in NORMS)
            layers = "/".join(str(models[n].config.num_executed_layers) for n in NORMS)
            nnz = [parameter_counts(models[n])[1] for n in NORMS]
            ratios = f"{nnz[1] / nnz[0]:.2f} {nnz[2] / nnz[0]:.2f}"
            cost.append(f"{name:16s} {size:4d}  {dims:>15s}  {layers:>8s}  {'/'.join(map(str, nnz)):>24s}  {ratios:>15s}")
            rows.append((name, str(size), dims, layers, "/".join(map(str, nnz)), ratios.replace(" ", " / ")))
            for norm in NORMS[1:]:
                model = models[norm]
                started = time.perf_counter()
                checked, wrong, worst = exactness(model, CATALOGUE[name].build(size), _inputs(model, count))
                spec = model.config.norm
                where = f"{name} at {size}/{size} with {norm}"
                checked_all, wrong_all = checked_all + checked, wrong_all + wrong
                worst_all = max(worst_all, (worst, where))
                anchors[norm].append(spec.anchor)
                exact.append(f"{name:16s} {size:4d} {norm:9s} {checked:6d} {wrong:5d} {worst:14.2e} {spec.spread:8.1e} "
                             f"{spec.anchor:8.0f} {seconds[norm] + time.perf_counter() - started:6.1f}")
            print(cost[-1], flush=True)
    compiles = len(rows) * (len(NORMS) - 1)
    caption = (f"D residual width, executed layers, non-zero parameters (plain / LayerNorm / RMSNorm) and the "
               f"normalised non-zeros' ratio to the plain compile. Exactness: {compiles} normalised compiles decoded "
               f"{checked_all:,} inputs (up to {count} distinct random ones each), {wrong_all} of them unlike "
               f"`rasp.evaluate`; worst relative error of a numerical output {worst_all[0]:.2e} ({worst_all[1]}); anchor "
               + ", ".join(f"{min(a):,.0f}-{max(a):,.0f} ({norm})" for norm, a in anchors.items()) + ".")
    lines = ["cost (plain / layernorm / rmsnorm):", *cost, "", "exactness against RASP:", *exact]
    return lines, Table(COST_COLUMNS, tuple(rows), caption=caption), wrong_all > 0


HF_COLUMNS = ("program", "size", "inputs", "differ", "worst num. err", "n_embd", "heads", "inner", "blocks", "export s")
PACKED_COLUMNS = ("D -> folded", "bound claims exact", "folded vs RASP wrong")


def huggingface_parity(sizes: Sequence[int], count: int, packed: bool = False) -> tuple[list[str], Table, bool]:
    """The printed Hugging Face table, the same table to publish (module docstring), and whether
    any checkpoint differs from its model or a folded model the bound claims exact is wrong."""
    cells: list[tuple[str, ...]] = []
    failed = False
    rows = [f"{'program':16s} {'size':>4s} {'inputs':>6s} {'differ':>6s} {'worst num. err':>14s} "
            f"{'n_embd':>6s} {'heads':>7s} {'inner':>5s} {'blocks':>6s} {'export s':>8s}"
            + (f" {'D -> folded':>11s} {'claimed':>7s} {'vs RASP wrong':>13s}" if packed else "")]
    with tempfile.TemporaryDirectory() as scratch:
        jobs, cases = [], []
        for name in CATALOGUE:
            for position, size in enumerate(sizes):
                model = _compile(name, size, "layernorm")
                inputs = _inputs(model, None if position == 0 else count)
                w, reference, extra = None, model, ""
                packed_cells: tuple[str, ...] = ()
                claimed_wrong = False
                if packed:
                    structure = residual_structure(model)
                    w = packed_projection(structure, packed_width(structure))
                    claimed = "yes" if interference_bound(structure, w).claims_exact else "no"
                    reference = folded_model(model, w)
                    wrong = exactness(reference, CATALOGUE[name].build(size), inputs)[1]
                    claimed_wrong = claimed == "yes" and wrong > 0
                    widths = f"{model.config.residual_width}->{reference.config.residual_width}"
                    extra = f" {widths:>11s} {claimed:>7s} {wrong:13d}"
                    packed_cells = (widths.replace("->", " -> "), claimed, str(wrong))
                started = time.perf_counter()
                export = to_huggingface(model, Path(scratch) / f"{name}-{size}", projection=w)
                seconds = time.perf_counter() - started
                value = VALUE_TOKEN if model.config.numerical_output else None
                jobs.append((export.folder, input_texts(export, inputs, model), value))
                cases.append((name, size, export, expected_outputs(export, reference, inputs), value, seconds, extra,
                              packed_cells))
                failed = failed or claimed_wrong
        started = time.perf_counter()
        outputs, modules = run_in_fresh_process(jobs)
        elapsed = time.perf_counter() - started
    for (name, size, export, want, value, seconds, extra, packed_cells), got in zip(cases, outputs):
        if value is None:
            differ, worst = sum(g != w for g, w in zip(got, want)), 0.0
        else:
            errors = [[abs(g - w) / max(1.0, abs(w)) for g, w in zip(gs, ws)] for gs, ws in zip(got, want)]
            differ = sum(max(e, default=0.0) > AGREE_TOLERANCE for e in errors)
            worst = max((max(e, default=0.0) for e in errors), default=0.0)
        failed = failed or differ > 0
        rows.append(f"{name:16s} {size:4d} {len(want):6d} {differ:6d} {worst:14.2e} {export.n_embd:6d} "
                    f"{export.n_head:3d}x{export.head_dim:<3d} {export.n_inner:5d} {export.n_layer:6d} {seconds:8.2f}{extra}")
        cells.append((name, str(size), str(len(want)), str(differ), f"{worst:.2e}", str(export.n_embd),
                      f"{export.n_head}x{export.head_dim}", str(export.n_inner), str(export.n_layer), f"{seconds:.2f}",
                      *packed_cells))
    imported = ", ".join(modules) or "none"
    compared = "the folded model (its packed projection W folded into the weights)" if packed else "the compiled model"
    caption = (f"Every library program compiled with `norm=\"layernorm\"`, exported with `to_huggingface`"
               f"{' (projection=W)' if packed else ''} and run by transformers {metadata.version('transformers')} in one fresh "
               f"process (project modules it imported: {imported}), against the decoded outputs of {compared}: every "
               f"input at size {sizes[0]} ({SAMPLED:,} random ones where the space holds more than {ENUMERATE_LIMIT:,}), "
               f"{count} random ones at the other sizes; a numerical output differs past the agree rule's relative "
               f"{AGREE_TOLERANCE:g}.")
    table = Table((*HF_COLUMNS, *(PACKED_COLUMNS if packed else ())), tuple(cells), timings=("export s",), caption=caption)
    return ["Hugging Face checkpoints against the compiled models (one fresh process, "
            f"{elapsed:.0f} s; project modules it imported: {imported}):", *rows], table, failed


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of sizes, e.g. 5,10,25") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"sizes must be positive, got {text!r}")
    return sizes


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (`--help`); prints the tables, returns 1 when an output differs (with
    `--packed`: also when a folded model the bound claims exact differs from RASP)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=_sizes, default=(5, 10, 25), help="vocabulary sizes and lengths")
    parser.add_argument("--inputs", type=int, default=300, help="random inputs per normalised compile")
    parser.add_argument("--huggingface", action="store_true", help="only the Hugging Face table")
    parser.add_argument("--hf-inputs", type=int, default=500, help="random inputs past the first size")
    parser.add_argument("--packed", action="store_true", help="with --huggingface: compressed checkpoints")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.packed and not args.huggingface:
        parser.error("--packed compresses the Hugging Face checkpoints; give it with --huggingface")
    lines, table, failed = (huggingface_parity(args.sizes, args.hf_inputs, args.packed) if args.huggingface
                    else cost_and_exactness(args.sizes, args.inputs))
    print("\n".join(lines) + "\n")
    publish(table, args.json)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
