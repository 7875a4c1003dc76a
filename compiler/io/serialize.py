"""A compiled model's description (everything but the weight values) as plain JSON data.

Used by `compiler.io.files`. Token and output values keep their Python type through a tagged form:
`["str", "a"]`, `["int", 3]`, `["float", "0x1.8p+0"]` (`float.hex`, exact), `["bool", true]`,
`["none"]`, `["tuple", [...]]`, `["frozenset", [...]]`. Anything else cannot be stored and is
refused with a `ModelFileError` at save time.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
from collections.abc import Hashable
from typing import Any

import numpy as np

from compiler.errors import ModelFileError
from compiler.model.config import (
    AttentionSpec,
    HeadSpec,
    LayerSpec,
    MLPSpec,
    ModelConfig,
    NormSpec,
    SparseLinear,
    TiedBlock,
)
from compiler.model.encoders import InputEncoder, OutputEncoder, OutputsEncoder
from compiler.model.reuse import Owner, ResidualReuse
from craft.bases import BasisDirection, VectorSpaceWithBasis


def canonical_json(data: Any) -> str:
    """Deterministic JSON text: sorted keys, no insignificant whitespace."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


# -- tagged values ------------------------------------------------------------------------------


def encode_value(value: Any) -> list:
    """A hashable token/output value as tagged JSON data (see the module docstring)."""
    if value is None:
        return ["none"]
    if isinstance(value, (bool, np.bool_)):
        return ["bool", bool(value)]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, numbers.Integral):
        return ["int", int(value)]
    if isinstance(value, numbers.Real):
        return ["float", float(value).hex()]
    if isinstance(value, tuple):
        return ["tuple", [encode_value(v) for v in value]]
    if isinstance(value, frozenset):
        items = sorted((encode_value(v) for v in value), key=canonical_json)
        return ["frozenset", items]
    raise ModelFileError(
        f"cannot store the value {value!r} of type {type(value).__name__} in a model file; "
        "tokens and s-op values must be str, int, float, bool, None, tuples or frozensets of them"
    )


def decode_value(data: Any) -> Hashable:
    """Inverse of `encode_value`."""
    if not isinstance(data, list) or not data or not isinstance(data[0], str):
        raise ValueError(f"not a tagged value: {data!r}")
    tag, rest = data[0], data[1:]
    if tag == "none" and not rest:
        return None
    if len(rest) != 1:
        raise ValueError(f"tagged value {data!r} must have exactly one payload")
    payload = rest[0]
    decoders = {
        "bool": lambda p: _typed(p, bool),
        "str": lambda p: _typed(p, str),
        "int": lambda p: _typed(p, int),
        "float": lambda p: float.fromhex(_typed(p, str)),
        "tuple": lambda p: tuple(decode_value(v) for v in _typed(p, list)),
        "frozenset": lambda p: frozenset(decode_value(v) for v in _typed(p, list)),
    }
    if tag not in decoders:
        raise ValueError(f"unknown value tag {tag!r}")
    return decoders[tag](payload)


def _typed(value: Any, kind: type) -> Any:
    if kind is int and isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    if not isinstance(value, kind):
        raise ValueError(f"expected {kind.__name__}, got {value!r}")
    return value


# -- config -------------------------------------------------------------------------------------


def _optional_ints(values: tuple[int, ...] | None) -> list[int] | None:
    return None if values is None else [int(v) for v in values]


def sparse_to_json(spec: SparseLinear) -> dict:
    return {
        "shape": [int(n) for n in spec.shape],
        "in_idx": _optional_ints(spec.in_idx),
        "out_idx": _optional_ints(spec.out_idx),
        "rows": _optional_ints(spec.rows),
        "cols": _optional_ints(spec.cols),
        "form": spec.form,
    }


def _int_tuple(values: Any) -> tuple[int, ...] | None:
    if values is None:
        return None
    return tuple(_typed(v, int) for v in _typed(values, list))


def sparse_from_json(data: dict) -> SparseLinear:
    shape = _int_tuple(data["shape"])
    if shape is None or len(shape) != 2:
        raise ValueError(f"a weight shape must have two entries, got {data['shape']!r}")
    return SparseLinear(
        shape=shape,
        in_idx=_int_tuple(data["in_idx"]),
        out_idx=_int_tuple(data["out_idx"]),
        rows=_int_tuple(data["rows"]),
        cols=_int_tuple(data["cols"]),
        form=None if data.get("form") is None else _typed(data["form"], str),  # absent before forms
    )


def _layer_to_json(layer: LayerSpec) -> dict:
    if isinstance(layer, AttentionSpec):
        heads = [
            {name: sparse_to_json(getattr(head, name)) for name in ("w_q", "w_k", "w_v", "w_o")}
            for head in layer.heads
        ]
        return {"kind": "attention", "heads": heads}
    return {
        "kind": "mlp",
        "w_in": sparse_to_json(layer.w_in),
        "w_out": sparse_to_json(layer.w_out),
        "activation": layer.activation,
    }


def _layer_from_json(data: dict) -> LayerSpec:
    if data["kind"] == "attention":
        heads = tuple(
            HeadSpec(*(sparse_from_json(head[name]) for name in ("w_q", "w_k", "w_v", "w_o")))
            for head in data["heads"]
        )
        return AttentionSpec(heads)
    if data["kind"] == "mlp":
        return MLPSpec(
            sparse_from_json(data["w_in"]),
            sparse_from_json(data["w_out"]),
            _typed(data["activation"], str),
        )
    raise ValueError(f"unknown layer kind {data['kind']!r}")


def _tied_from_json(data: Any) -> TiedBlock | None:
    if data is None:
        return None
    return TiedBlock(_typed(data["start"], int), _typed(data["stop"], int), _typed(data["repeats"], int))


def norm_to_json(norm: NormSpec | None) -> dict | None:
    """A norm as JSON (None for none): what model files and zoo records store."""
    return None if norm is None else dataclasses.asdict(norm)


def norm_from_json(data: Any) -> NormSpec | None:
    """The inverse of `norm_to_json`, every field type-checked."""
    if data is None:
        return None
    return NormSpec(_typed(data["kind"], str), *(_typed(data[key], float) for key in ("scale", "eps", "anchor", "spread",
                                                                                         "budget")))


def config_to_json(config: ModelConfig) -> dict:
    tied = {} if config.tied is None else {"tied": dataclasses.asdict(config.tied)}  # untied files unchanged
    norm = {} if config.norm is None else {"norm": norm_to_json(config.norm)}  # so are files without a norm
    return {
        **tied,
        **norm,
        "residual_labels": list(config.residual_labels),
        "layers": [_layer_to_json(layer) for layer in config.layers],
        "token_embed": sparse_to_json(config.token_embed),
        "pos_embed": sparse_to_json(config.pos_embed),
        "unembed": sparse_to_json(config.unembed),
        "vocab_size": int(config.vocab_size),
        "max_seq_len": int(config.max_seq_len),
        "pad_id": int(config.pad_id),
        "causal": bool(config.causal),
        "numerical_output": bool(config.numerical_output),
        "backend": config.backend,
    }


def config_from_json(data: dict) -> ModelConfig:
    return ModelConfig(
        residual_labels=tuple(_typed(label, str) for label in data["residual_labels"]),
        layers=tuple(_layer_from_json(layer) for layer in data["layers"]),
        token_embed=sparse_from_json(data["token_embed"]),
        pos_embed=sparse_from_json(data["pos_embed"]),
        unembed=sparse_from_json(data["unembed"]),
        vocab_size=_typed(data["vocab_size"], int),
        max_seq_len=_typed(data["max_seq_len"], int),
        pad_id=_typed(data["pad_id"], int),
        causal=_typed(data["causal"], bool),
        numerical_output=_typed(data["numerical_output"], bool),
        backend=None if data.get("backend") is None else _typed(data["backend"], str),
        tied=_tied_from_json(data.get("tied")),
        norm=norm_from_json(data.get("norm")),
    )


# -- encoders and residual basis ----------------------------------------------------------------


def input_encoder_to_json(encoder: InputEncoder) -> dict:
    return {
        "vocab": [encode_value(token) for token in encoder.vocab],
        "bos": encode_value(encoder.bos),
        "pad": encode_value(encoder.pad),
        "max_seq_len": int(encoder.max_seq_len),
    }


def input_encoder_from_json(data: dict) -> InputEncoder:
    return InputEncoder(
        vocab=tuple(decode_value(token) for token in data["vocab"]),
        bos=decode_value(data["bos"]),
        pad=decode_value(data["pad"]),
        max_seq_len=_typed(data["max_seq_len"], int),
    )


def output_encoder_to_json(encoder: OutputEncoder | OutputsEncoder) -> dict:
    """One output: `{"values", "bos"}`; several programs: `{"outputs": [[label, encoder], ...], "bos"}`."""
    if isinstance(encoder, OutputsEncoder):
        parts = [[label, output_encoder_to_json(part)] for label, part in zip(encoder.labels, encoder.encoders)]
        return {"outputs": parts, "bos": encode_value(encoder.bos)}
    values = None if encoder.values is None else [encode_value(v) for v in encoder.values]
    return {"values": values, "bos": encode_value(encoder.bos)}


def _single_output(encoder: OutputEncoder | OutputsEncoder) -> OutputEncoder:
    """One program's output encoder (a nested group of outputs is not a file this reads)."""
    if not isinstance(encoder, OutputEncoder):
        raise ValueError("a model file's outputs nest another group of outputs; each output has one encoder")
    return encoder


def output_encoder_from_json(data: dict) -> OutputEncoder | OutputsEncoder:
    if "outputs" in data:
        parts = [(_typed(label, str), _single_output(output_encoder_from_json(part))) for label, part in data["outputs"]]
        return OutputsEncoder(
            labels=tuple(label for label, _ in parts),
            encoders=tuple(part for _, part in parts),
            bos=decode_value(data["bos"]),
        )
    values = data["values"]
    return OutputEncoder(
        values=None if values is None else tuple(decode_value(v) for v in values),
        bos=decode_value(data["bos"]),
    )


def residual_basis_to_json(space: VectorSpaceWithBasis) -> list[list]:
    """Each direction as `[name]` (no value) or `[name, tagged value]`."""
    return [
        [d.name] if d.value is None else [d.name, encode_value(d.value)] for d in space.basis
    ]


def residual_basis_from_json(data: list) -> VectorSpaceWithBasis:
    directions = []
    for entry in data:
        name = _typed(entry[0], str)
        if len(entry) == 1:
            directions.append(BasisDirection(name))
        elif len(entry) == 2:
            directions.append(BasisDirection(name, decode_value(entry[1])))
        else:
            raise ValueError(f"a residual direction has one or two entries, got {entry!r}")
    return VectorSpaceWithBasis(tuple(directions))


def residual_reuse_to_json(reuse: ResidualReuse) -> dict:
    """`width_before`, `peak_alive` and per slot its owners, in order, as
    `[label, index before reuse, first sub-layer written (-1: embedding), clearing sub-layer or null]`."""
    return {
        "width_before": reuse.width_before,
        "peak_alive": reuse.peak_alive,
        "owners": [[[o.label, o.old_index, o.start, o.cleared] for o in owners] for owners in reuse.owners],
    }


def residual_reuse_from_json(data: dict) -> ResidualReuse:
    owners = []
    for slot in data["owners"]:
        if not isinstance(slot, list) or not slot:
            raise ValueError(f"a residual slot needs at least one owner, got {slot!r}")
        owners.append(tuple(
            Owner(_typed(label, str), _typed(index, int), _typed(start, int), None if cleared is None else _typed(cleared, int))
            for label, index, start, cleared in slot
        ))
    return ResidualReuse(
        owners=tuple(owners),
        width_before=_typed(data["width_before"], int),
        width_after=len(owners),
        peak_alive=_typed(data["peak_alive"], int),
    )
