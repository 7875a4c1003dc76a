"""The zoo's reparametrised, GD and layernorm variants: same function (or a stated accuracy), other
weights, and the carried-over circuit checked on the variant's own weights."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pyarrow", reason="the zoo extra (pyarrow) is not installed")

from compiler import compile_rasp
from compiler.lab.circuits.components import network
from compiler.lab.circuits.variants import reparametrise
from compiler.lab.zoo import weights as zoo_weights
from compiler.lab.zoo.config import ZooConfig
from compiler.lab.zoo.records import OK, program_records, run_weights
from compiler.lab.zoo.sampling import rebuild
from compiler.lab.zoo.variants import compile_variants
from compiler.lab.zoo.verify import check_circuit
from compiler.model.agree import same_value
from compiler.model.dense import dense_tensors
from rasp import rasp

# Small random programs (the first two compile).
CONFIG = ZooConfig(programs=2, seed=3, sizes=(3, 5), library_share=0.0, inputs=6,
                   variants=("optimised", "reparametrised"))


def compiled_pairs(config: ZooConfig) -> list[tuple[dict, dict]]:
    """(optimised, reparametrised) rows of the programs that compile."""
    found = []
    for index in range(config.programs):
        optimised, reparametrised = program_records(config, index)
        if optimised["status"] == OK:
            found.append((optimised, reparametrised))
    assert len(found) >= 2
    return found


@pytest.fixture(scope="module")
def pairs() -> list[tuple[dict, dict]]:
    return compiled_pairs(CONFIG)


def test_reparametrised_records_compute_the_program_with_other_weights(pairs):
    for optimised, changed in pairs:
        assert changed["status"] == OK, changed["error"]  # the stored bytes reproduce RASP on the inputs
        exact, _ = zoo_weights.from_bytes(optimised["weights"])
        tensors, _ = zoo_weights.from_bytes(changed["weights"])
        token = "compiled_transformer/embed/token"
        assert tensors[token].shape == exact[token].shape
        assert not np.allclose(tensors[token], exact[token], atol=1e-3)  # the basis is rotated
        assert changed["residual_labels"] is None and optimised["residual_labels"]
        info = json.loads(changed["reparametrisation"])
        assert isinstance(info["seed"], int) and info["changes"]


def test_reparametrised_circuit_is_carried_and_holds_on_the_new_weights(pairs):
    """Same circuit as the optimised model, re-verified on the reparametrised weights: sufficient
    under every ablation, and the circuit measured on them lies inside it."""
    for optimised, changed in pairs:
        assert changed["circuit"] == optimised["circuit"] and optimised["circuit_check"] is None
        check = json.loads(changed["circuit_check"])
        assert check["inputs"] == len(json.loads(changed["inputs"])) and check["scored_outputs"] > 0
        assert set(check["ablations"]) == {"zero", "mean", "resample"}
        for ablation, found in check["ablations"].items():
            assert found["circuit_sufficient"] and found["circuit_outside_changes"] == 0, ablation
            assert found["measured_sufficient"] and not found["measured_outside_circuit"], ablation
        assert check["ablations"]["zero"]["measured"]  # (resample on 6 inputs can change nothing)


@pytest.mark.slow
def test_measured_circuits_of_exact_records():
    """With `measure_circuits` the exact variant is checked too: its structural circuit is
    sufficient on its own weights under every ablation and contains the measured one."""
    config = ZooConfig(**{**CONFIG.__dict__, "programs": 4, "measure_circuits": True})
    for optimised, _ in compiled_pairs(config):
        check = json.loads(optimised["circuit_check"])
        for ablation, found in check["ablations"].items():
            assert found["circuit_sufficient"] and not found["measured_outside_circuit"], ablation


def test_reparametrised_records_rebuild_to_their_bytes(pairs):
    """The record's source, vocabulary and seed give its weights again, byte for byte."""
    for _, changed in pairs:
        seed = json.loads(changed["reparametrisation"])["seed"]
        built = compile_variants(rebuild(changed["source"]), tuple(json.loads(changed["vocab"])), changed["max_seq_len"],
                                 ("reparametrised",), seed=seed)["reparametrised"]
        assert zoo_weights.to_bytes(built.tensors, zoo_weights.forward_metadata(built.model)) == changed["weights"]
        got = run_weights(built, changed["weights"], json.loads(changed["inputs"]))
        assert all(same_value(g, w) for a, b in zip(got, json.loads(changed["outputs"])) for g, w in zip(a, b))


def test_network_tensors_are_the_model_and_its_reparametrisation():
    """`network_tensors` writes a network back under the record's names: the exact network gives
    the dense weights' outputs, a reparametrised one the same outputs up to float rounding."""
    program = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.LEQ),
                                            rasp.numerical(rasp.Map(lambda x: 1 if x == 2 else 0, rasp.tokens)),
                                            default=0))
    model = compile_rasp(rasp.Map(lambda x: round(x * 4), program), {0, 1, 2, 3}, 4)
    encoder = model.input_encoder
    ids = encoder.encode_batch([[encoder.bos, 2, 0, 2, 1], [encoder.bos, 3, 2]])
    metadata = zoo_weights.forward_metadata(model)
    want = zoo_weights.forward(dense_tensors(model), metadata, ids)
    np.testing.assert_array_equal(zoo_weights.forward(zoo_weights.network_tensors(network(model)), metadata, ids), want)
    changed = zoo_weights.network_tensors(reparametrise(network(model), seed=1))
    np.testing.assert_allclose(zoo_weights.forward(changed, metadata, ids), want, atol=1e-3)


def test_layernorm_records_state_their_norm_and_check_their_circuit():
    """The `layernorm` variant: compiled with a LayerNorm before every sub-layer, the norm in the
    weights' metadata, the stored bytes decoding to RASP's outputs, and its structural circuit
    checked through the norm under every ablation."""
    config = ZooConfig(**{**CONFIG.__dict__, "variants": ("optimised", "layernorm")})
    checked = 0
    for index in range(config.programs):
        optimised, normed = program_records(config, index)
        if optimised["status"] != OK:
            continue
        assert normed["status"] == OK, normed["error"]
        tensors, metadata = zoo_weights.from_bytes(normed["weights"])
        assert metadata["norm"]["kind"] == "layernorm" and metadata["norm"]["spread"] <= 1e-5
        assert normed["d_model"] > optimised["d_model"]  # the anchor and the norm's coordinates
        # Each norm divides by its gain within `spread`, and every reader ignores the stream's
        # mean: run without the norm, the stored tensors give the same outputs within 1e-4.
        ids = np.asarray([[metadata["bos_id"], *range(min(3, normed["max_seq_len"]))]], np.int32)
        plain = {key: value for key, value in metadata.items() if key != "norm"}
        np.testing.assert_allclose(zoo_weights.forward(tensors, plain, ids), zoo_weights.forward(tensors, metadata, ids),
                                   rtol=1e-4, atol=1e-4)
        check = json.loads(normed["circuit_check"])
        assert set(check["ablations"]) == {"zero", "mean", "resample"}
        for ablation, found in check["ablations"].items():
            assert found["circuit_sufficient"] and found["circuit_outside_changes"] == 0, ablation
        checked += 1
    assert checked >= 2


def test_check_circuit_rejects_a_mask_of_the_wrong_length():
    model = compile_rasp(rasp.Map(lambda x: x + 1, rasp.tokens), {0, 1}, 2)
    with pytest.raises(ValueError, match="edges"):
        check_circuit(network(model), np.ones(1, bool), np.zeros((2, 3), np.int32))


@pytest.mark.slow
def test_gd_records_state_their_accuracy_and_check_their_circuit():
    """The GD variant: a learned projection folded into the weights, its measured accuracy over
    the input space in the record, its circuit (the optimised model's) checked on its weights."""
    config = ZooConfig(programs=1, seed=3, sizes=(2, 3), library_share=0.0, inputs=4, variants=("optimised", "gd"),
                       gd_steps=20, vocab_sizes=(3, 3), max_seq_lens=(3, 3))
    index = next(i for i in range(20) if program_records(ZooConfig(**{**config.__dict__, "variants": ("optimised",),
                                                                      "programs": 20}), i)[0]["status"] == OK)
    optimised, learned = program_records(ZooConfig(**{**config.__dict__, "programs": index + 1}), index)
    assert learned["status"] == OK, learned["error"]
    info = json.loads(learned["compression"])
    assert info["method"] == "gd" and 0.0 <= info["sequence_accuracy"] <= 1.0
    assert info["exact_on_input_space"] == (info["sequence_accuracy"] == 1.0)
    assert isinstance(info["exact_on_inputs"], bool) and info["steps_budget"] == 20
    tensors, metadata = zoo_weights.from_bytes(learned["weights"])
    w = tensors[zoo_weights.PROJECTION]
    assert w.shape == (learned["residual_dim"], learned["d_model"]) == (learned["residual_dim"], info["d"])
    assert learned["circuit"] == optimised["circuit"]
    check = json.loads(learned["circuit_check"])
    assert set(check["ablations"]) == {"zero", "mean", "resample"}
    # The stored bytes are what the record's check ran on: exact on the inputs iff they decode to RASP.
    program = rebuild(learned["source"])
    built = compile_variants(program, tuple(json.loads(learned["vocab"])), learned["max_seq_len"], ("gd",),
                             seed=json.loads(learned["compression"])["seed"], gd_steps=20)["gd"]
    assert zoo_weights.to_bytes(built.tensors, zoo_weights.forward_metadata(built.model)) == learned["weights"]
    got = run_weights(built, learned["weights"], json.loads(learned["inputs"]))
    want = json.loads(learned["outputs"])
    agrees = all(len(g) == len(w) and all(same_value(a, b) for a, b in zip(g, w)) for g, w in zip(got, want))
    assert agrees == info["exact_on_inputs"]


def test_library_programs_the_compiler_rewrites_are_described():
    """A library program with an expression type the compiler rewrites before tracing (found by
    the 10,000-program run: `nesting_depth` uses a SumAggregate) gets `ok` records, its s-ops
    described by the node they became."""
    config = ZooConfig(programs=1, library_share=1.0, library=("nesting_depth",), variants=("optimised",), inputs=4)
    row = program_records(config, 0)[0]
    assert row["status"] == OK, row["error"]
    assert {sop["label"]: sop["kind"] for sop in row["sops"]}[row["program_label"]]
