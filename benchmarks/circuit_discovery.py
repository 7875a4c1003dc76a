"""Circuit discovery against verified ground truth: verification rate, AUROC per method, time.

For every case (library programs at two lengths, random programs from `compiler.fuzzing`), every
variant of the dial (`compiler.lab.circuits.variants`) and every ablation, the ground-truth
circuit is measured and verified on `--inputs` sampled inputs; then each method scores the edges
twice: on the same inputs (single-edge patching is then the definition itself, a ceiling) and on
a `--method-inputs` dataset drawn from them (what a method run on a dataset sees). Rows go to
`--rows` (JSON lines, one per case, variant and ablation) as they finish; the table at the end
gives, per variant and ablation, the verification rate, the mean and the minimum AUROC of each
method and the median seconds per model (building the variant plus measuring all ablations).

Run: `python benchmarks/circuit_discovery.py --fuzz 100 --rows rows.jsonl` (`--help` for more).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np
from tqdm import tqdm

from benchmarks.results import Table, add_json_argument, publish
from compiler.examples import EXAMPLES
from compiler.fuzzing.driver import SETTINGS
from compiler.fuzzing.program_spec import build
from compiler.fuzzing.random_programs import generate
from compiler.lab.circuits import (
    ABLATIONS,
    REFERENCE_METHODS,
    InputDistribution,
    keeps_outputs,
    make_variant,
    measured,
    score,
    setup,
)
from compiler.model.jit_cache import enable_compilation_cache
from rasp import rasp
from rasp.errors import RaspEvaluationError

SMALL = REFERENCE_METHODS  # every method also runs on the first --method-inputs inputs (the data dial)


def cases(sizes: list[int], fuzz: int, seed: int):
    """(name, program, vocab, max_seq_len, unique_tokens) for the library and random programs."""
    for size in sizes:
        for name, example in EXAMPLES.items():
            yield f"{name}@{size}", example.build(size), tuple(example.vocab), size, name == "sort_unique"
    for index in range(3 * fuzz):  # main() stops after `fuzz` of them compile
        vocab, max_seq_len = SETTINGS[index % len(SETTINGS)]
        spec = generate(seed * 1_000_003 + index, 3 + index % 8, vocab, max_seq_len)
        yield f"fuzz{index}", build(spec).named(f"fuzz{index}"), tuple(vocab), min(max_seq_len, 5), False


def undefined_inputs(program, vocab, max_seq_len, distribution: InputDistribution) -> int:
    """How many sampled inputs the program is not defined on (`rasp.evaluate` raises, e.g. a
    categorical Aggregate selecting different values). The compiled model then averages one-hot
    values into ties, and a circuit measured there is about float rounding at a tie."""
    bad = 0
    for row in distribution.tokens(tuple(vocab), max_seq_len):
        try:
            rasp.evaluate(program, row)
        except RaspEvaluationError:
            bad += 1
    return bad


def run_case(name, program, vocab, max_seq_len, unique, variant, args) -> list[dict]:
    start, cpu = time.perf_counter(), time.process_time()
    bad = undefined_inputs(program, vocab, max_seq_len, InputDistribution(args.inputs, args.seed, unique_tokens=unique))
    if bad:
        raise ValueError(f"the program is undefined on {bad} of the {args.inputs} sampled inputs; skipped")
    built = make_variant(variant, program, vocab, max_seq_len, seed=args.seed, unique_tokens=unique, gd_steps=args.gd_steps)
    if not built.net.numerical and built.net.unembed[:, built.net.columns].shape[1] == 0:  # the scored columns
        raise ValueError("the program is None at every position (no output value): its circuit is empty and no "
                         "method can be scored; skipped")
    rows = []
    distribution = InputDistribution(args.inputs, args.seed, unique_tokens=unique)
    keeps = keeps_outputs(built, program, distribution.tokens(tuple(vocab), max_seq_len), built.model.config.causal)
    for m in measured(built, program, distribution, ABLATIONS):
        truth = m.measured.circuit
        row = {"case": name, "variant": variant, "ablation": m.record.ablation, "edges": int(truth.size),
               "circuit": int(truth.sum()), "verified": m.record.verification.verified,
               "sufficient": m.record.verification.sufficient, "accuracy": built.accuracy, "keeps": keeps}
        small = setup(built.net, np.asarray(m.setup.ids)[: args.method_inputs], m.setup.ablation)
        for method, run in REFERENCE_METHODS.items():
            row[method] = score(run(m.setup), truth).roc_auc
        for method, run in SMALL.items():
            row[f"{method}@{args.method_inputs}"] = score(run(small), truth).roc_auc
        rows.append(row)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    for row in rows:
        row["seconds"], row["cpu_seconds"] = seconds, cpu
    return rows


def _worst_best(group: list[dict], keys: list[str]) -> str:
    """The lowest, over the group's verified models, of the best method's AUROC among `keys`,
    and which model it is: a model whose verified circuit no method ranks well."""
    best = [(max(r[k] for k in keys), r["case"]) for r in group if r["verified"] and keys
            and all(k in r and r[k] is not None and not np.isnan(r[k]) for k in keys)]
    if not best:
        return "n/a"
    value, case = min(best)
    return f"{value:.3f} ({case})"


TIMINGS = ("s/model (median)", "CPU s/model (median)")


def table(rows: list[dict], method_inputs: int, caption: str = "") -> Table:
    """Per variant and ablation: verification rate, each method's mean and minimum AUROC, the
    best method, the variant's accuracy and kept outputs, and the median seconds per model."""
    keys = [*REFERENCE_METHODS, *(f"{m}@{method_inputs}" for m in SMALL)]
    keys = [k for k in keys if any(k in r for r in rows)]
    columns = ("variant", "ablation", "models", "verified", *(f"AUROC {k} mean / min" for k in keys), "best mean",
               f"best mean @{method_inputs}", f"best @{method_inputs} min (model)", "accuracy (min)",
               "keeps outputs (min, measured of)", *TIMINGS)
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["variant"], row["ablation"]), []).append(row)
    lines = []
    for (variant, ablation), group in groups.items():
        cells = []
        means = []
        for key in keys:
            values = [r[key] for r in group if r.get(key) is not None and not np.isnan(r[key])]
            mean = float(np.mean(values)) if values else float("nan")
            means.append(mean)
            cells.append(f"{mean:.3f} / {min(values):.3f}" if values else "n/a")
        verified = sum(r["verified"] for r in group)
        seconds = statistics.median(r["seconds"] for r in group)
        cpus = [r["cpu_seconds"] for r in group if "cpu_seconds" in r]
        cpu = f"{statistics.median(cpus):.1f}" if cpus else "n/a"
        small = [mean for key, mean in zip(keys, means) if key.endswith(f"@{method_inputs}")]
        worst = _worst_best(group, [k for k in keys if k.endswith(f"@{method_inputs}")])
        accuracies = [r["accuracy"] for r in group if r.get("accuracy") is not None]
        accuracy = f"{min(accuracies):.3f}" if accuracies else "exact"
        kept = [r["keeps"] for r in group if r.get("keeps") is not None]
        keeps = f"{min(kept):.3f} ({len(kept)} of {len(group)})" if kept else "not measured"
        lines.append((variant, ablation, str(len(group)), f"{verified}/{len(group)}", *cells, f"{np.nanmax(means):.3f}",
                      f"{np.nanmax(small) if small else float('nan'):.3f}", worst, accuracy, keeps, f"{seconds:.1f}", cpu))
    return Table(columns, tuple(lines), timings=TIMINGS, caption=caption)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="4,5", help="library max_seq_len values (default 4,5)")
    parser.add_argument("--fuzz", type=int, default=100, help="random programs (default 100)")
    parser.add_argument("--variants", default="a,b,c,d,e", help="library variants (default a,b,c,d,e)")
    parser.add_argument("--fuzz-variants", default="a,e", help="variants for random programs (default a,e)")
    parser.add_argument("--inputs", type=int, default=48, help="sampled inputs of the ground truth (default 48)")
    parser.add_argument("--method-inputs", type=int, default=12, help="inputs the small-dataset methods see (default 12)")
    parser.add_argument("--gd-steps", type=int, default=600, help="GD budget of variant c (default 600)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", help="comma-separated case names (e.g. reverse@5,fuzz3)")
    parser.add_argument("--rows", type=Path, help="append one JSON line per result here; (case, variant) pairs "
                        "already there are not run again (a stopped run resumes) but count towards --fuzz")
    parser.add_argument("--table", type=Path, help="only print the table of the rows in this JSON lines file")
    add_json_argument(parser)
    parser.add_argument("--jax-cache", type=Path, help="keep compiled XLA programs in this folder and reuse those found "
                        "there (`compiler.model.jit_cache`): a resumed or repeated run compiles nothing it compiled before")
    args = parser.parse_args(argv)
    if args.jax_cache:
        enable_compilation_cache(args.jax_cache)
    if args.table:
        stored = [json.loads(line) for line in args.table.read_text().splitlines() if line.strip()]
        publish(table(stored, args.method_inputs), args.json)
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]  # --sizes "": random programs only
    only = set(args.only.split(",")) if args.only else None
    rows, failures = [], []
    done = set()
    if args.rows and args.rows.exists():
        rows = [json.loads(line) for line in args.rows.read_text().splitlines() if line.strip()]
        done = {(r["case"], r["variant"]) for r in rows}
    todo = [c for c in cases(sizes, args.fuzz, args.seed) if only is None or c[0] in only]
    built_fuzz = 0
    for name, program, vocab, max_seq_len, unique in tqdm(todo, desc="cases"):
        if name.startswith("fuzz") and built_fuzz >= args.fuzz:
            break
        variants = (args.fuzz_variants if name.startswith("fuzz") else args.variants).split(",")
        for variant in variants:
            if (name, variant) in done:
                built_fuzz += name.startswith("fuzz") and variant == variants[0]
                continue
            try:
                new = run_case(name, program, vocab, max_seq_len, unique, variant, args)
            except Exception as error:
                failures.append(f"{name} {variant}: {type(error).__name__}: {' '.join(str(error).split())[:160]}")
                continue
            rows += new
            built_fuzz += name.startswith("fuzz") and variant == variants[0]
            if args.rows:
                with args.rows.open("a") as handle:
                    handle.writelines(json.dumps(r) + "\n" for r in new)
    skipped = "; ".join(failures) if failures else "none"
    caption = (f"{len({r['case'] for r in rows})} cases, ground truth on {args.inputs} sampled inputs (seed {args.seed}), "
               f"methods also on the first {args.method_inputs}. (case, variant) pairs not built: {skipped}.")
    publish(table(rows, args.method_inputs, caption), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
