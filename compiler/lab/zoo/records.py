"""One program's records: draw it, evaluate it on sample inputs, compile its variants, describe.

`program_records(config, index)` returns one row (a dict of the `SCHEMA` columns) per variant. A
program that cannot be drawn, compiled or checked still gives its rows, with `status` saying why
and the model columns empty; nothing raises. Statuses:

* `ok` — the record holds the model; for the exact variants (`unoptimised`, `optimised`,
  `reparametrised`) the stored weights, run by `compiler.lab.zoo.weights.forward`, give the
  stored RASP outputs on every stored input. `compressed` and `gd` need not be exact: their
  `compression` column says whether they were on the stored inputs (and, for gd, its accuracy);
  a `compressed` record's claim of exactness comes with its check (`compression.claims`).
* `wrong_claim` — a `compressed` record whose interference bound claims exactness while its
  check (or its stored inputs) finds a wrong output: a defect of the bound, never published as
  exact; like every record that is not `ok` it holds no weights (`error` says where it is wrong,
  `compression` keeps the claim and its check).

A record's `circuit` is the structural circuit of the model it comes from; `circuit_check` is that
circuit and the measured one checked on the record's own weights (`compiler.lab.zoo.verify`):
always for `reparametrised`, `gd` and `layernorm`, for every variant with
`ZooConfig.measure_circuits`.
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

import numpy as np
import pyarrow as pa

from compiler.enums import StrEnum
from compiler.errors import CausalSemanticsWarning, CompilerError
from compiler.fuzzing.differential import sample_inputs
from compiler.lab.zoo import weights as zoo_weights
from compiler.lab.zoo.config import ZooConfig
from compiler.lab.zoo.describe import circuit, graph_json, placements, to_json
from compiler.lab.zoo.sampling import ProgramDraw, SamplingError, draw, rebuild
from compiler.lab.zoo.variants import VariantModel, compile_variants, variant_seed
from compiler.lab.zoo.verify import check_circuit
from compiler.model.agree import same_outputs
from compiler.model.encoders import OutputEncoder
from rasp import rasp


class Status(StrEnum):
    """A record's status (docs/zoo.md): ok, or why the row holds no verified model."""

    OK = "ok"
    REFUSED = "refused"
    UNTESTED = "untested"
    MISMATCH = "mismatch"
    ERROR = "error"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    WRONG_CLAIM = "wrong_claim"


OK, REFUSED, UNTESTED, MISMATCH, ERROR, TIMEOUT, MEMORY, WRONG_CLAIM = Status
# Variants whose circuit is carried over from another model, or read off weights whose norm the
# structural reading leaves out: always checked on their own weights.
CHECKED = ("reparametrised", "gd", "layernorm")

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
    ("circuit_check", pa.string()),
    ("residual_labels", pa.list_(pa.string())),
    ("layers", pa.int32()),
    ("residual_dim", pa.int32()),
    ("d_model", pa.int32()),
    ("compression", pa.string()),
    ("reparametrisation", pa.string()),
    ("weights", pa.binary()),
    ("weights_sha256", pa.string()),
])


def empty_row(index: int, variant: str, status: str, error: str | None, found: ProgramDraw | None = None,
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


def input_ids(built: VariantModel, inputs: list[list]) -> np.ndarray:
    """`[B, T]` token ids of `inputs`: BOS first, PAD after the end of each."""
    encoder = built.model.input_encoder
    return encoder.encode_batch([[encoder.bos, *xs] for xs in inputs])


def run_weights(built: VariantModel, data: bytes, inputs: list[list]) -> list[list]:
    """Decoded outputs of the stored bytes on `inputs` (BOS position dropped)."""
    tensors, metadata = zoo_weights.from_bytes(data)
    out = zoo_weights.forward(tensors, metadata, input_ids(built, inputs))
    encoder = built.model.output_encoder
    assert isinstance(encoder, OutputEncoder)  # a zoo model compiles one program
    return [encoder.decode(out[row])[1 : len(xs) + 1] for row, xs in enumerate(inputs)]


def _model_row(row: dict[str, Any], built: VariantModel, program: rasp.SOp, inputs: list[list],
               outputs: list[list], measure_circuits: bool = False) -> dict[str, Any]:
    model = built.model
    metadata = zoo_weights.forward_metadata(model)
    if built.loop is not None:  # a loop stored untied: which layers are copies of its block
        metadata["loop"] = built.loop
    data = zoo_weights.to_bytes(built.tensors, metadata)
    got = run_weights(built, data, inputs)
    exact = len(got) == len(outputs) and all(map(same_outputs, got, outputs))
    compression = None
    if built.compression is not None:
        compression = to_json({**built.compression, "exact_on_inputs": exact})
    if built.exact and not exact:
        bad = next(i for i, (g, w) in enumerate(zip(got, outputs)) if not same_outputs(g, w))
        row.update(status=MISMATCH, error=f"input {inputs[bad]!r}: weights give {got[bad]!r}, RASP {outputs[bad]!r}")
        return row
    encoder = model.input_encoder
    id_order = sorted(encoder.token_to_id.items(), key=lambda item: item[1])
    output = model.output_encoder
    assert isinstance(output, OutputEncoder)  # a zoo model compiles one program
    values = output.values
    edges = circuit(model)
    check = None
    if measure_circuits or built.variant in CHECKED:
        net = built.stored_network()
        names = {f"{edge['src']} -> {edge['dst']}" for edge in edges}
        check = check_circuit(net, np.array([e.name in names for e in net.edges], bool), input_ids(built, inputs))
    row.update(
        status=OK,
        program_label=program.label,
        token_ids=to_json([token for token, _ in id_order]),
        output_values=None if values is None else to_json(list(values)),
        graph=graph_json(model),
        sops=[p.as_row() for p in placements(model, program)],
        circuit=edges,
        circuit_check=None if check is None else to_json(check),
        # A reparametrised stream is rotated: no direction carries one label.
        residual_labels=None if built.reparametrisation is not None else list(model.residual_labels),
        layers=len(model.config.layers) // 2,
        residual_dim=int(model.config.residual_width),
        d_model=built.d_model,
        compression=compression,
        reparametrisation=None if built.reparametrisation is None else to_json(built.reparametrisation),
        weights=data,
        weights_sha256=zoo_weights.sha256(data),
    )
    claim = built.compression or {}
    if claim.get("bound_claims_exact") and not (claim.get("exact") and exact):
        where = claim["check"]["description"] if not claim.get("exact") else "wrong on a stored input"
        row.update(status=WRONG_CLAIM, error=f"the interference bound claims exactness, but the model is {where}",
                   weights=None, weights_sha256=None)
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
    except Exception as error:
        return [dict(row, error=_describe(error)) for row in rows.values()]
    if not inputs:
        return [dict(row, status=UNTESTED, error="the RASP evaluator rejects every sampled input") for row in rows.values()]
    for row in rows.values():
        row.update(inputs=to_json(inputs), outputs=to_json(outputs))
    built = compile_variants(program, found.vocab, found.max_seq_len, config.variants, config.causal,
                             seed=variant_seed(config.seed, found.index), gd_steps=config.gd_steps)
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
                _model_row(row, result, program, inputs, outputs, config.measure_circuits)
            except MemoryError as error:
                row.update(status=MEMORY, error=_describe(error))
            except Exception as error:
                row.update(status=ERROR, error=_describe(error))
    return [rows[v] for v in config.variants]


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


