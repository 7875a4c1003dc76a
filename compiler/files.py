"""Model files: one safetensors file, weights as tensors, the rest as JSON in its header.

No pickle anywhere: the file is the safetensors layout (8-byte little-endian header length, a
JSON header, raw little-endian float32 data) whose `__metadata__` holds

* `format` = `"tracr-compile-model"` and `format_version` (this module reads `FORMAT_VERSION`);
* `model`: canonical JSON with the `ModelConfig`, encoders, residual basis and program source;
* `model_sha256`, `weights_sha256` and `content_sha256`: SHA-256 of the JSON text, of the
  tensors (name, dtype, shape, bytes; sorted by name), and of both together.

`load_model` refuses, with a `ModelFileError` naming the reason, a file that is truncated,
corrupted, of another format version, or whose JSON or weights were edited after saving. The
field-by-field description is in docs/files.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import pathlib
import struct
import tempfile
from typing import Any

import numpy as np
import safetensors.numpy

from compiler import serialize
from compiler.compiled_model import CompiledModel
from compiler.errors import ModelFileError
from compiler.model import MODULE_NAME, AttentionSpec, MLPSpec, ModelConfig, SparseLinear, build

FORMAT = "tracr-compile-model"
FORMAT_VERSION = 1
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


# -- saving -------------------------------------------------------------------------------------


def program_source(obj: Any) -> str | None:
    """Best-effort source text of a function, class or module (`None` when unavailable)."""
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return None


def _tensors(model: CompiledModel) -> dict[str, np.ndarray]:
    prefix = f"{MODULE_NAME}/"
    tensors = {}
    for module, values in model.params.items():
        part = module[len(prefix):] if module.startswith(prefix) else module
        for name, value in values.items():
            tensors[f"{part}/{name}"] = np.ascontiguousarray(np.asarray(value, dtype=np.float32))
    return tensors


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
    return {
        "config": serialize.config_to_json(model.config),
        "input_encoder": serialize.input_encoder_to_json(model.input_encoder),
        "output_encoder": serialize.output_encoder_to_json(model.output_encoder),
        "residual_basis": serialize.residual_basis_to_json(model.residual_space),
        "program": {"label": label if isinstance(label, str) else None, "source": source},
    }


def model_bytes(model: CompiledModel, source: str | None = None, label: str | None = None) -> bytes:
    """The file contents `save_model` writes."""
    tensors = _tensors(model)
    model_json = serialize.canonical_json(_description(model, source, label))
    weights_sha256 = _weights_hash(tensors)
    metadata = {
        "format": FORMAT,
        "format_version": str(FORMAT_VERSION),
        "model": model_json,
        "model_sha256": hashlib.sha256(model_json.encode("utf-8")).hexdigest(),
        "weights_sha256": weights_sha256,
        "content_sha256": _content_hash(model_json, weights_sha256),
    }
    return _safetensors_bytes(tensors, metadata)


def _safetensors_bytes(tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
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
    model: CompiledModel, path: PathLike, *, source: str | None = None, label: str | None = None
) -> pathlib.Path:
    """Write `model` to `path` atomically (temporary file in the same folder, then rename).

    `source` is the program's source text to keep in the file (see `program_source`); `label`
    the program's name (default: the label of `model.program`, if any).
    Raises `ModelFileError` if a token or s-op value has a type the format cannot store.
    """
    path = pathlib.Path(path)
    data = model_bytes(model, source, label)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        pathlib.Path(temporary).unlink(missing_ok=True)
        raise
    return path


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
    if version != str(FORMAT_VERSION):
        raise _refuse(
            path,
            f"format version mismatch: the file has version {version!r}, this tracr-compile reads "
            f"version {FORMAT_VERSION}; re-save it with a matching tracr-compile",
        )
    for key in ("model", "model_sha256", "weights_sha256", "content_sha256"):
        if not isinstance(metadata.get(key), str):
            raise _refuse(path, f"corrupted: the header has no {key!r} entry")
    return metadata


def _param_shape(spec: SparseLinear) -> tuple[int, ...]:
    return (len(spec.rows),) if spec.is_sparse else tuple(spec.shape)


def _expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    shapes = {
        "embed/token": _param_shape(config.token_embed),
        "embed/position": _param_shape(config.pos_embed),
        "unembed/w_u": _param_shape(config.unembed),
    }
    for index, layer in enumerate(config.layers):
        if isinstance(layer, AttentionSpec):
            for h, head in enumerate(layer.heads):
                for name in ("q", "k", "v", "o"):
                    shapes[f"layer_{index}/head_{h}_{name}"] = _param_shape(getattr(head, f"w_{name}"))
        elif isinstance(layer, MLPSpec):
            shapes[f"layer_{index}/w_in"] = _param_shape(layer.w_in)
            shapes[f"layer_{index}/w_out"] = _param_shape(layer.w_out)
    return shapes


def _weights(config: ModelConfig, tensors: dict[str, np.ndarray], path: PathLike) -> dict:
    expected = _expected_shapes(config)
    if set(expected) != set(tensors):
        missing = sorted(set(expected) - set(tensors))
        extra = sorted(set(tensors) - set(expected))
        raise _refuse(path, f"inconsistent: weights missing {missing[:5]}, unexpected {extra[:5]}")
    weights: dict[str, dict[str, np.ndarray]] = {f"layer_{i}": {} for i in range(len(config.layers))}
    weights.update(embed={}, unembed={})
    for name, array in tensors.items():
        if array.dtype != np.float32 or array.shape != expected[name]:
            raise _refuse(
                path,
                f"inconsistent: weight {name!r} is {array.dtype}{list(array.shape)}, "
                f"the config needs float32{list(expected[name])}",
            )
        module, key = name.split("/", 1)
        weights[module][key] = array
    return weights


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
    except Exception as error:  # safetensors raises its own error type for malformed data
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
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise _refuse(path, f"inconsistent: the model description is malformed ({error!r})") from None
    if tuple(str(d) for d in residual.basis) != config.residual_labels:
        raise _refuse(path, "inconsistent: the residual basis does not match the residual labels")
    params, forward, _ = build(config, _weights(config, tensors, path))
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
    )
    return ModelFile(
        model=model,
        program_label=program.get("label"),
        source=program.get("source"),
        content_sha256=metadata["content_sha256"],
        format_version=FORMAT_VERSION,
    )


def load_model(path: PathLike) -> CompiledModel:
    """Load a model saved by `save_model`; its outputs equal the original's bit for bit.

    The loaded model has what running and inspecting need (params, config, forward, encoders,
    residual space) but no compile-time objects: `graph`, `craft_model` and `program` are
    `None` and `sublayers` is empty. Raises `ModelFileError` saying whether the file is
    truncated, corrupted, of another format version or edited.
    """
    return read_model_file(path).model
