"""The dataset folder: `zoo.json` and Parquet shards written atomically, one per block of programs.

Layout of a dataset folder `out/`:

* `out/zoo.json` — the `ZooConfig` (JSON) and the format version, written before any shard;
  a resumed run refuses a folder whose `zoo.json` differs from its own config.
* `out/data/train-SSSSS-of-NNNNN.parquet` — shard `S` holds the records of programs
  `S * shard_size .. (S + 1) * shard_size - 1`, ordered by program then variant, in the column
  order of `compiler.lab.zoo.records.SCHEMA`, zstd-compressed. The names follow the Hugging Face
  convention, so `datasets.load_dataset("parquet", data_dir="out/data")` (or `data_files=`)
  reads the folder as one `train` split.

Each shard is written by `compiler.atomic.atomic_write` (temporary file, fsync, rename), so
a shard file that exists is complete: a resumed run keeps it, deletes the hidden temporary file
of a shard a killed run was writing, and recomputes only missing shards.
The bytes depend only on the rows (no timestamps), so equal configs give identical files.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pyarrow.parquet as pq

from compiler.atomic import atomic_write, atomic_write_text, remove_stale_partials
from compiler.errors import LabError
from compiler.lab.zoo.config import ZooConfig
from compiler.lab.zoo.records import rows_to_table

FORMAT = "tracr-compile-zoo"
FORMAT_VERSION = 1
MANIFEST = "zoo.json"
DATA = "data"


class ZooFolderError(LabError):
    """The output folder holds a different zoo (or something else)."""


def shard_path(out: pathlib.Path, config: ZooConfig, shard: int) -> pathlib.Path:
    return out / DATA / f"train-{shard:05d}-of-{config.shards:05d}.parquet"


def shard_programs(config: ZooConfig, shard: int) -> range:
    """The program indices of one shard."""
    return range(shard * config.shard_size, min((shard + 1) * config.shard_size, config.programs))


def manifest(config: ZooConfig) -> dict[str, Any]:
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "config": config.to_json()}


def prepare(out: pathlib.Path, config: ZooConfig) -> list[int]:
    """Create or check `out`; return the shards still to write.

    Raises ZooFolderError when `out/zoo.json` was written for another configuration.
    """
    path = out / MANIFEST
    text = json.dumps(manifest(config), indent=2, sort_keys=True) + "\n"
    if path.exists():
        if path.read_text(encoding="utf-8") != text:
            raise ZooFolderError(
                f"{out} holds a zoo generated with other settings ({path}); resume it with the same "
                "settings or write the new zoo to another folder"
            )
    else:
        atomic_write_text(path, text)
    remove_stale_partials(out / DATA)  # a killed run's shards in progress (this host's dead writers)
    return [s for s in range(config.shards) if not shard_path(out, config, s).exists()]


def write_shard(out: pathlib.Path, config: ZooConfig, shard: int, rows: list[dict[str, Any]]) -> pathlib.Path:
    """Write one shard atomically."""
    table = rows_to_table(rows)
    return atomic_write(shard_path(out, config, shard),
                        lambda tmp: pq.write_table(table, tmp, compression="zstd", row_group_size=len(rows) or 1))
