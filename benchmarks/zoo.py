"""Model-zoo throughput: programs/s and MB/s of `generate_zoo`, by engine and variant, and Tracr
on a sample of the same programs for the ratio.

`cpu_s_per_program` is the CPU time the row used (this process and its local workers, read from
`/proc` while they run; for a Ray row also the local Ray instance's own processes, its GCS server,
raylet and workers, which are started below this one) per program, and `idle_1e5_h` the
projection for 10^5 programs from it on `--jobs` otherwise idle cores: on a machine shared with
other jobs, wall-clock rates measure the sharing as much as the generator, CPU time much less so.

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
    python benchmarks/zoo.py --rows local-all --programs 10000 --keep zoo10k  # resumable
    python benchmarks/zoo.py --rows ray-all --programs 10000 --keep-ray zoo10k_ray  # resumable
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler.lab.zoo import DEFAULT_VARIANTS, ZooConfig, draw, generate_zoo

TRACR_PYTHON = Path("/work/wt/venvs/tracr/bin/python")
TRACR_SNIPPET = r"""
import json, sys, time
from tracr.rasp import rasp
from tracr.compiler import compiling, lib
programs = json.loads(sys.stdin.read())
results = []
for source, vocab, n in programs[:1] + programs:  # the first compile again, untimed: warm-up
    body = source.replace("from rasp import lib, rasp", "")
    namespace = {"rasp": rasp, "lib": lib}
    start = time.perf_counter()
    try:
        exec(body, namespace)
        compiling.compile_rasp_to_model(namespace["program"], vocab=set(vocab), max_seq_len=n, compiler_bos="BOS")
        ok = True
    except Exception:
        ok = False
    results.append([time.perf_counter() - start, ok])
print(json.dumps(results[1:]))
"""


class TreeCpu:
    """CPU seconds of this process and every process below it, sampled from `/proc` twice a second.

    `getrusage(RUSAGE_CHILDREN)` misses the local engine's workers (they are killed, not waited
    for, when their pool closes), so a thread reads each descendant's utime + stime while it lives
    and keeps the last reading; CPU a worker spends in its last half second is missed. None where
    there is no `/proc`.
    """

    def __init__(self) -> None:
        self.last: dict[int, float] = {}
        self.stop = threading.Event()
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> None:
        stats = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / self.tick)
        tree, grown = {os.getpid()}, True
        while grown:
            grown = False
            for pid, (parent, _) in stats.items():
                if parent in tree and pid not in tree:
                    tree.add(pid)
                    grown = True
        for pid in tree:
            self.last[pid] = stats[pid][1] if pid in stats else self.last.get(pid, 0.0)

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            self._read()

    def __enter__(self) -> TreeCpu:
        if Path("/proc/self/stat").exists():
            self._read()
            self.start = sum(self.last.values())
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
            self._read()

    @property
    def seconds(self) -> float | None:
        return sum(self.last.values()) - self.start if hasattr(self, "start") else None


def folder_coverage(folder: Path) -> dict:
    """Records of every shard in a zoo folder, by variant and status (what a resumed run holds in
    all, its earlier invocations included)."""
    import pyarrow.parquet as pq

    counts: dict[str, int] = {}
    programs = set()
    for shard in sorted((folder / "data").glob("train-*.parquet")):
        table = pq.read_table(shard, columns=["index", "variant", "status"]).to_pydict()
        programs.update(table["index"])
        for variant, status in zip(table["variant"], table["status"]):
            counts[f"{variant}/{status}"] = counts.get(f"{variant}/{status}", 0) + 1
    return {"programs": len(programs), "records": sum(counts.values()), "statuses": dict(sorted(counts.items()))}


def zoo_row(name: str, config: ZooConfig, engine: str, jobs: int, progress: bool = False,
            keep: Path | None = None) -> dict:
    """One row: a zoo generated into a temporary folder, or into `keep`, where a stopped run
    resumes (the rates then count only the programs this invocation generated)."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = keep if keep is not None else Path(scratch) / "zoo"
        started = time.perf_counter()
        with TreeCpu() as tree:
            summary = generate_zoo(folder, config, engine=engine, jobs=jobs, progress=progress)
        wall, cpu = time.perf_counter() - started, tree.seconds
        coverage = folder_coverage(folder) if keep is not None else None
    ok = sum(v for k, v in summary.statuses.items() if k.endswith("/ok"))
    records = sum(summary.statuses.values())
    if summary.programs == 0:
        return {"row": name, "note": f"{keep} was complete already: {json.dumps(coverage)}"}
    return {"row": name, "programs": summary.programs, "records_ok": f"{ok}/{records}", "seconds": round(wall, 1),
            "programs_per_s": round(summary.programs / wall, 2), "MB": round(summary.bytes_written / 2**20, 2),
            "MB_per_s": round(summary.bytes_written / 2**20 / wall, 3),
            "projected_1e5_h": round(1e5 / (summary.programs / wall) / 3600, 2),
            "not_ok": json.dumps({k: v for k, v in summary.statuses.items() if not k.endswith("/ok")}),
            **({} if cpu is None else {"cpu_s_per_program": round(cpu / summary.programs, 3),
                                       "idle_1e5_h": round(1e5 * cpu / summary.programs / jobs / 3600, 2)}),
            **({} if coverage is None else {"note": f"kept shards ({summary.shards_kept} before this run), "
                                                    f"folder in all: {json.dumps(coverage)}"})}


def tracr_ratio(config: ZooConfig, sample: int, python: Path) -> dict | None:
    """Compile time of the first `sample` random programs, ours and Tracr's, each after one
    untimed warm-up compile: in all (refusals included) and over the programs both compile (the
    fair ratio: a refusal is quick)."""
    from compiler import compile_rasp
    from compiler.errors import CompilerError
    from compiler.lab.zoo import rebuild

    drawn = [d for d in (draw(config, i) for i in range(sample * 2)) if d.origin == "random"][:sample]
    ours = []
    for d in drawn[:1] + drawn:  # the first compile again, untimed: warm-up
        started = time.perf_counter()
        try:
            compile_rasp(rebuild(d.source), d.vocab, d.max_seq_len)
            ok = True
        except CompilerError:
            ok = False
        ours.append((time.perf_counter() - started, ok))
    ours = ours[1:]
    row = {"programs": len(drawn), "ours_s": round(sum(t for t, _ in ours), 2), "ours_ok": sum(ok for _, ok in ours)}
    if not python.exists():
        return dict(row, tracr="absent (skipped)")
    payload = json.dumps([[d.source, list(d.vocab), d.max_seq_len] for d in drawn])
    done = subprocess.run([str(python), "-c", TRACR_SNIPPET], input=payload, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        return dict(row, tracr=f"failed: {done.stderr.strip()[-300:]}")
    tracr = json.loads(done.stdout.strip().splitlines()[-1])
    both = [i for i, ((_, a), (_, b)) in enumerate(zip(ours, tracr)) if a and b]
    ours_both, tracr_both = sum(ours[i][0] for i in both), sum(tracr[i][0] for i in both)
    tracr_s = sum(t for t, _ in tracr)
    return dict(row, tracr_s=round(tracr_s, 2), tracr_ok=sum(ok for _, ok in tracr),
                tracr_over_ours=round(tracr_s / row["ours_s"], 1), both_ok=len(both), ours_both_s=round(ours_both, 3),
                tracr_both_s=round(tracr_both, 2), tracr_over_ours_both=round(tracr_both / ours_both, 1) if both else None)


ROWS = ("tracr", "local-all", "ray-all", "local-each")
KEYS = ["row", "programs", "records_ok", "seconds", "programs_per_s", "MB", "MB_per_s", "projected_1e5_h",
        "cpu_s_per_program", "idle_1e5_h", "ray_start_s", "not_ok", "note"]


def ray_row(config: ZooConfig, jobs: int, progress: bool, keep: Path | None = None) -> dict:
    """The 'all variants' row on a local Ray instance of `jobs` CPUs (resumable in `keep`)."""
    try:
        import ray
    except ImportError:
        return {"row": "ray all", "note": "ray not installed (pip install 'tracr-compile[ray]')"}
    started = time.perf_counter()
    ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False)
    startup = time.perf_counter() - started
    try:
        return dict(zoo_row("ray all", config, "ray", jobs, progress, keep=keep), ray_start_s=round(startup, 1))
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", type=int, default=10_000, help="programs of the 'all variants' rows")
    parser.add_argument("--each-programs", type=int, default=None,
                        help="programs of the one-variant rows (default: --programs)")
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                        help="variants of the 'all' rows and the one-variant rows (default: the zoo's default three)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rows", default=",".join(ROWS), help=f"which rows, in this order (from {', '.join(ROWS)})")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--timeout", type=float, default=ZooConfig.timeout_s, help="seconds per program")
    parser.add_argument("--progress", action="store_true", help="a progress bar per row (on stderr)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="generate the 'local all' row into this folder and keep it: rerunning the same "
                             "command resumes a stopped run there (the row then times only the rest)")
    parser.add_argument("--keep-ray", type=Path, default=None, help="the same for the 'ray all' row")
    parser.add_argument("--tracr-sample", type=int, default=200)
    parser.add_argument("--tracr-python", type=Path, default=TRACR_PYTHON)
    args = parser.parse_args()
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        parser.error(f"unknown row(s) {', '.join(unknown)}; choose from {', '.join(ROWS)}")
    variants = tuple(v.strip() for v in args.variants.split(","))
    base = {"programs": args.programs, "shard_size": 500, "timeout_s": args.timeout}
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
            show(zoo_row("local all", ZooConfig(**base, variants=variants), "local", args.jobs, args.progress,
                         keep=args.keep))
        elif name == "ray-all" and not args.no_ray:
            show(ray_row(ZooConfig(**base, variants=variants), args.jobs, args.progress, keep=args.keep_ray))
        elif name == "local-each":
            for v in variants:
                show(zoo_row(f"local {v}", ZooConfig(**each, variants=(v,)), "local", args.jobs, args.progress))


if __name__ == "__main__":
    main()
