"""`generate_zoo`: the dataset generator behind `tracr-compile zoo generate`.

It draws and compiles the programs the config names, through the chosen engine, and writes each
shard once all its programs are in. A run that is stopped (killed, interrupted) and started
again with the same folder and config writes only the shards that are missing and ends with the
same files as an uninterrupted run; at most the shard in progress is lost.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pathlib
import time
from typing import Any

from tqdm import tqdm

from compiler.errors import LabError
from compiler.lab.zoo import engines, shards
from compiler.lab.zoo.config import ZooConfig


@dataclasses.dataclass(frozen=True)
class ZooSummary:
    """What a run did: shards written now and before, records by status, time and bytes."""

    out: pathlib.Path
    shards_written: int
    shards_kept: int
    programs: int  # compiled in this run
    statuses: dict[str, int]  # (variant/status) -> records written in this run
    seconds: float
    bytes_written: int

    @property
    def programs_per_second(self) -> float:
        return self.programs / self.seconds if self.seconds else 0.0

    @property
    def megabytes_per_second(self) -> float:
        return self.bytes_written / 2**20 / self.seconds if self.seconds else 0.0


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def generate_zoo(
    out: str | os.PathLike,
    config: ZooConfig,
    *,
    engine: str = "local",
    jobs: int | None = None,
    address: str | None = None,
    progress: bool = True,
) -> ZooSummary:
    """Generate (or finish) the zoo `config` describes in the folder `out`.

    Args:
      out: the dataset folder (created; see `compiler.lab.zoo.shards` for its layout).
      config: what to generate.
      engine: "local" (worker processes on this machine) or "ray".
      jobs: local worker processes (default: the CPUs this process may use; 1 runs in this
        process), or the CPUs of a local Ray instance.
      address: with engine "ray", the cluster to join (`ray.init(address=...)`, e.g. "auto");
        None starts a local Ray instance.
      progress: show a tqdm bar (programs and programs/s).

    Returns:
      A `ZooSummary` of this run.

    Raises:
      LabError: an unknown engine or bad jobs (before anything is written).
      ZooFolderError: `out` holds a zoo generated with other settings.
      ImportError: engine "ray" without Ray installed.
    """
    if engine not in engines.ENGINES:
        raise LabError(f"unknown engine {engine!r}; choose from {', '.join(engines.ENGINES)}")
    if jobs is not None and jobs < 1:
        raise LabError(f"jobs must be at least 1, got {jobs}")
    if address is not None and engine != "ray":
        raise LabError("address applies only to engine 'ray'")
    jobs = jobs or default_jobs()
    folder = pathlib.Path(out)
    todo = shards.prepare(folder, config)
    indices = [i for s in todo for i in shards.shard_programs(config, s)]
    started = time.perf_counter()
    if engine == "ray":
        results = engines.ray_results(config, indices, address, jobs)
    else:
        results = engines.local_results(config, indices, jobs)
    statuses: collections.Counter = collections.Counter()
    written = bytes_written = 0
    bar = tqdm(total=len(indices), unit="program", disable=not progress, desc="zoo", smoothing=0.05)
    try:
        shard_of = {i: s for s in todo for i in shards.shard_programs(config, s)}
        rows: list[dict[str, Any]] = []
        for index, program_rows in results:
            rows.extend(program_rows)
            statuses.update(f"{row['variant']}/{row['status']}" for row in program_rows)
            bar.update(1)
            shard = shard_of[index]
            if index == shards.shard_programs(config, shard)[-1]:
                path = shards.write_shard(folder, config, shard, rows)
                bytes_written += path.stat().st_size
                written += 1
                rows = []
                bar.set_postfix(shards=f"{written}/{len(todo)}", MB=f"{bytes_written / 2**20:.1f}")
    finally:
        bar.close()
        close = getattr(results, "close", None)
        if close is not None:
            close()
    return ZooSummary(folder, written, config.shards - len(todo), len(indices), dict(sorted(statuses.items())),
                      time.perf_counter() - started, bytes_written)
