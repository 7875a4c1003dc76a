"""Shards to batches for training a meta-model (weights in, program out), in numpy, PyTorch or JAX.

Each `ok` record becomes one example of fixed shape, the layout meta-model papers use:

* `weights` `[max_chunks, chunk]` float32: every tensor of the record (name order, the
  compression `projection` left out) flattened row-major, concatenated and cut into chunks of
  `chunk` numbers ("weight tokens"); `weights_mask` marks the real chunks. A model longer than
  `max_chunks` chunks is cut and flagged in `truncated`.
* `source` `[max_source]` int32: the program source as UTF-8 bytes (the decoding target), 0
  after the end; `source_mask` marks the real bytes (`truncated` also flags a cut source).
* `index` (program index) and `d_model` per example, to join back to the records.

`iterate_batches(paths, ...)` reads shards with pyarrow (one at a time, only the columns it
needs), keeps the records of the chosen variants, and yields dicts of arrays; `framework`
turns them into `torch.Tensor`s or `jax.Array`s (imported only when asked for).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import random
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from compiler.errors import LabError
from compiler.lab.zoo import weights as zoo_weights
from compiler.lab.zoo.records import OK

FRAMEWORKS = ("numpy", "torch", "jax")
_COLUMNS = ["index", "variant", "status", "source", "d_model", "weights"]


@dataclasses.dataclass(frozen=True)
class BatchShape:
    """The fixed example shape: weight tokens of `chunk` numbers, at most `max_chunks` of them,
    and at most `max_source` source bytes."""

    chunk: int = 64
    max_chunks: int = 1024
    max_source: int = 2048

    def __post_init__(self) -> None:
        for name in ("chunk", "max_chunks", "max_source"):
            if getattr(self, name) < 1:
                raise LabError(f"{name} must be at least 1, got {getattr(self, name)}")


def example(row: dict[str, Any], shape: BatchShape) -> dict[str, np.ndarray]:
    """One record as fixed-shape arrays (see the module docstring)."""
    tensors, _ = zoo_weights.from_bytes(row["weights"])
    flat = np.concatenate([tensors[name].ravel() for name in sorted(tensors) if name != zoo_weights.PROJECTION])
    chunks = -(-flat.size // shape.chunk)
    padded = np.zeros(chunks * shape.chunk, np.float32)
    padded[: flat.size] = flat
    tokens = padded.reshape(chunks, shape.chunk)[: shape.max_chunks]
    weights = np.zeros((shape.max_chunks, shape.chunk), np.float32)
    weights[: len(tokens)] = tokens
    text = row["source"].encode("utf-8")
    source = np.zeros(shape.max_source, np.int32)
    source[: min(len(text), shape.max_source)] = np.frombuffer(text[: shape.max_source], np.uint8)
    return {
        "weights": weights,
        "weights_mask": np.arange(shape.max_chunks) < len(tokens),
        "source": source,
        "source_mask": np.arange(shape.max_source) < len(text),
        "truncated": np.bool_(chunks > shape.max_chunks or len(text) > shape.max_source),
        "index": np.int64(row["index"]),
        "d_model": np.int32(row["d_model"]),
    }


def shard_paths(path: str | os.PathLike) -> list[pathlib.Path]:
    """The shard files of a dataset folder (or the one file given)."""
    path = pathlib.Path(path)
    if path.is_file():
        return [path]
    found = sorted((path / "data").glob("train-*.parquet")) or sorted(path.glob("train-*.parquet"))
    if not found:
        raise FileNotFoundError(f"no train-*.parquet shards in {path} or {path / 'data'}")
    return found


def _convert(batch: dict[str, np.ndarray], framework: str) -> dict[str, Any]:
    if framework == "torch":
        import torch

        return {name: torch.from_numpy(np.asarray(value)) for name, value in batch.items()}
    if framework == "jax":
        import jax.numpy as jnp

        return {name: jnp.asarray(value) for name, value in batch.items()}
    return batch


def iterate_batches(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    batch_size: int,
    *,
    variants: tuple[str, ...] = ("optimised",),
    shape: BatchShape = BatchShape(),
    framework: str = "numpy",
    shuffle_seed: int | None = None,
    drop_last: bool = False,
) -> Iterator[dict[str, Any]]:
    """Batches of `batch_size` examples from the `ok` records of `variants`.

    Args:
      paths: a dataset folder, a shard file, or several shard files.
      batch_size: examples per batch (the last batch may be smaller unless `drop_last`).
      variants: which variants' records to use.
      shape: the example shape (`BatchShape`).
      framework: "numpy", "torch" or "jax".
      shuffle_seed: shuffle the shard order and the examples within each shard (None: in order).
      drop_last: leave out a last, smaller batch.

    Yields:
      dicts with `weights`, `weights_mask`, `source`, `source_mask`, `truncated`, `index`,
      `d_model`, each with a leading batch axis.

    Raises:
      LabError: a bad batch size or framework (before anything is read). As this is a
        generator, the error (like the others) comes on the first `next()`, not at the call.
      FileNotFoundError: no shards at `paths`.
    """
    if batch_size < 1:
        raise LabError(f"batch_size must be at least 1, got {batch_size}")
    if framework not in FRAMEWORKS:
        raise LabError(f"framework must be one of {', '.join(FRAMEWORKS)}, got {framework!r}")
    if isinstance(paths, (str, os.PathLike)):
        files = shard_paths(paths)
    else:
        files = [pathlib.Path(p) for p in paths]
    rng = random.Random(shuffle_seed)
    if shuffle_seed is not None:
        rng.shuffle(files)
    pending: list[dict[str, np.ndarray]] = []
    for file in files:
        rows = [r for r in pq.read_table(file, columns=_COLUMNS).to_pylist()
                if r["status"] == OK and r["variant"] in variants]
        if shuffle_seed is not None:
            rng.shuffle(rows)
        for row in rows:
            pending.append(example(row, shape))
            if len(pending) == batch_size:
                yield _convert(_stack(pending), framework)
                pending = []
    if pending and not drop_last:
        yield _convert(_stack(pending), framework)


def _stack(examples: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {name: np.stack([e[name] for e in examples]) for name in examples[0]}
