"""Computed features in superposition: the staged models and SAE baselines, as tables.

Per stage (1k, 4k, 16k features): features at the last residual site, width d, the interference
bound's verdict, decoded-output accuracy against RASP on sampled inputs (Zipf tokens), L0 per
residual site, the feature-frequency profile, and the time to generate activations with true codes
(measured on ``--timing-tokens`` after a warm-up batch, extrapolated to 10^7 and labelled so).

With SAELens installed (the ``sae`` extra, in its own venv) it then trains TopK SAEs on the 1k
model at several compression widths d (the superposition dial) and several k (L0), scores them with
SynthSAEBench's metrics plus spliced-output accuracy and causal use, and plots recovery against d
and L0. Without SAELens it says so and stops after the stage table.

    python benchmarks/feature_benchmark.py                        # 1k, 4k, 16k; SAEs if installed
    python benchmarks/feature_benchmark.py --stages 1k --sae-steps 300 --widths 176,112
    python benchmarks/feature_benchmark.py --stages "" --sae-steps 200     # SAE baselines only
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler.io.atomic import atomic_write_text  # noqa: E402
from compiler.lab.features.dictionary import true_dictionary  # noqa: E402
from compiler.lab.features.evaluation import output_accuracy, rasp_references  # noqa: E402
from compiler.lab.features.metrics import data_profile, ground_truth, perfect_coder, synthetic_scores  # noqa: E402
from compiler.lab.features.plots import recovery_plot  # noqa: E402
from compiler.lab.features.sites import Site, SiteRunner, residual_sites  # noqa: E402
from compiler.lab.features.splice import causal_use, spliced_accuracy  # noqa: E402
from compiler.lab.features.stages import STAGES, Stage, build_stage, sample_ids  # noqa: E402
from compiler.lab.features.stream import ShardReader, dense_codes, stream_activations  # noqa: E402
from compression.analytic import interference_bound, packed_projection, residual_structure  # noqa: E402

ZIPF = 1.0


def exactness(stage: Stage, samples: int, w: np.ndarray) -> float:
    ids = sample_ids(stage.compiled, samples, seed=1, zipf=ZIPF)
    refs = rasp_references(stage.compiled, stage.programs, ids, progress=True)
    runner = SiteRunner(stage.compiled, w)
    out = np.concatenate([np.asarray(runner.output(ids[s:s + 2000])) for s in range(0, samples, 2000)])
    return output_accuracy(stage.compiled, refs, out).sequence


def l0_per_site(stage: Stage) -> list[float]:
    ids = sample_ids(stage.compiled, 500, seed=2, zipf=ZIPF)
    capture = SiteRunner(stage.compiled).capture(ids)
    mask = ids != stage.compiled.config.pad_id
    mask[:, 0] = False
    out = []
    for site in residual_sites(stage.compiled):
        dictionary = true_dictionary(stage.compiled, site, stage.projection)
        codes = dictionary.codes(capture.values(site))[mask]
        out.append(float(np.mean(np.sum(codes != 0, axis=1))))
    return out


def stage_row(name: str, samples: int, timing_tokens: int, folder: Path) -> tuple[dict, Stage]:
    stage = build_stage(STAGES[name])
    model = stage.compiled
    last = Site("resid", len(model.config.layers))
    dictionary = true_dictionary(model, last, stage.projection)
    accuracy = exactness(stage, samples, stage.projection)
    stream_activations(model, last, folder, 4096, stage.projection, batch_inputs=4096, progress=False, write=False)
    timing = stream_activations(model, last, folder, timing_tokens, stage.projection, batch_inputs=4096,
                                progress=False, write=False, seed=7)
    profile_dir = folder / f"profile_{name}"
    stream_activations(model, last, profile_dir, 100_000, stage.projection, batch_inputs=4096, zipf=ZIPF,
                       progress=False)
    occurring, _ = data_profile(ShardReader(profile_dir).batches(8192, ("code_index", "dense_codes")),
                                dictionary.num_features)
    counts = np.zeros(dictionary.num_features)
    tokens = 0
    for batch in ShardReader(profile_dir).batches(8192, ("code_index",)):
        index = batch["code_index"]
        np.add.at(counts, index[index >= 0], 1)
        tokens += len(index)
    freq = counts / tokens
    row = {
        "stage": name, "features": dictionary.num_features, "dense": len(dictionary.dense_labels),
        "dropped": len(dictionary.dropped), "D": model.config.residual_width, "d": stage.d,
        "features_per_dim": dictionary.num_features / stage.d, "bound_exact": stage.claims_exact,
        "max_load": stage.max_load, "samples": samples, "accuracy": accuracy, "l0_per_site": l0_per_site(stage),
        "freq_min": float(freq.min()), "freq_median": float(np.median(freq)), "freq_max": float(freq.max()),
        "never_seen": int((~occurring).sum()), "timing_tokens": timing.tokens,
        "tokens_per_s": timing.tokens_per_second, "hours_for_1e7": 1e7 / timing.tokens_per_second / 3600,
        "build_s": sum(stage.seconds.values()),
    }
    return row, stage


def sae_scores(stage: Stage, w: np.ndarray, k: int, steps: int, folder: Path, tokens: int) -> dict:
    from compiler.lab.features.sae import TorchCoder, train_sae

    model = stage.compiled
    site = Site("resid", len(model.config.layers))
    dictionary = true_dictionary(model, site, w)
    stream_activations(model, site, folder, tokens, w, batch_inputs=4096, zipf=ZIPF, progress=False)
    reader = ShardReader(folder)
    occurring, dense_range = data_profile(reader.batches(8192, ("code_index", "dense_codes")), dictionary.num_features)
    truth = ground_truth(dictionary, occurring, dense_range)
    start = time.perf_counter()
    sae = train_sae(folder, d_sae=len(truth.labels), k=k, steps=steps, batch_size=1024)
    train_s = time.perf_counter() - start
    coder = TorchCoder(sae)

    def batches():
        for b in reader.batches(8192, ("activations", "code_index", "code_value", "dense_codes")):
            yield b["activations"], truth.codes(dense_codes(b["code_index"], b["code_value"], dictionary.num_features),
                                                b["dense_codes"])

    scores = synthetic_scores(coder, truth, batches())
    ids = sample_ids(model, 1000, seed=9, zipf=ZIPF)
    refs = rasp_references(model, stage.programs, ids)
    spliced = spliced_accuracy(model, coder, refs, site, w).sequence
    use = causal_use(model, dictionary, coder, ids[:400], w, examples=1, truth=truth)
    perfect = synthetic_scores(perfect_coder(truth), truth, batches())
    return {"d": int(w.shape[1]), "k": k, "latents": len(truth.labels), "true_l0": scores.true_l0,
            "sae_l0": scores.sae_l0, "dead": scores.dead_latents, "shrinkage": scores.shrinkage,
            "ev": scores.explained_variance, "mcc": scores.mcc, "uniqueness": scores.uniqueness,
            "precision": scores.classification.precision, "recall": scores.classification.recall,
            "f1": scores.classification.f1_score, "spliced": spliced, "causal": use.fraction,
            "causal_used": use.used, "perfect_mcc": perfect.mcc, "perfect_f1": perfect.classification.f1_score,
            "steps": steps, "train_s": train_s}


def print_table(rows: list[dict], keys: list[str]) -> None:
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(f"{row[k]:.4g}" if isinstance(row[k], float) else str(row[k]) for k in keys))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", default="1k,4k,16k", help="comma-separated; empty: SAE baselines only")
    parser.add_argument("--samples", type=int, default=10_000, help="sampled inputs checked against RASP")
    parser.add_argument("--timing-tokens", type=int, default=200_000)
    parser.add_argument("--widths", default="176,144,112,80,56", help="d values of the 1k model for the SAE dial")
    parser.add_argument("--ks", default="11,22,44", help="TopK k values at the packed width")
    parser.add_argument("--sae-steps", type=int, default=1500)
    parser.add_argument("--sae-tokens", type=int, default=300_000)
    parser.add_argument("--out", default="features-results", help="folder for stages.json, saes.json, recovery.png")
    args = parser.parse_args()
    out = Path(args.out)
    work = Path(tempfile.mkdtemp(prefix="features-"))
    rows, stages = [], {}
    for name in [n for n in args.stages.split(",") if n]:
        row, stages[name] = stage_row(name, args.samples, args.timing_tokens, work)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if rows:
        print("\n## Stages (Zipf(1) tokens; time for 10^7 activations extrapolated from timing_tokens)\n")
        print_table(rows, ["stage", "features", "dense", "dropped", "D", "d", "features_per_dim", "bound_exact",
                       "samples", "accuracy", "freq_min", "freq_median", "freq_max", "never_seen",
                            "timing_tokens", "tokens_per_s", "hours_for_1e7", "build_s"])
        for row in rows:
            print(f"{row['stage']}: L0 per residual site {[round(x, 2) for x in row['l0_per_site']]}")
        atomic_write_text(out / "stages.json", json.dumps(rows, indent=1))
    try:
        import sae_lens  # noqa: F401
    except ImportError:
        print("\nSAE baselines skipped: sae_lens is not importable in this environment (it needs "
              "transformer-lens<4; run this script with the venv that has the 'sae' extra).")
        return
    base = stages.get("1k") or build_stage(STAGES["1k"])
    structure = residual_structure(base.compiled)
    by_width, by_l0 = [], []
    for d in (int(x) for x in args.widths.split(",")):
        w = packed_projection(structure, d)
        row = sae_scores(base, w, 22, args.sae_steps, work / f"d{d}", args.sae_tokens)
        row["model_accuracy"] = exactness(base, 2000, w)
        row["bound_exact"] = interference_bound(structure, w).claims_exact
        by_width.append(row)
        print(json.dumps(row), flush=True)
    for k in (int(x) for x in args.ks.split(",")):
        row = next((r for r in by_width if r["k"] == k and r["d"] == base.d), None)
        if row is None:
            row = sae_scores(base, base.projection, k, args.sae_steps, work / f"k{k}", args.sae_tokens)
            print(json.dumps(row), flush=True)
        by_l0.append(row)
    keys = ["d", "k", "latents", "true_l0", "sae_l0", "dead", "shrinkage", "ev", "mcc", "uniqueness", "precision",
            "recall", "f1", "spliced", "causal", "perfect_mcc", "perfect_f1", "steps", "train_s"]
    print("\n## TopK SAEs on the 1k model (last residual site), by compression width d\n")
    print_table(by_width, keys + ["model_accuracy", "bound_exact"])
    print("\n## ... by k at the packed width\n")
    print_table(by_l0, keys)
    atomic_write_text(out / "saes.json", json.dumps({"by_width": by_width, "by_l0": by_l0}, indent=1))
    print(recovery_plot(out / "recovery.png", by_width, by_l0, "TopK SAEs on the 1k-feature compiled model"))


if __name__ == "__main__":
    main()
