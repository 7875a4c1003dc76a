"""Model-zoo throughput: programs/s and MB/s of `generate_zoo`, by engine and variant, and Tracr
on a sample of the same programs for the ratio.

Each row generates a fresh zoo (seed 0, default knobs) into a temporary folder: the local
engine with all the `--variants` and with each alone (`--each-programs`), and a local Ray
instance (`--jobs` CPUs) with all of them (its start-up time included, reported apart). `MB/s` counts the
Parquet bytes written. The projection for 10^5 programs is the measured rate extrapolated
linearly (generation is per program and shards are written as they fill, so nothing grows with
the count but the folder).

Tracr is not a dependency: with `--tracr-python` pointing at a Python that has `tracr` installed
(default `/work/wt/venvs/tracr/bin/python`, skipped when absent), the first `--tracr-sample`
random programs of the zoo are compiled by `compile_rasp_to_model` in one process, and by our
`compile_rasp` in this one (compile time only, both sides, refusals included).

Rows print as they finish (`--rows` picks them and their order), so a long run that is stopped
still leaves the rows it completed.

    python benchmarks/zoo.py --programs 10000 --progress
    python benchmarks/zoo.py --programs 300 --tracr-sample 100 --no-ray
    python benchmarks/zoo.py --rows tracr,local-all,ray-all --programs 10000 --each-programs 1000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler.lab.zoo.config import VARIANTS, ZooConfig  # noqa: E402
from compiler.lab.zoo.generate import generate_zoo  # noqa: E402
from compiler.lab.zoo.sampling import draw  # noqa: E402

TRACR_PYTHON = Path("/work/wt/venvs/tracr/bin/python")
TRACR_SNIPPET = r"""
import json, sys, time
from tracr.rasp import rasp
from tracr.compiler import compiling, lib
programs = json.loads(sys.stdin.read())
ok = failed = 0
start = time.perf_counter()
for source, vocab, n in programs:
    body = source.replace("from rasp import lib, rasp", "")
    namespace = {"rasp": rasp, "lib": lib}
    try:
        exec(body, namespace)
        compiling.compile_rasp_to_model(namespace["program"], vocab=set(vocab), max_seq_len=n, compiler_bos="BOS")
        ok += 1
    except Exception:
        failed += 1
print(json.dumps(dict(seconds=time.perf_counter() - start, ok=ok, failed=failed)))
"""


def zoo_row(name: str, config: ZooConfig, engine: str, jobs: int, progress: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        summary = generate_zoo(Path(folder) / "zoo", config, engine=engine, jobs=jobs, progress=progress)
        wall = time.perf_counter() - started
    ok = sum(v for k, v in summary.statuses.items() if k.endswith("/ok"))
    records = sum(summary.statuses.values())
    return {"row": name, "programs": summary.programs, "records_ok": f"{ok}/{records}", "seconds": round(wall, 1),
            "programs_per_s": round(summary.programs / wall, 2), "MB": round(summary.bytes_written / 2**20, 2),
            "MB_per_s": round(summary.bytes_written / 2**20 / wall, 3),
            "projected_1e5_h": round(1e5 / (summary.programs / wall) / 3600, 2)}


def tracr_ratio(config: ZooConfig, sample: int, python: Path) -> dict | None:
    from compiler import compile_rasp
    from compiler.errors import CompilerError
    from compiler.lab.zoo.sampling import rebuild

    drawn = [d for d in (draw(config, i) for i in range(sample * 2)) if d.origin == "random"][:sample]
    started = time.perf_counter()
    ours_ok = 0
    for d in drawn:
        try:
            compile_rasp(rebuild(d.source), d.vocab, d.max_seq_len)
            ours_ok += 1
        except CompilerError:
            pass
    ours = time.perf_counter() - started
    if not python.exists():
        return {"programs": len(drawn), "ours_s": round(ours, 2), "ours_ok": ours_ok, "tracr": "absent (skipped)"}
    payload = json.dumps([[d.source, list(d.vocab), d.max_seq_len] for d in drawn])
    done = subprocess.run([str(python), "-c", TRACR_SNIPPET], input=payload, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        return {"programs": len(drawn), "ours_s": round(ours, 2), "tracr": f"failed: {done.stderr.strip()[-300:]}"}
    tracr = json.loads(done.stdout.strip().splitlines()[-1])
    return {"programs": len(drawn), "ours_s": round(ours, 2), "ours_ok": ours_ok, "tracr_s": round(tracr["seconds"], 2),
            "tracr_ok": tracr["ok"], "tracr_over_ours": round(tracr["seconds"] / ours, 1)}


ROWS = ("tracr", "local-all", "ray-all", "local-each")
KEYS = ["row", "programs", "records_ok", "seconds", "programs_per_s", "MB", "MB_per_s", "projected_1e5_h", "ray_start_s",
        "note"]


def ray_row(config: ZooConfig, jobs: int, progress: bool) -> dict:
    try:
        import ray
    except ImportError:
        return {"row": "ray all", "note": "ray not installed (pip install 'tracr-compile[ray]')"}
    started = time.perf_counter()
    ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False)
    startup = time.perf_counter() - started
    try:
        return dict(zoo_row("ray all", config, "ray", jobs, progress), ray_start_s=round(startup, 1))
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", type=int, default=10_000, help="programs of the 'all variants' rows")
    parser.add_argument("--each-programs", type=int, default=None,
                        help="programs of the one-variant rows (default: --programs)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="variants of the 'all' rows and the one-variant rows")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rows", default=",".join(ROWS), help=f"which rows, in this order (from {', '.join(ROWS)})")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--progress", action="store_true", help="a progress bar per row (on stderr)")
    parser.add_argument("--tracr-sample", type=int, default=200)
    parser.add_argument("--tracr-python", type=Path, default=TRACR_PYTHON)
    args = parser.parse_args()
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        parser.error(f"unknown row(s) {', '.join(unknown)}; choose from {', '.join(ROWS)}")
    variants = tuple(v.strip() for v in args.variants.split(","))
    base = {"programs": args.programs, "shard_size": 500}
    each = dict(base, programs=args.each_programs or args.programs)
    print(f"zoo generation, {args.jobs} jobs, variants {', '.join(variants)}", flush=True)
    print(" | ".join(KEYS), flush=True)

    def show(row: dict) -> None:
        print(" | ".join(str(row.get(k, "")) for k in KEYS), flush=True)

    for name in rows:
        if name == "tracr" and args.tracr_sample:
            print("compile only, the first random programs of the zoo: "
                  + json.dumps(tracr_ratio(ZooConfig(**base), args.tracr_sample, args.tracr_python)), flush=True)
        elif name == "local-all":
            show(zoo_row("local all", ZooConfig(**base, variants=variants), "local", args.jobs, args.progress))
        elif name == "ray-all" and not args.no_ray:
            show(ray_row(ZooConfig(**base, variants=variants), args.jobs, args.progress))
        elif name == "local-each":
            for v in variants:
                show(zoo_row(f"local {v}", ZooConfig(**each, variants=(v,)), "local", args.jobs, args.progress))


if __name__ == "__main__":
    main()
