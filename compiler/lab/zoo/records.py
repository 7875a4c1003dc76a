"""One program's records: draw it, evaluate it on sample inputs, compile its variants, describe.

`program_records(config, index)` returns one row (a dict of the `SCHEMA` columns) per variant. A
program that cannot be drawn, compiled or checked still gives its rows, with `status` saying why
and the model columns empty; nothing raises. Statuses:

* `ok` — the record holds the model; for `unoptimised` / `optimised` the stored weights,
  run by `compiler.lab.zoo.weights.forward`, give the stored RASP outputs on every stored input.
* `refused` — the compiler refused the program (`CompilerError`: the reason is in `error`).
* `untested` — the RASP evaluator rejects every sampled input (e.g. a categorical Aggregate
  that always selects different values), so there is no ground truth to store.
* `mismatch` — the weights disagree with RASP on a stored input (a compiler bug; reported).
* `error` — anything else that raised (type and message in `error`).
* `timeout`, `memory` — set by the engines (`compiler.lab.zoo.engines`).
"""

from __future__ import annotations

import warnings
from typing import Any

import pyarrow as pa

from compiler.errors import CausalSemanticsWarning, CompilerError
from compiler.fuzzing.differential import same_value, sample_inputs
from compiler.lab.zoo import weights as zoo_weights
from compiler.lab.zoo.config import ZooConfig
from compiler.lab.zoo.describe import circuit, graph_json, placements, to_json
from compiler.lab.zoo.sampling import ProgramDraw, SamplingError, draw, rebuild
from compiler.lab.zoo.variants import VariantModel, compile_variants
from rasp import rasp

OK, REFUSED, UNTESTED, MISMATCH, ERROR, TIMEOUT, MEMORY = (
    "ok", "refused", "untested", "mismatch", "error", "timeout", "memory",
)

_PLACEMENT = pa.struct([
    ("label", pa.string()),
    ("kind", pa.string()),
    ("encoding", pa.string()),
    ("heads", pa.list_(pa.struct([("layer", pa.int32()), ("head", pa.int32())]))),
    ("mlps", pa.list_(pa.int32())),
    ("embedded", pa.bool_()),
    ("absorbed_into", pa.string()),
])

_EDGE = pa.struct([("src", pa.string()), ("dst", pa.string()), ("carries", pa.list_(pa.string()))])

# The columns of every shard, in order (docs/zoo.md describes each).
SCHEMA = pa.schema([
    ("index", pa.int64()),
    ("variant", pa.string()),
    ("status", pa.string()),
    ("error", pa.string()),
    ("origin", pa.string()),
    ("source", pa.string()),
    ("program_label", pa.string()),
    ("vocab", pa.string()),
    ("max_seq_len", pa.int32()),
    ("causal", pa.bool_()),
    ("size", pa.int32()),
    ("depth", pa.int32()),
    ("inputs", pa.string()),
    ("outputs", pa.string()),
    ("token_ids", pa.string()),
    ("output_values", pa.string()),
    ("graph", pa.string()),
    ("sops", pa.list_(_PLACEMENT)),
    ("circuit", pa.list_(_EDGE)),
    ("residual_labels", pa.list_(pa.string())),
    ("layers", pa.int32()),
    ("residual_dim", pa.int32()),
    ("d_model", pa.int32()),
    ("compression", pa.string()),
    ("weights", pa.binary()),
    ("weights_sha256", pa.string()),
])


def empty_row(index: int, variant: str, status: str, error: str, found: ProgramDraw | None = None,
              causal: bool = False) -> dict[str, Any]:
    """A row without a model: every column None but what is known about the program."""
    row: dict[str, Any] = {name: None for name in SCHEMA.names}
    row.update(index=index, variant=variant, status=status, error=error, causal=causal)
    if found is not None:
        row.update(origin=found.origin, source=found.source, vocab=to_json(list(found.vocab)),
                   max_seq_len=found.max_seq_len, size=found.size, depth=found.depth)
    return row


def failure_rows(config: ZooConfig, index: int, status: str, error: str) -> list[dict[str, Any]]:
    """Rows for a program that gave no result at all (timeout, memory, a dead worker)."""
    try:
        found = draw(config, index)
    except SamplingError:
        found = None
    return [empty_row(index, v, status, error, found, config.causal) for v in config.variants]


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())}"[:2000]


def ground_truth(program: rasp.SOp, found: ProgramDraw, config: ZooConfig) -> tuple[list[list], list[list]]:
    """Sample inputs the evaluator accepts and its outputs on them (deterministic per program)."""
    kept, outputs = [], []
    for xs in sample_inputs(found.vocab, found.max_seq_len, config.inputs, seed=found.index):
        try:
            outputs.append(rasp.evaluate(program, xs, causal=config.causal))
        except rasp.RaspEvaluationError:
            continue
        kept.append(xs)
    return kept, outputs


def run_weights(built: VariantModel, data: bytes, inputs: list[list]) -> list[list]:
    """Decoded outputs of the stored bytes on `inputs` (BOS position dropped)."""
    tensors, metadata = zoo_weights.from_bytes(data)
    encoder = built.model.input_encoder
    ids = encoder.encode_batch([[encoder.bos, *xs] for xs in inputs])
    out = zoo_weights.forward(tensors, metadata, ids)
    decode = built.model.output_encoder.decode
    return [decode(out[row])[1 : len(xs) + 1] for row, xs in enumerate(inputs)]


def _agrees(got: list[list], want: list[list]) -> bool:
    return all(len(g) == len(w) and all(same_value(a, b) for a, b in zip(g, w)) for g, w in zip(got, want))


def _model_row(row: dict[str, Any], built: VariantModel, program: rasp.SOp, inputs: list[list],
               outputs: list[list]) -> dict[str, Any]:
    model = built.model
    data = zoo_weights.to_bytes(built.tensors, zoo_weights.forward_metadata(model))
    got = run_weights(built, data, inputs)
    exact = _agrees(got, outputs)
    compression = None
    if built.compression is not None:
        compression = to_json({**built.compression, "exact_on_inputs": exact})
    elif not exact:
        bad = next(i for i, (g, w) in enumerate(zip(got, outputs)) if not _agrees([g], [w]))
        row.update(status=MISMATCH, error=f"input {inputs[bad]!r}: weights give {got[bad]!r}, RASP {outputs[bad]!r}")
        return row
    encoder = model.input_encoder
    id_order = sorted(encoder.token_to_id.items(), key=lambda item: item[1])
    values = model.output_encoder.values
    row.update(
        status=OK,
        program_label=program.label,
        token_ids=to_json([token for token, _ in id_order]),
        output_values=None if values is None else to_json(list(values)),
        graph=graph_json(model),
        sops=[p.as_row() for p in placements(model, program)],
        circuit=circuit(model),
        residual_labels=list(model.residual_labels),
        layers=len(model.config.layers) // 2,
        residual_dim=int(model.config.residual_width),
        d_model=built.d_model,
        compression=compression,
        weights=data,
        weights_sha256=zoo_weights.sha256(data),
    )
    return row


def program_records(config: ZooConfig, index: int) -> list[dict[str, Any]]:
    """The rows of program `index`, one per variant of `config` (see the module docstring)."""
    try:
        found = draw(config, index)
    except SamplingError as error:
        return [empty_row(index, v, ERROR, _describe(error), None, config.causal) for v in config.variants]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalSemanticsWarning)
        return _records(config, found)


def _records(config: ZooConfig, found: ProgramDraw) -> list[dict[str, Any]]:
    rows = {v: empty_row(found.index, v, ERROR, None, found, config.causal) for v in config.variants}
    try:
        program = rebuild(found.source)
        inputs, outputs = ground_truth(program, found, config)
    except Exception as error:  # noqa: BLE001 - a generator bug: recorded, the run goes on
        return [dict(row, error=_describe(error)) for row in rows.values()]
    if not inputs:
        return [dict(row, status=UNTESTED, error="the RASP evaluator rejects every sampled input") for row in rows.values()]
    for row in rows.values():
        row.update(inputs=to_json(inputs), outputs=to_json(outputs))
    built = compile_variants(program, found.vocab, found.max_seq_len, config.variants, config.causal)
    for variant, result in built.items():
        row = rows[variant]
        if isinstance(result, CompilerError):
            row.update(status=REFUSED, error=_describe(result))
        elif isinstance(result, MemoryError):
            row.update(status=MEMORY, error=_describe(result))
        elif isinstance(result, BaseException):
            row.update(error=_describe(result))
        else:
            try:
                _model_row(row, result, program, inputs, outputs)
            except MemoryError as error:
                row.update(status=MEMORY, error=_describe(error))
            except Exception as error:  # noqa: BLE001 - recorded per variant
                row.update(status=ERROR, error=_describe(error))
    return [rows[v] for v in config.variants]


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


