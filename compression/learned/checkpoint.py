"""Checkpoints of a compression run: one safetensors file, written atomically, no pickle.

The file holds W, every optimiser-state leaf (in ``jax.tree_util`` order), the per-step loss
history, and — in the safetensors metadata header — a JSON record with the step, the training
config and the residual labels. A human-readable copy of that record is written beside it.
Loading needs a template optimiser state (from a fresh ``init``) to rebuild the tree.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jax
import numpy as np
from safetensors.numpy import load_file, save_file

from compiler.atomic import atomic_write, atomic_write_text
from compiler.errors import CompressionError

CHECKPOINT_FILE = "checkpoint.safetensors"
RECORD_FILE = "checkpoint.json"
FORMAT_VERSION = 1


def save_checkpoint(
    directory: str | os.PathLike, projection: Any, opt_state: Any, history: dict[str, np.ndarray],
    record: dict[str, Any],
) -> Path:
    """Write the run state to ``directory/checkpoint.safetensors`` atomically; return the path."""
    directory = Path(directory)
    tensors = {"projection": np.asarray(projection)}
    for i, leaf in enumerate(jax.tree_util.tree_leaves(opt_state)):
        tensors[f"opt/{i:04d}"] = np.asarray(leaf)
    for name, values in history.items():
        tensors[f"history/{name}"] = np.ascontiguousarray(values)
    record = {"format_version": FORMAT_VERSION, **record}
    text = json.dumps(record, sort_keys=True)
    path = directory / CHECKPOINT_FILE
    atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata={"record": text}))
    readable = json.dumps(record, indent=2, sort_keys=True)
    atomic_write_text(directory / RECORD_FILE, readable)
    return path


def read_record(directory: str | os.PathLike) -> dict[str, Any] | None:
    """The JSON record stored in the checkpoint of ``directory``, or None when there is none."""
    path = Path(directory) / CHECKPOINT_FILE
    if not path.exists():
        return None
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        return json.loads(handle.metadata()["record"])


def load_checkpoint(
    directory: str | os.PathLike, opt_state_template: Any
) -> tuple[np.ndarray, Any, dict[str, np.ndarray], dict[str, Any]] | None:
    """``(projection, opt_state, history, record)`` from ``directory``, or None without a checkpoint.

    ``opt_state_template`` fixes the tree structure; leaf shapes and dtypes must match it.
    """
    record = read_record(directory)
    if record is None:
        return None
    if record.get("format_version") != FORMAT_VERSION:
        raise CompressionError(f"checkpoint format {record.get('format_version')} in {directory} is not {FORMAT_VERSION}")
    tensors = load_file(str(Path(directory) / CHECKPOINT_FILE))
    leaves, treedef = jax.tree_util.tree_flatten(opt_state_template)
    restored = []
    for i, template in enumerate(leaves):
        value = tensors[f"opt/{i:04d}"]
        if value.shape != np.shape(template) or value.dtype != np.asarray(template).dtype:
            raise CompressionError(f"optimiser leaf {i} in {directory} has shape/dtype {value.shape}/{value.dtype}, "
                             f"expected {np.shape(template)}/{np.asarray(template).dtype}")
        restored.append(value)
    history = {k.split("/", 1)[1]: v for k, v in tensors.items() if k.startswith("history/")}
    return tensors["projection"], jax.tree_util.tree_unflatten(treedef, restored), history, record
