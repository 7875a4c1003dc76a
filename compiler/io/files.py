"""Model files: one safetensors file, weights as dense tensors, the rest as JSON in its header.

No pickle anywhere: the file is the safetensors layout (8-byte little-endian header length, a
JSON header, raw little-endian float32 data). Each tensor is one model parameter under its Haiku
path (`compiled_transformer/layer_0/head_0_q`), stored by default as the dense matrix over the
coordinates it connects (residual stream, token ids, positions, head or hidden units), so any
safetensors reader sees the weight matrices without this project. `storage="sparse"` stores
the parameters as the model keeps them (non-zeros of sparse matrices). The header's
`__metadata__` holds

* `format` = `"tracr-compile-model"`, `format_version` and `storage`;
* `model`: canonical JSON with the `ModelConfig`, encoders, residual basis and program source;
* `model_sha256`, `weights_sha256` and `content_sha256`: SHA-256 of the JSON text, of the
  tensors (name, dtype, shape, bytes; sorted by name), and of both together.

A model compiled with `reuse_residual=True` is written as format version 3: the description
also holds `residual_reuse`, the owners of every residual slot (`compiler.model.reuse`), which
versions 1 and 2 cannot express (a reader of those refuses the file by its version instead of
misreading the slots); a model compiled with a norm (`compile_rasp(..., norm=...)`) as version
4, whose config holds the `norm`; every other model is still written as version 2, byte for
byte as before. `load_model` reads format versions 1 (parameters as stored, names without the
module prefix), 2, 3 and 4, and refuses, with a `ModelFileError` naming the reason, a file that is truncated,
corrupted, of an unknown format version, or whose JSON or weights were edited after saving.
The field-by-field description is in docs/files.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import pathlib
import struct
from typing import Any, Literal

import jax
import numpy as np
import safetensors.numpy

from compiler.atomic import atomic_write_bytes, check_target
from compiler.errors import ModelFileError
from compiler.io import serialize
from compiler.model.compiled_model import CompiledModel
from compiler.model.config import MODULE_NAME, AttentionSpec, MLPSpec, ModelConfig, SparseLinear
from compiler.model.dense import dense_tensors, tensor_name
from compiler.model.forms import check_forms, choose_forms
from compiler.model.reuse import SEPARATOR
from compiler.model.transformer import build

FORMAT = "tracr-compile-model"
FORMAT_VERSION = 2
# The version of files of models compiled with `reuse_residual=True` (adds `residual_reuse`).
REUSE_FORMAT_VERSION = 3
# The version of files of models compiled with a norm (the config's `norm`, which older readers
# would ignore, running the model without its norms).
NORM_FORMAT_VERSION = 4
# Versions `load_model` reads; version 1 files store parameters as kept, named without prefix.
READABLE_VERSIONS = (1, 2, 3, 4)
STORAGES = ("dense", "sparse")
Storage = Literal["dense", "sparse"]
# A header longer than this is not one we wrote (the JSON of large compiled models is a few MB).
MAX_HEADER_BYTES = 1 << 30

PathLike = str | os.PathLike


@dataclasses.dataclass(frozen=True)
class ModelFile:
    """What `read_model_file` returns: the model plus what the file says about its program."""

    model: CompiledModel
    program_label: str | None
    source: str | None
    content_sha256: str
    format_version: int
    storage: str


# -- saving -------------------------------------------------------------------------------------


def program_source(obj: Any) -> str | None:
    """Best-effort source text of a function, class or module (`None` when unavailable)."""
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return None


def _param_roles(config: ModelConfig) -> dict[tuple[str, str], tuple[SparseLinear, int | None, int | None]]:
    """`(module, name) -> (spec, rows, columns)` of every parameter: the dense matrix's height
    and width where they are the residual width or a fixed size, `None` where the matrix's own
    size applies (head and hidden units)."""
    width = config.residual_width
    roles: dict[tuple[str, str], tuple[SparseLinear, int | None, int | None]] = {
        ("embed", "token"): (config.token_embed, config.vocab_size, width),
        ("embed", "position"): (config.pos_embed, config.max_seq_len + 1, width),
        ("unembed", "w_u"): (config.unembed, width, None),
    }
    for index, layer in enumerate(config.layers):
        module = f"layer_{index}"
        if isinstance(layer, AttentionSpec):
            for h, head in enumerate(layer.heads):
                for name in ("q", "k", "v"):
                    roles[(module, f"head_{h}_{name}")] = (getattr(head, f"w_{name}"), width, None)
                roles[(module, f"head_{h}_o")] = (head.w_o, None, width)
        elif isinstance(layer, MLPSpec):
            roles[(module, "w_in")] = (layer.w_in, width, None)
            roles[(module, "w_out")] = (layer.w_out, None, width)
    return roles


def _dense_shape(spec: SparseLinear, rows: int | None, columns: int | None) -> tuple[int, int]:
    return (spec.shape[0] if rows is None else rows, spec.shape[1] if columns is None else columns)


def model_tensors(model: CompiledModel, storage: str = "dense") -> dict[str, np.ndarray]:
    """The file's tensors: per parameter, its dense matrix (`compiler.model.dense.dense_tensors`)
    or (sparse) the stored array."""
    if storage not in STORAGES:
        raise ValueError(f"storage must be one of {STORAGES}, got {storage!r}")
    if storage == "dense":
        return dense_tensors(model)
    return {tensor_name(module, name): np.ascontiguousarray(model.params[f"{MODULE_NAME}/{module}"][name], dtype=np.float32)
            for module, name in _param_roles(model.config)}


def _weights_hash(tensors: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name], dtype="<f4")
        head = serialize.canonical_json([name, "F32", list(array.shape)])
        digest.update(head.encode("utf-8") + b"\0")
        digest.update(array.tobytes())
    return digest.hexdigest()


def _content_hash(model_json: str, weights_sha256: str) -> str:
    digest = hashlib.sha256(model_json.encode("utf-8") + b"\0" + weights_sha256.encode("ascii"))
    return digest.hexdigest()


def _description(model: CompiledModel, source: str | None, label: str | None) -> dict:
    if label is None:
        label = getattr(model.program, "label", None)
    reuse = getattr(model, "residual_reuse", None)
    extra = {} if reuse is None else {"residual_reuse": serialize.residual_reuse_to_json(reuse)}
    return extra | {
        "config": serialize.config_to_json(model.config),
        "input_encoder": serialize.input_encoder_to_json(model.input_encoder),
        "output_encoder": serialize.output_encoder_to_json(model.output_encoder),
        "residual_basis": serialize.residual_basis_to_json(model.residual_space),
        "program": {"label": label if isinstance(label, str) else None, "source": source},
        # Measured at compile time (absent in files of models whose bound is unknown).
        "numerical_maps": {
            "error_bound": model.numerical_error_bound,
            "errors": {
                label: [construction, error]
                for label, (construction, error) in sorted((model.numerical_map_errors or {}).items())
            },
        },
    }


def model_bytes(
    model: CompiledModel, source: str | None = None, label: str | None = None, storage: Storage = "dense"
) -> bytes:
    """The file contents `save_model` writes."""
    tensors = model_tensors(model, storage)
    model_json = serialize.canonical_json(_description(model, source, label))
    weights_sha256 = _weights_hash(tensors)
    reuse = getattr(model, "residual_reuse", None) is not None
    version = NORM_FORMAT_VERSION if model.config.norm is not None else REUSE_FORMAT_VERSION if reuse else FORMAT_VERSION
    metadata = {
        "format": FORMAT,
        "format_version": str(version),
        "storage": storage,
        "model": model_json,
        "model_sha256": hashlib.sha256(model_json.encode("utf-8")).hexdigest(),
        "weights_sha256": weights_sha256,
        "content_sha256": _content_hash(model_json, weights_sha256),
    }
    return safetensors_bytes(tensors, metadata)


def safetensors_bytes(tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
    """The safetensors layout with a sorted header and tensors in name order, so equal models
    give equal bytes (the reference writer orders its metadata arbitrarily)."""
    header: dict[str, Any] = {"__metadata__": metadata}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = serialize.canonical_json(header).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the format pads the header to a multiple of 8 bytes
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def save_model(
    model: CompiledModel,
    path: PathLike,
    *,
    source: str | None = None,
    label: str | None = None,
    storage: Storage = "dense",
) -> pathlib.Path:
    """Write `model` to `path` atomically (`compiler.atomic`: temporary file, fsync, rename).

    `source` is the program's source text to keep in the file (see `program_source`); `label`
    the program's name (default: the label of `model.program`, if any); `storage` `"dense"`
    (every weight a full matrix) or `"sparse"` (weights as the model stores them: smaller, but
    readers need the config's index lists). The file gets the permissions of any new file
    (0666 minus the umask). Raises `ModelFileError` if a token or s-op value has a type the
    format cannot store, or if `path` cannot be written (a folder, a device or other special
    file, a path under a file, an empty path, a read-only place), naming the path and the fix;
    the path is checked before the file's contents are built. A model compiled with
    `reuse_residual=True` is written with the owners of each residual slot (format version 3,
    module docstring).
    """
    check_target(path)
    return atomic_write_bytes(path, model_bytes(model, source, label, storage))


# -- loading ------------------------------------------------------------------------------------


def _refuse(path: PathLike, reason: str) -> ModelFileError:
    return ModelFileError(f"{path}: {reason}")


def _split_header(data: bytes, path: PathLike) -> tuple[dict, bytes]:
    """The safetensors header as a dict and the data section; refuses truncation."""
    if len(data) < 8:
        raise _refuse(path, f"truncated: {len(data)} bytes, not even a header length")
    (header_size,) = struct.unpack("<Q", data[:8])
    if header_size > MAX_HEADER_BYTES:
        raise _refuse(path, "not a tracr-compile model file (no safetensors header)")
    if len(data) < 8 + header_size:
        raise _refuse(path, f"truncated: the header needs {header_size} bytes, the file has {len(data) - 8}")
    try:
        header = json.loads(data[8 : 8 + header_size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _refuse(path, f"corrupted: the header is not valid JSON ({error})") from None
    if not isinstance(header, dict):
        raise _refuse(path, "corrupted: the header is not a JSON object")
    body = data[8 + header_size :]
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            end = max(end, int(entry["data_offsets"][1]))
        except (TypeError, KeyError, IndexError, ValueError):
            raise _refuse(path, f"corrupted: tensor entry {name!r} has no valid data offsets") from None
    if len(body) < end:
        raise _refuse(path, f"truncated: the weights need {end} bytes, the file has {len(body)}")
    if len(body) > end:
        raise _refuse(path, f"corrupted: {len(body) - end} unexpected bytes after the weights")
    return header, body


def _check_metadata(metadata: Any, path: PathLike) -> dict[str, str]:
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT:
        raise _refuse(path, f"not a tracr-compile model file (no format marker {FORMAT!r})")
    version = metadata.get("format_version")
    if version not in [str(v) for v in READABLE_VERSIONS]:
        readable = ", ".join(str(v) for v in READABLE_VERSIONS[:-1]) + f" and {READABLE_VERSIONS[-1]}"
        raise _refuse(
            path,
            f"format version mismatch: the file has version {version!r}, this tracr-compile reads "
            f"versions {readable}; re-save it with a matching tracr-compile",
        )
    if version != "1" and metadata.get("storage") not in STORAGES:
        raise _refuse(path, f"corrupted: the header's storage is {metadata.get('storage')!r}, not one of {STORAGES}")
    for key in ("model", "model_sha256", "weights_sha256", "content_sha256"):
        if not isinstance(metadata.get(key), str):
            raise _refuse(path, f"corrupted: the header has no {key!r} entry")
    return metadata


def _weights(config: ModelConfig, tensors: dict[str, np.ndarray], version: int, storage: str, path: PathLike) -> dict:
    """The model's parameters from the file's tensors; refuses missing, extra or misshapen
    tensors and dense matrices with entries outside the coordinates the config connects."""
    roles = _param_roles(config)
    prefix = "" if version == 1 else f"{MODULE_NAME}/"
    names = {f"{prefix}{module}/{name}": (module, name) for module, name in roles}
    if set(names) != set(tensors):
        missing = sorted(set(names) - set(tensors))
        extra = sorted(set(tensors) - set(names))
        raise _refuse(path, f"inconsistent: weights missing {missing[:5]}, unexpected {extra[:5]}")
    weights: dict[str, dict[str, np.ndarray]] = {f"layer_{i}": {} for i in range(len(config.layers))}
    weights.update(embed={}, unembed={})
    for flat, (module, name) in names.items():
        spec, rows, columns = roles[(module, name)]
        array = tensors[flat]
        expected: tuple[int, ...]
        if storage == "dense":
            expected = _dense_shape(spec, rows, columns)
        else:
            expected = (spec.nnz,) if spec.is_sparse else spec.shape
        if array.dtype != np.float32 or array.shape != tuple(expected):
            raise _refuse(
                path,
                f"inconsistent: weight {flat!r} is {array.dtype}{list(array.shape)}, "
                f"the config needs float32{list(expected)}",
            )
        if storage == "dense":
            array = _param_from_dense(spec, array, flat, path)
        weights[module][name] = array
    return weights


def _param_from_dense(spec: SparseLinear, matrix: np.ndarray, name: str, path: PathLike) -> np.ndarray:
    """The stored parameter of `spec` taken out of its dense matrix (exact: a copy of entries)."""
    rows = np.arange(spec.shape[0]) if spec.in_idx is None else np.asarray(spec.in_idx, dtype=np.intp)
    cols = np.arange(spec.shape[1]) if spec.out_idx is None else np.asarray(spec.out_idx, dtype=np.intp)
    block = matrix[np.ix_(rows, cols)]
    param = block[spec.pattern] if spec.is_sparse else block
    param = np.ascontiguousarray(param, dtype=np.float32)
    if not np.array_equal(spec.full_matrix(param, *matrix.shape), matrix):
        raise _refuse(
            path,
            f"inconsistent: weight {name!r} has non-zero entries outside the coordinates its "
            "config connects (edited weights with recomputed hashes?)",
        )
    return param


def read_model_file(path: PathLike) -> ModelFile:
    """Load a model file with what it records about the program; see `load_model`."""
    try:
        data = pathlib.Path(path).read_bytes()
    except OSError as error:
        raise _refuse(path, f"cannot read: {error.strerror or error}") from None
    header, _ = _split_header(data, path)
    metadata = _check_metadata(header.get("__metadata__"), path)
    model_json = metadata["model"]
    if hashlib.sha256(model_json.encode("utf-8")).hexdigest() != metadata["model_sha256"]:
        raise _refuse(path, "edited: the model description (JSON) does not match its hash; "
                      "it was changed after saving (hand-edited or corrupted)")
    try:
        tensors = safetensors.numpy.load(data)
    except (safetensors.SafetensorError, ValueError, OSError) as error:  # malformed data
        raise _refuse(path, f"corrupted: the weights cannot be read ({error})") from None
    if _weights_hash(tensors) != metadata["weights_sha256"]:
        raise _refuse(path, "corrupted: the weight data does not match its hash")
    if _content_hash(model_json, metadata["weights_sha256"]) != metadata["content_sha256"]:
        raise _refuse(path, "edited: the content hash does not match the model and weight hashes")
    try:
        description = json.loads(model_json)
        config = serialize.config_from_json(description["config"])
        input_encoder = serialize.input_encoder_from_json(description["input_encoder"])
        output_encoder = serialize.output_encoder_from_json(description["output_encoder"])
        residual = serialize.residual_basis_from_json(description["residual_basis"])
        program = description["program"]
        numerical = description.get("numerical_maps", {})
        error_bound = numerical.get("error_bound")
        map_errors = {label: (kind, float(error)) for label, (kind, error) in numerical.get("errors", {}).items()}
        version = int(metadata["format_version"])
        if ("residual_reuse" in description) != (version == REUSE_FORMAT_VERSION):
            raise ValueError(f"a version {version} file {'lacks' if version == REUSE_FORMAT_VERSION else 'has'} "
                             "residual_reuse")
        if (config.norm is not None) != (version == NORM_FORMAT_VERSION):
            raise ValueError(f"a version {version} file {'lacks' if version == NORM_FORMAT_VERSION else 'has'} a norm")
        reuse = serialize.residual_reuse_from_json(description["residual_reuse"]) if version == REUSE_FORMAT_VERSION else None
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise _refuse(path, f"inconsistent: the model description is malformed ({error!r})") from None
    if reuse is None:
        expected = tuple(str(d) for d in residual.basis)
    else:  # a slot's label joins its owners'; the stored basis holds each slot's first owner
        expected = tuple(SEPARATOR.join(owner.label for owner in owners) for owners in reuse.owners)
        if tuple(str(d) for d in residual.basis) != tuple(owners[0].label for owners in reuse.owners):
            raise _refuse(path, "inconsistent: the residual basis does not match the residual slots' first owners")
    if expected != config.residual_labels:
        raise _refuse(path, "inconsistent: the residual basis does not match the residual labels")
    storage = "sparse" if version == 1 else metadata["storage"]
    weights = _weights(config, tensors, version, storage, path)
    if config.backend is None:  # written before forms were recorded: choose them now
        config = choose_forms(config, weights, jax.default_backend())
    try:
        check_forms(config, weights)
    except ValueError as error:
        raise _refuse(path, f"inconsistent: {error}") from None
    params, forward, _ = build(config, weights)
    model = CompiledModel(
        params=params,
        config=config,
        forward=forward,
        graph=None,
        craft_model=None,
        sublayers=(),
        residual_space=residual,
        input_encoder=input_encoder,
        output_encoder=output_encoder,
        program=None,
        numerical_error_bound=None if error_bound is None else float(error_bound),
        numerical_map_errors=map_errors if error_bound is not None else None,
        residual_reuse=reuse,
    )
    return ModelFile(
        model=model,
        program_label=program.get("label"),
        source=program.get("source"),
        content_sha256=metadata["content_sha256"],
        format_version=version,
        storage=storage,
    )


def load_model(path: PathLike) -> CompiledModel:
    """Load a model saved by `save_model`; its outputs equal the original's bit for bit.

    The loaded model has what running and inspecting need (params, config, forward, encoders,
    residual space) but no compile-time objects: `graph`, `craft_model` and `program` are
    `None` and `sublayers` is empty. Raises `ModelFileError` saying whether the file is
    truncated, corrupted, of another format version or edited.
    """
    return read_model_file(path).model
