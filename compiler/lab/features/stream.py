"""Activations as data: a site's activations with their true codes, streamed into shard files.

:func:`stream_activations` samples inputs, runs the (compressed) model and the exact model in
jitted batches, keeps the real token positions (not BOS, not PAD) and writes shards:

* ``shard_00000.safetensors`` ...: ``activations`` ``[n, d]`` float32; the true codes, sparse:
  ``code_index`` ``[n, k]`` int32 (feature numbers, -1 pads) and ``code_value`` ``[n, k]``
  float32, where ``k`` bounds the features on at one position (one per s-op present);
  ``dense_codes`` ``[n, G]`` float32 (the dense directions' values).
* ``dictionary.safetensors``: ``vectors`` ``[F, d]`` and ``dense_vectors`` ``[G, d]``.
* ``meta.json``: site, widths, labels, shard list, and how the inputs were drawn. Written last, so
  a folder with a ``meta.json`` is complete. Every file is written atomically.

Any reader of safetensors (SAELens' own loaders, ``safetensors.torch.load_file``, numpy) reads
the shards; :class:`ShardReader` iterates over them in batches, and
:mod:`compiler.lab.features.sae` trains SAELens on them.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np
from safetensors.numpy import load_file, save
from tqdm import tqdm

from compiler import CompiledModel
from compiler.atomic import atomic_write_bytes, atomic_write_text
from compiler.errors import LabError
from compiler.lab.features.dictionary import CODE_FLOOR, TrueDictionary, real_positions, true_dictionary
from compiler.lab.features.sites import Site, SiteRunner
from compiler.lab.features.stages import sample_ids

META = "meta.json"
DICTIONARY = "dictionary.safetensors"
# The exact pass holds [batch, T, D] float32 streams: a batch is sized to keep one within this
# (the 16k-copy model, D = 16,708 and T = 65, gets 123 inputs; small models 4,096). At that
# stage batches of 64 and 256 inputs generate at the same rate.
STREAM_BYTES = 1 << 29
MAX_BATCH = 4096


@dataclasses.dataclass(frozen=True)
class StreamReport:
    """What :func:`stream_activations` wrote and how long it took."""

    folder: pathlib.Path
    tokens: int
    shards: int
    seconds: float  # sampling, both forward passes and code extraction (file writes excluded)
    write_seconds: float

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / max(self.seconds, 1e-9)


def max_active(dictionary: TrueDictionary) -> int:
    """How many features can be on at one position: one per s-op with features at the site."""
    return max(1, len({label.split(":", 1)[0] for label in dictionary.labels}))


def _code_fn(dictionary: TrueDictionary, k: int):
    """The jitted code extraction: ``values [..., D]`` (exact model) -> ``(index, value, dense)``."""
    coords = jnp.asarray(dictionary.coords)
    dense = jnp.asarray(dictionary.dense_coords)
    slots = _value_slots(dictionary) if dictionary.site.kind == "resid" else None

    # Residual sites: the coordinates of each s-op's values, [s-ops, most values] (padding: one
    # past the last coordinate, read as 0), and the same as one slice when they are consecutive.
    grouped_coords = None if slots is None else np.append(dictionary.coords, -1)[slots]
    block = None
    if grouped_coords is not None and np.all(grouped_coords >= 0):
        flat = grouped_coords.ravel()
        if np.array_equal(flat, np.arange(flat[0], flat[0] + len(flat))):
            block = (int(flat[0]), int(flat[0]) + len(flat))

    def codes(values):
        if slots is None:  # MLP site: several hidden units of one MLP may be on together
            feature_values = jnp.take(values, coords, axis=-1)
            feature_values = jnp.where(jnp.abs(feature_values) < CODE_FLOOR, 0.0, feature_values)
            top, index = jax.lax.top_k(jnp.abs(feature_values), k)
            picked = jnp.take_along_axis(feature_values, index, axis=-1)
        else:  # one value per s-op at most: an argmax within each s-op's values (top_k sorts all F)
            if block is not None:  # one slice, no gather (every s-op with as many consecutive values)
                grouped = values[..., block[0]:block[1]].reshape(values.shape[:-1] + grouped_coords.shape)
            else:
                grouped = jnp.take(values, np.where(grouped_coords < 0, values.shape[-1], grouped_coords), axis=-1,
                                   mode="fill", fill_value=0.0)  # [..., s-ops, values]
            grouped = jnp.where(jnp.abs(grouped) < CODE_FLOOR, 0.0, grouped)
            best = jnp.argmax(jnp.abs(grouped), axis=-1)
            picked = jnp.take_along_axis(grouped, best[..., None], axis=-1)[..., 0]
            index, top = jnp.asarray(slots)[jnp.arange(len(slots)), best], jnp.abs(picked)
        index = jnp.where(top > 0, index, -1).astype(jnp.int32)
        return index, jnp.where(top > 0, picked, 0.0), jnp.take(values, dense, axis=-1)

    return codes


def _value_slots(dictionary: TrueDictionary) -> np.ndarray:
    """``[s-ops, most values]``: the feature numbers of each s-op's values, padded with ``F`` (a
    zero column appended to the features)."""
    groups: dict[str, list[int]] = {}
    for feature, label in enumerate(dictionary.labels):
        groups.setdefault(label.split(":", 1)[0], []).append(feature)
    slots = np.full((max(1, len(groups)), max((len(g) for g in groups.values()), default=1)),
                    dictionary.num_features, np.int64)
    for row, members in enumerate(groups.values()):
        slots[row, :len(members)] = members
    return slots


def default_batch(compiled: CompiledModel) -> int:
    """Inputs per batch: as many as keep one exact ``[batch, T, D]`` stream within
    :data:`STREAM_BYTES`, between 16 and :data:`MAX_BATCH`.

    Args:
        compiled: the compiled model; its ``max_seq_len`` and residual width ``D`` set the size.

    Returns:
        The number of inputs per batch, in ``[16, MAX_BATCH]``.
    """
    per_input = (compiled.config.max_seq_len + 1) * compiled.config.residual_width * 4
    return int(min(MAX_BATCH, max(16, STREAM_BYTES // per_input)))


def stream_activations(
    compiled: CompiledModel, site: Site, folder: str | pathlib.Path, tokens: int | None,
    projection: np.ndarray | None = None, batch_inputs: int | None = None, shard_tokens: int = 1 << 18,
    seed: int = 0, zipf: float = 0.0, progress: bool = True, write: bool = True, inputs: np.ndarray | None = None,
) -> StreamReport:
    """Write about ``tokens`` activations at ``site`` with their true codes into ``folder``.

    Args:
        compiled: the compiled model.
        site: where to read (:class:`compiler.lab.features.sites.Site`).
        folder: output folder (created); existing shards of the same names are replaced.
        tokens: how many real-token activations to write (the last batch is cut to this); None
            with ``inputs``.
        projection: ``W`` (``[D, d]``) of the compressed model, or None for the exact model.
        batch_inputs: inputs per jitted batch; None for :func:`default_batch`.
        shard_tokens: activations per shard file.
        seed: the inputs of batch ``b`` are drawn from ``(seed, b)``.
        zipf: token distribution (:func:`compiler.lab.features.stages.sample_ids`).
        progress: show a progress bar.
        write: False measures generation only (nothing is written).
        inputs: ``[n, max_seq_len + 1]`` token ids (e.g. :func:`~compiler.lab.features.stages.sample_ids`)
            to stream instead of sampling: every real position of every input, in order. An
            evaluation set streamed this way is the data its ground truth is profiled on, so
            the splice checks on the same inputs meet no feature the truth lacks.

    Returns:
        A :class:`StreamReport`.

    Raises:
        LabError: ``tokens``, ``batch_inputs`` or ``shard_tokens`` is not positive, both or
            neither of ``tokens`` and ``inputs`` are given, ``inputs`` is not a batch of this
            model's inputs, or :func:`~compiler.lab.features.dictionary.true_dictionary` refuses
            ``site`` or ``projection``.
    """
    batch_inputs = default_batch(compiled) if batch_inputs is None else batch_inputs
    if (tokens is None) == (inputs is None):
        raise LabError("stream_activations: give exactly one of tokens (sampled inputs) and inputs (given ones)")
    if inputs is None:
        total = int(tokens or 0)
    else:
        inputs = np.asarray(inputs)
        width = compiled.config.max_seq_len + 1
        if inputs.ndim != 2 or inputs.shape[1] != width or not np.issubdtype(inputs.dtype, np.integer):
            raise LabError(f"stream_activations: inputs must be [n, {width}] token ids (BOS, tokens, PAD), "
                           f"got {inputs.dtype} {inputs.shape}; draw them with sample_ids")
        total = int(real_positions(compiled, inputs).sum())
    for name, value in (("tokens", total), ("batch_inputs", batch_inputs), ("shard_tokens", shard_tokens)):
        if int(value) < 1:
            raise LabError(f"stream_activations: {name} must be positive, got {value}")
    folder = pathlib.Path(folder)
    dictionary = true_dictionary(compiled, site, projection)
    compressed, exact = SiteRunner(compiled, projection), SiteRunner(compiled)
    codes = jax.jit(_code_fn(dictionary, max_active(dictionary)))
    if write:
        atomic_write_bytes(folder / DICTIONARY, save({"vectors": dictionary.vectors,
                                                            "dense_vectors": dictionary.dense_vectors}))
    buffer: list[dict[str, np.ndarray]] = []
    buffered = written = shards = batch = 0
    compute = write_time = 0.0
    bar = tqdm(total=total, desc=f"activations at {site.kind} {site.index}", unit="tok", disable=not progress,
               mininterval=2)
    while written + buffered < total:
        start = time.perf_counter()
        ids = (sample_ids(compiled, batch_inputs, seed=seed * 1_000_003 + batch, zipf=zipf) if inputs is None
               else inputs[batch * batch_inputs:(batch + 1) * batch_inputs])
        acts = compressed.activations(ids, site)
        values = exact.hidden(ids, site) if site.kind == "mlp" else exact.activations(ids, site)
        index, value, dense = codes(values)
        mask = real_positions(compiled, ids)
        part = {"activations": np.asarray(acts)[mask], "code_index": np.asarray(index)[mask],
                "code_value": np.asarray(value)[mask], "dense_codes": np.asarray(dense)[mask]}
        take = min(len(part["activations"]), total - written - buffered)
        part = {key: array[:take] for key, array in part.items()}
        compute += time.perf_counter() - start
        buffer.append(part)
        buffered += take
        batch += 1
        bar.update(take)
        while buffered >= shard_tokens or (written + buffered >= total and buffered):
            start = time.perf_counter()
            merged = {key: np.concatenate([p[key] for p in buffer]) for key in buffer[0]}
            count = min(shard_tokens, buffered)
            if write:
                atomic_write_bytes(folder / f"shard_{shards:05d}.safetensors",
                                   save({key: np.ascontiguousarray(a[:count]) for key, a in merged.items()}))
            buffer = [{key: a[count:] for key, a in merged.items()}]
            buffered -= count
            written += count
            shards += 1
            write_time += time.perf_counter() - start
    bar.close()
    if write:
        meta = {"site": {"kind": site.kind, "index": site.index, "name": site.name(compiled)},
                "width": dictionary.width, "num_features": dictionary.num_features,
                "labels": list(dictionary.labels), "dense_labels": list(dictionary.dense_labels),
                "dropped": list(dictionary.dropped), "tokens": written,
                "shards": [f"shard_{i:05d}.safetensors" for i in range(shards)],
                "compressed": projection is not None, "seed": None if inputs is not None else seed,
                "zipf": None if inputs is not None else zipf, "given_inputs": None if inputs is None else len(inputs),
                "batch_inputs": batch_inputs}
        atomic_write_text(folder / META, json.dumps(meta, indent=1))
    return StreamReport(folder, written, shards, compute, write_time)


@dataclasses.dataclass(frozen=True, eq=False)
class ShardReader:
    """The shards of a :func:`stream_activations` folder."""

    folder: pathlib.Path

    def __post_init__(self) -> None:
        if not (pathlib.Path(self.folder) / META).is_file():
            raise FileNotFoundError(f"{self.folder}: no {META}; not a finished activation folder "
                                    "(run stream_activations into it first)")

    @property
    def meta(self) -> dict:
        return json.loads((pathlib.Path(self.folder) / META).read_text(encoding="utf-8"))

    def dictionary(self) -> tuple[np.ndarray, np.ndarray]:
        """``(vectors [F, d], dense_vectors [G, d])``."""
        found = load_file(pathlib.Path(self.folder) / DICTIONARY)
        return found["vectors"], found["dense_vectors"]

    def shards(self):
        """Each shard's arrays, in order."""
        for name in self.meta["shards"]:
            yield load_file(pathlib.Path(self.folder) / name)

    def batches(self, batch_size: int, keys: tuple[str, ...] = ("activations",)):
        """Consecutive ``batch_size`` slices across shards (the last one may be shorter)."""
        rest: dict[str, np.ndarray] | None = None
        for shard in self.shards():
            part = {key: shard[key] for key in keys}
            if rest is not None:
                part = {key: np.concatenate([rest[key], part[key]]) for key in keys}
            n = len(part[keys[0]])
            full = n - n % batch_size
            for start in range(0, full, batch_size):
                yield {key: part[key][start:start + batch_size] for key in keys}
            rest = {key: part[key][full:] for key in keys}
        if rest is not None and len(rest[keys[0]]):
            yield rest


def dense_codes(code_index: np.ndarray, code_value: np.ndarray, num_features: int) -> np.ndarray:
    """``[n, F]`` codes from the sparse ``(code_index, code_value)`` of a shard.

    Args:
        code_index: ``[n, k]`` feature numbers, -1 where a slot is empty.
        code_value: ``[n, k]`` the codes of those features.
        num_features: ``F``, the number of features of the site's dictionary.

    Returns:
        ``[n, F]`` float32 codes, 0 for every feature not listed.
    """
    out = np.zeros((len(code_index), num_features), np.float32)
    rows, slots = np.nonzero(code_index >= 0)
    out[rows, code_index[rows, slots]] = code_value[rows, slots]
    return out
