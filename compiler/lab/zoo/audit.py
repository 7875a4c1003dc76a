"""Re-verify a published zoo from its files alone: every `ok` record's weights against RASP.

The generator checks each model before it writes the record; `audit_folder` checks the files a
reader downloads, with nothing but the record's own columns, the way a user without the
compiler's internals would:

1. `weights_sha256` is the SHA-256 of `weights`;
2. the `source` rebuilds a program that `rasp.evaluate` maps every stored input to the stored
   output (the ground truth is RASP's, not the model's);
3. the stored tensors, run by `compiler.lab.zoo.weights.forward` on the inputs encoded with
   `token_ids` and decoded with `output_values`, give those outputs: on every input for the exact
   variants (`unoptimised`, `optimised`, `reparametrised`); for `compressed` and `gd` the
   agreement must be what the record's `compression.exact_on_inputs` claims, and a `compressed`
   record whose interference bound claims exactness on every input (`compression.claims_exact`)
   must be exact on its stored ones.

Records that are not `ok` must hold no weights and say why (`error`). JSON stores the tuples of a
vocabulary (e.g. digit pairs) as lists; the audit turns lists back into tuples before evaluating.

    tracr-compile zoo audit my_zoo
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import warnings
from collections import Counter
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from tqdm import tqdm

from compiler.errors import CausalSemanticsWarning
from compiler.lab.zoo import weights as zoo_weights
from compiler.lab.zoo.records import OK
from compiler.lab.zoo.sampling import rebuild
from compiler.lab.zoo.shards import DATA
from compiler.model.agree import same_outputs
from compiler.model.encoders import OutputEncoder
from rasp import rasp

EXACT = ("unoptimised", "optimised", "reparametrised", "layernorm")
COLUMNS = ["index", "variant", "status", "error", "source", "causal", "inputs", "outputs", "token_ids",
           "output_values", "compression", "weights", "weights_sha256"]


@dataclasses.dataclass(frozen=True)
class AuditReport:
    """What `audit_folder` found: records by variant/status, the `ok` ones checked, failures."""

    records: dict[str, int]
    checked: int
    failures: tuple[str, ...]  # "shard index variant: what is wrong"

    @property
    def passed(self) -> bool:
        return not self.failures


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples they were (RASP values are hashable, so never lists)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _plain(value: Any) -> Any:
    """A RASP value in its JSON form (tuples as lists), to compare with stored outputs."""
    return json.loads(json.dumps(value)) if isinstance(value, tuple) else value


def decode(record: dict[str, Any], inputs: list[list]) -> list[list]:
    """The stored weights' decoded outputs on `inputs`, from the record's columns alone."""
    tensors, metadata = zoo_weights.from_bytes(record["weights"])
    ids_of = {json.dumps(token): i for i, token in enumerate(json.loads(record["token_ids"]))}
    width = 1 + max(len(xs) for xs in inputs)
    ids = np.full((len(inputs), width), metadata["pad_id"], dtype=np.int32)
    ids[:, 0] = metadata["bos_id"]
    for row, xs in enumerate(inputs):
        ids[row, 1 : len(xs) + 1] = [ids_of[json.dumps(x)] for x in xs]
    out = zoo_weights.forward(tensors, metadata, ids)
    if metadata["numerical_output"]:
        return [[float(v) for v in out[row, 1 : len(xs) + 1]] for row, xs in enumerate(inputs)]
    values = tuple(json.loads(record["output_values"]))
    indices = OutputEncoder(values, None).value_indices(out)  # the model's decoder: argmax, -1 for None
    return [[None if i < 0 else values[i] for i in indices[row, 1 : len(xs) + 1].tolist()] for row, xs in enumerate(inputs)]


def audit_record(record: dict[str, Any]) -> str | None:
    """What is wrong with one record, or None (see the module docstring)."""
    if record["status"] != OK:
        if record["weights"] is not None or not record["error"]:
            return f"status {record['status']} but weights stored or no error given"
        return None
    if zoo_weights.sha256(record["weights"]) != record["weights_sha256"]:
        return "weights_sha256 is not the SHA-256 of weights"
    inputs, outputs = json.loads(record["inputs"]), json.loads(record["outputs"])
    if not inputs:
        return "an ok record without inputs"
    program = rebuild(record["source"])
    for xs, want in zip(inputs, outputs):
        got = [_plain(v) for v in rasp.evaluate(program, [_tuples(x) for x in xs], causal=record["causal"])]
        if not same_outputs(got, want):
            return f"RASP gives {got!r} on {xs!r}, the record stores {want!r}"
    decoded = decode(record, inputs)
    agree = [same_outputs(got, want) for got, want in zip(decoded, outputs)]
    if record["variant"] in EXACT:
        if not all(agree):
            bad = agree.index(False)
            return f"the weights give {decoded[bad]!r} on {inputs[bad]!r}, RASP {outputs[bad]!r}"
    elif record["compression"] is not None:
        compression = json.loads(record["compression"])
        claimed = compression["exact_on_inputs"]
        if claimed != all(agree):
            return f"compression.exact_on_inputs says {claimed}, the weights agree on {sum(agree)}/{len(agree)} inputs"
        if compression.get("claims_exact") and not all(agree):
            bad = agree.index(False)
            return (f"compression.claims_exact (the interference bound and its check) is true, but the weights give "
                    f"{decoded[bad]!r} on {inputs[bad]!r}, RASP {outputs[bad]!r}")
        if compression.get("claims_exact") and (compression.get("check", {}).get("wrong") != 0
                                                 or not compression.get("bound_claims_exact")):
            return "compression.claims_exact is true without the bound's proof and a check that found no wrong input"
    else:
        return f"an ok {record['variant']} record without its compression column (what was done and whether it is exact)"
    return None


def audit_folder(folder: str | pathlib.Path, progress: bool = True) -> AuditReport:
    """Audit every record of every shard in a zoo folder.

    Args:
      folder: a zoo folder (`zoo.json` and `data/*.parquet`).
      progress: show a tqdm bar over records.
    Returns:
      An `AuditReport`; `passed` is true when no record failed.
    Raises:
      FileNotFoundError: the folder has no shards.
    """
    shards = sorted((pathlib.Path(folder) / DATA).glob("train-*.parquet"))
    if not shards:
        raise FileNotFoundError(f"{folder} holds no shards ({DATA}/train-*.parquet); is it a zoo folder?")
    counts: Counter = Counter()
    failures = []
    checked = 0
    total = sum(pq.ParquetFile(path).metadata.num_rows for path in shards)
    with tqdm(total=total, unit="record", disable=not progress, desc="audit") as bar, warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalSemanticsWarning)
        for path in shards:
            for record in pq.read_table(path, columns=COLUMNS).to_pylist():
                counts[f"{record['variant']}/{record['status']}"] += 1
                try:
                    problem = audit_record(record)
                except Exception as error:
                    problem = f"{type(error).__name__}: {error}"
                checked += record["status"] == OK
                if problem is not None:
                    failures.append(f"{path.name} program {record['index']} {record['variant']}: {problem}")
                bar.update(1)
    return AuditReport(dict(sorted(counts.items())), checked, tuple(failures))
