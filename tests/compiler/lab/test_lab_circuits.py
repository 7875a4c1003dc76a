"""Ground-truth circuits: hand-checked examples, verification on library programs, scoring,
variants that keep outputs, the record's JSON, and the repair of a redundant circuit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from compiler import compile_rasp
from compiler.errors import LabError
from compiler.examples import EXAMPLES
from compiler.lab.circuits.ablation import InputDistribution
from compiler.lab.circuits.components import Component, MLPLayer, Network, Port, network
from compiler.lab.circuits.measure import measure_circuit, setup
from compiler.lab.circuits.methods import SCORE_FLOOR, SHARP, eap_ig_scores, eap_scores, edge_patching_scores, floored
from compiler.lab.circuits.patching import forward, source_outputs
from compiler.lab.circuits.pipeline import measured
from compiler.lab.circuits.record import CircuitRecord
from compiler.lab.circuits.scoring import score
from compiler.lab.circuits.variants import keeps_outputs, make_variant
from compiler.model.norm import ANCHOR, COUNTER

DIST = InputDistribution(48, seed=1)
L0H0, L2H0 = "layer 0 attn head 0", "layer 2 attn head 0"


def _example(name: str, max_seq_len: int = 5):
    example = EXAMPLES[name]
    program = example.build(max_seq_len)
    return program, example.vocab, compile_rasp(program, set(example.vocab), max_seq_len)


@pytest.fixture(scope="module")
def frac_prevs():
    return _example("frac_prevs")


@pytest.fixture(scope="module")
def reverse():
    return _example("reverse")


@pytest.fixture(scope="module")
def reverse_records(reverse):
    return _circuits(*reverse)


def _circuits(program, vocab, model, variant="a"):
    built = make_variant(variant, program, vocab, model.config.max_seq_len, model=model)
    return {m.record.ablation: m.record for m in measured(built, program, DIST)}


def test_frac_prevs_circuit_by_hand(frac_prevs):
    # One head: the query and key read positions (select k <= q), the value reads the token
    # (is_x folded into W_OV), the head writes frac_prevs, which the unembedding reads.
    # Positions are the same in every input, so mean and resample ablation cannot remove them.
    records = _circuits(*frac_prevs)
    assert set(records["zero"].edge_names()) == {
        f"embed positions -> {L0H0}.q", f"embed positions -> {L0H0}.k", f"embed tokens -> {L0H0}.v",
        f"{L0H0} -> unembed.in"}
    for ablation in ("mean", "resample"):
        assert set(records[ablation].edge_names()) == {f"embed tokens -> {L0H0}.v", f"{L0H0} -> unembed.in"}
    # The query's `one` and the key's BOS direction are read, but never decide an output.
    assert records["zero"].difference()["structural_only"] == (f"embed tokens -> {L0H0}.q", f"embed tokens -> {L0H0}.k")
    assert all(r.verification.verified and r.verification.minimal for r in records.values())


def test_reverse_circuit_by_hand(reverse_records):
    # layer 0: a head and an MLP compute length; layer 1 MLP: opp_idx = length - index - 1;
    # layer 2 head: query opp_idx, key index, value token. Zero ablation also needs the `one`
    # direction (MLP biases) and the BOS token the length head's value reads.
    records = reverse_records
    assert set(records["zero"].edge_names()) == {
        f"embed tokens -> {L0H0}.v", "embed tokens -> layer 0 mlp.in", f"{L0H0} -> layer 0 mlp.in",
        "embed tokens -> layer 1 mlp.in", "embed positions -> layer 1 mlp.in", "layer 0 mlp -> layer 1 mlp.in",
        f"layer 1 mlp -> {L2H0}.q", f"embed positions -> {L2H0}.k", f"embed tokens -> {L2H0}.v",
        f"{L2H0} -> unembed.in"}
    # Mean ablation keeps what is constant per position (one, BOS, the index): only the path
    # that carries the length and the token remains.
    assert set(records["mean"].edge_names()) == {
        f"{L0H0} -> layer 0 mlp.in", "layer 0 mlp -> layer 1 mlp.in", f"layer 1 mlp -> {L2H0}.q",
        f"embed tokens -> {L2H0}.v", f"{L2H0} -> unembed.in"}
    # Resampling from an input of the same length keeps the length: only the copied token matters.
    assert set(records["resample"].edge_names()) == {f"embed tokens -> {L2H0}.v", f"{L2H0} -> unembed.in"}
    assert all(r.verification.verified for r in records.values())


FAST = ("hist",)  # slow too: the default run checks frac_prevs and reverse above


@pytest.mark.parametrize("name", [n for n in EXAMPLES if n not in FAST])
@pytest.mark.slow
def test_every_library_circuit_is_sufficient_and_necessary(name):
    _check_library(name)


@pytest.mark.parametrize("name", FAST)
@pytest.mark.slow
def test_library_circuits_are_sufficient_and_necessary(name):
    _check_library(name)


def _check_library(name):
    example = EXAMPLES[name]
    max_seq_len = min(example.max_seq_len, 5)
    program, vocab, model = _example(name, max_seq_len)
    unique = name == "sort_unique"
    built = make_variant("a", program, vocab, max_seq_len, model=model)
    for m in measured(built, program, InputDistribution(48, seed=2, unique_tokens=unique)):
        assert m.record.verification.sufficient, (name, m.record.ablation, m.record.verification)
        assert m.record.verification.necessary, (name, m.record.ablation)
        assert any(m.record.circuit)


def test_patching_with_nothing_ablated_is_the_model(frac_prevs):
    for _, _, model in (frac_prevs,):
        net = network(model)
        ids = DIST.ids(model)
        outs = source_outputs(net, jnp.asarray(ids))
        keep = jnp.ones((len(net.ports), len(net.sources), ids.shape[1]))
        got = np.asarray(forward(net, keep, jnp.asarray(ids), jnp.zeros_like(outs)))
        want = np.asarray(model.run(ids).output).reshape(got.shape)
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_scoring_gives_one_for_the_truth_and_about_a_half_for_random(reverse_records):
    record = reverse_records["zero"]
    truth = record.truth()
    assert score(truth.astype(float), truth).roc_auc == 1.0
    assert score(truth.astype(float), truth).average_precision == 1.0
    assert score(truth.astype(float), truth).best_f1 == 1.0
    rng = np.random.default_rng(0)
    aucs = [score(rng.random(truth.size), truth).roc_auc for _ in range(200)]
    assert abs(np.mean(aucs) - 0.5) < 0.03
    with pytest.raises(ValueError, match="one score per edge"):
        score(np.zeros(3), truth)


@pytest.mark.slow
def test_edge_patching_recovers_the_exact_circuit_and_eap_scores_every_edge(reverse):
    program, vocab, model = reverse
    s = setup(network(model), DIST.ids(model), "zero")
    truth = measure_circuit(s).circuit
    assert score(edge_patching_scores(s), truth).roc_auc == 1.0
    eap = eap_scores(s)
    assert eap.shape == truth.shape and np.all(np.isfinite(eap))


def _fuzz_program_0():
    """The fuzz generator's program 0 (`generate(0, 3, (1, 2, 3), 4)` before the generator grew
    its lookup chains), stored so that changes to the generator leave this test's program as it
    was: `max(((indices < shift_by(2, indices)) + 2) % 3, tokens)`."""
    from compiler.fuzzing.program_spec import Op, ProgramSpec

    return ProgramSpec((
        Op("tokens"), Op("indices"), Op("shift", (1,), (2,)), Op("full", (), (2,)),
        Op("seqmap", (1, 2), ("lambda x, y: x < y",)),
        Op("seqmap", (4, 3), ("lambda x, y: (x + y) % 3",)),
        Op("seqmap", (5, 0), ("lambda x, y: max(x, y)",)),
    ))


def test_sharpened_divergence_ranks_the_zero_ablation_circuit_perfectly():
    """Random program 0: zero-ablating the tokens' edge into MLP 1 turns logits [1, 0] into
    [4, 1] (same answer, sharper softmax), a larger KL at inverse temperature 1 than the
    circuit edges that flip 40 outputs to "none" ([1, 0] -> [0, 0]). At SHARP the ranking is exact."""
    from compiler.fuzzing.program_spec import build

    program = build(_fuzz_program_0()).named("fuzz0")
    model = compile_rasp(program, {1, 2, 3}, 4)
    s = setup(network(model), InputDistribution(48, seed=0).ids(model), "zero")
    truth = measure_circuit(s).circuit
    assert score(edge_patching_scores(s), truth).roc_auc < 0.95
    assert score(edge_patching_scores(s, sharpness=SHARP), truth).roc_auc == 1.0


@pytest.mark.parametrize("variant", ["e", pytest.param("b", marks=pytest.mark.slow), pytest.param("b+e", marks=pytest.mark.slow),
                                     pytest.param("d", marks=pytest.mark.slow), pytest.param("d+e", marks=pytest.mark.slow),
                                     pytest.param("f", marks=pytest.mark.slow), pytest.param("f+e", marks=pytest.mark.slow),
                                     pytest.param("g", marks=pytest.mark.slow), pytest.param("g@0.5+e", marks=pytest.mark.slow),
                                     "h+e", pytest.param("h", marks=pytest.mark.slow), pytest.param("d+h", marks=pytest.mark.slow),
                                     pytest.param("h+f", marks=pytest.mark.slow), pytest.param("h+g", marks=pytest.mark.slow)])
def test_variants_keep_the_outputs(variant, frac_prevs):
    unique = variant.startswith("d")
    program, vocab, model = _example("sort_unique") if unique else frac_prevs
    built = make_variant(variant, program, vocab, model.config.max_seq_len, model=model, unique_tokens=unique)
    tokens = InputDistribution(48, seed=3, unique_tokens=unique).tokens(tuple(sorted(vocab, key=repr)), model.config.max_seq_len)
    assert keeps_outputs(built, program, tokens) == 1.0
    records = {m.record.ablation: m.record for m in measured(built, program, InputDistribution(32, unique_tokens=unique))}
    assert all(r.verification.verified for r in records.values())


def test_a_layernorm_model_has_the_circuits_of_the_plain_one(reverse, reverse_records):
    """Variant h compiles with a LayerNorm before every sub-layer; its network reads every port
    through the norm, so an ablation also moves what the others are divided by. On reverse the
    verified circuit per ablation is the plain model's, edge for edge; h refuses compression."""
    program, vocab, model = reverse
    normed = make_variant("h", program, vocab, model.config.max_seq_len, model=model)
    assert normed.model.config.norm is not None and normed.net.norm == normed.model.config.norm
    records = {m.record.ablation: m.record for m in measured(normed, program, DIST)}
    for ablation, record in reverse_records.items():
        assert records[ablation].verification.verified
        assert records[ablation].edge_names() == record.edge_names()
    with pytest.raises(LabError, match="compression refuses normalised"):
        make_variant("h+b", program, vocab, model.config.max_seq_len)


def test_a_reparametrised_layernorm_model_keeps_its_anchor_in_place():
    """h+e rotates the residual basis but keeps the all-ones vector and the anchor coordinates:
    rotated with the rest, the anchor's magnitude cancelled in every float32 read and sort_freq
    kept 0.78 of its outputs; kept in place, it keeps all of them."""
    program, vocab, _ = _example("sort_freq")
    built = make_variant("h+e", program, vocab, 5)
    labels = built.model.residual_labels
    anchors = [labels.index(ANCHOR), labels.index(COUNTER)]
    exact = network(built.model)
    np.testing.assert_allclose(built.net.tok_embed[:, anchors], exact.tok_embed[:, anchors], rtol=1e-6)
    assert not np.allclose(built.net.tok_embed, exact.tok_embed, atol=1e-3)  # the rest is rotated
    tokens = InputDistribution(48, seed=3).tokens(tuple(sorted(vocab, key=repr)), 5)
    assert keeps_outputs(built, program, tokens) == 1.0


def test_distributed_heads_split_every_head(reverse):
    """Variant f's copies (their outputs and circuits: test_variants_keep_the_outputs[f])."""
    from compiler.lab.circuits.variants import COPIES, distribute_heads

    program, vocab, model = reverse
    built = make_variant("f", program, vocab, 5, model=model)
    exact = network(model)
    heads = [c.name for c in exact.sources if c.kind == "head"]
    assert [c.name for c in built.net.sources if c.kind == "head"] == [f"{h} copy {j}" for h in heads for j in range(COPIES)]
    assert len(built.exact_net.edges) == len(built.net.edges) > len(exact.edges)
    first = built.net.layers[0]
    np.testing.assert_allclose(first.w_o.sum(axis=0), exact.layers[0].w_o[0], atol=1e-6)  # the shares sum to the head
    with pytest.raises(ValueError, match="positive, each row summing to 1"):
        distribute_heads(exact, shares=np.full((len(heads), 2), 0.6))


def test_decision_margin_is_half_the_smallest_gap_to_a_decision():
    from compiler.lab.circuits.variants import decision_margin

    net = Network((), (), np.zeros((1, 1)), np.zeros((1, 1)), (), np.zeros((1, 2)), slice(0, 2), False, 0.5, 0, 1, False)
    logits = np.array([[[1.0, 0.0], [0.9, 0.2]]])  # [B, T, n]; the second position: 0.4 above the threshold
    assert decision_margin(net, logits, np.array([[True, True]])) == pytest.approx(0.35)
    assert decision_margin(net.replace_weights(empty_threshold=None), logits, np.array([[True, True]])) == pytest.approx(0.35)
    assert decision_margin(net.replace_weights(empty_threshold=None), logits, np.array([[True, False]])) == pytest.approx(0.5)


def _parity_loop(max_seq_len: int = 3):
    from compiler.examples import LOOP_EXAMPLES

    example = LOOP_EXAMPLES["parity_loop"]
    program = example.build(max_seq_len)
    return program, example.vocab, compile_rasp(program, set(example.vocab), max_seq_len)


def test_loop_models_are_read_unrolled():
    """A compiled rasp.Loop runs its tied block once per iteration: the circuit tools see every
    iteration as components of its own (the unrolled model, as the export writes it)."""
    from compiler.model.tying import untied

    program, vocab, model = _parity_loop()
    assert model.config.tied is not None
    net, flat = network(model), network(untied(model))
    assert net.edges == flat.edges and len(net.layers) == len(untied(model).config.layers) - 1  # block 0 has no head
    with pytest.raises(ValueError, match="rasp.Loop .* compiles only alone"):
        make_variant("d", program, vocab, 3)


@pytest.mark.slow
def test_loop_circuit_is_verified():
    program, vocab, model = _parity_loop(4)
    built = make_variant("a", program, vocab, 4, model=model)
    assert keeps_outputs(built, program, InputDistribution(32).tokens(tuple(vocab), 4)) == 1.0
    records = [m.record for m in measured(built, program, InputDistribution(32))]
    assert all(r.verification.verified for r in records)
    # Every iteration's head is in the zero-ablation circuit (the parity so far flows through each).
    heads = {e.split(" -> ")[1].rsplit(".", 1)[0] for e in records[0].edge_names() if "attn head" in e.split(" -> ")[1]}
    assert heads == {f"layer {b} attn head 0" for b in (1, 2, 3)}


@pytest.mark.slow
def test_reparametrised_circuit_equals_the_exact_one(frac_prevs):
    exact = _circuits(*frac_prevs)
    rotated = _circuits(*frac_prevs, variant="e")
    for ablation, record in exact.items():
        assert rotated[ablation].circuit == record.circuit


@pytest.mark.slow
def test_gd_variant_states_its_accuracy(frac_prevs):
    program, vocab, model = frac_prevs
    built = make_variant("c", program, vocab, 5, model=model, gd_steps=300)
    tokens = DIST.tokens(tuple(sorted(vocab, key=repr)), 5)
    assert 0.0 <= built.accuracy <= 1.0
    assert keeps_outputs(built, program, tokens) >= 0.0


def test_record_round_trips_through_json(frac_prevs, tmp_path):
    record = _circuits(*frac_prevs)["zero"]
    path = record.save(tmp_path / "circuit.json")
    loaded = CircuitRecord.load(path)
    assert loaded == record
    hooks = loaded.hook_truth()
    assert hooks[("hook_pos_embed", None, "blocks.0.attn.hook_q", 0)]
    assert not hooks[("hook_embed", None, "blocks.0.attn.hook_q", 0)]
    assert loaded.auto_circuit_truth()["Resid Start->A0.0.Q"]  # either embedding counts
    assert loaded.auto_circuit_truth()["A0.0->Resid End"]


def test_redundant_paths_are_repaired_into_a_minimal_sufficient_circuit():
    # Residual [is_x, flag, one]; two MLPs each add 1 to `flag` when the token is x; the output
    # is "x" when flag (logit) beats 0.5 * one. Either MLP alone decides it, so no single edge
    # of theirs changes an output and the single-edge circuit is not sufficient.
    tok = np.array([[0, 0, 1], [1, 0, 1], [0, 0, 1], [0, 0, 0]], np.float32)  # a, x, BOS, PAD
    mlp = MLPLayer(np.array([[1.0], [0.0], [0.0]], np.float32), np.array([[0.0, 1.0, 0.0]], np.float32), "relu")
    sources = (Component("embed tokens", "embed"), Component("embed positions", "embed"),
               Component("layer 0 mlp", "mlp"), Component("layer 1 mlp", "mlp"))
    ports = tuple(Port(name, "in", "", None, "") for name in ("layer 0 mlp", "layer 1 mlp", "unembed"))
    net = Network(sources, ports, tok, np.zeros((4, 3), np.float32), (mlp, mlp),
                  np.array([[0, 0], [1, 0], [0, 0.5]], np.float32), slice(0, 2), False, 0.5, 2, 3, False)
    ids = np.array([[2, 1, 0], [2, 0, 1], [2, 1, 1], [2, 0, 0]], np.int32)
    found = measure_circuit(setup(net, ids, "zero"))
    assert found.single_outside_changes > 0
    assert found.sufficient and found.minimal and found.verified
    assert "greedy repair" in found.how_found
    names = {e.name for e, on in zip(net.edges, found.circuit) if on}
    paths = [{f"embed tokens -> layer {i} mlp.in", f"layer {i} mlp -> unembed.in"} for i in (0, 1)]
    assert "embed tokens -> unembed.in" in names and any(p <= names for p in paths)


def test_cli_writes_the_record_and_the_picture(tmp_path, capsys):
    from compiler.cli import main

    out = tmp_path / "fp"
    assert main(["circuit", "--example", "frac_prevs", "--ablation", "mean", "--inputs", "32", "--out", str(out)]) == 0
    record = CircuitRecord.load(f"{out}.json")
    assert record.ablation == "mean" and record.verification.verified
    assert (tmp_path / "fp.png").read_bytes()[:4] == b"\x89PNG"
    assert "2 of 9 edges" in capsys.readouterr().out
    assert main(["circuit", "--example", "frac_prevs", "--ablation", "half", "--out", str(out)]) == 2
    assert "unknown ablation 'half'" in capsys.readouterr().err


def test_variant_width_fraction_is_parsed_and_checked():
    from compiler.lab.circuits.variants import interference_level, parse, squeeze

    assert parse("c@0.6") == ("c",) and squeeze("c@0.6") == 0.6
    assert parse("b@0.5+e") == ("b", "e") and squeeze("b+e") == 1.0
    assert parse("g@0.5+e") == ("g", "e") and interference_level("g@0.5+e") == 0.5 and interference_level("g") == 0.9
    for bad in ("e@0.5", "c@1.5", "c@0", "b@x", "b@0.5+c@0.5", "g@0", "g@-1"):
        with pytest.raises(ValueError, match="variant"):
            parse(bad)


def test_numerical_tolerance_merges_float_twins():
    from compiler.lab.circuits.components import half_smallest_gap

    assert half_smallest_gap([0.3, 0.1 + 0.2, 0.5, 1]) == pytest.approx(0.1)
    assert half_smallest_gap([2]) == 0.5 and half_smallest_gap(["a", 1, 3]) == 1.0


def _circuits_extra() -> str | None:
    """Why auto-circuit cannot run here (None when it can), read from the installed versions
    without importing torch or TransformerLens, so the default run pays nothing for the skip."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        tl, _ = version("transformer-lens"), version("auto-circuit")
    except PackageNotFoundError as error:
        return f"the circuits extra is not installed ({error.name} missing)"
    if int(tl.split(".")[0]) >= 4:
        return f"TransformerLens {tl} (the export extra) has no HookedTransformer, which auto-circuit imports"
    return None


@pytest.mark.skipif(_circuits_extra() is not None, reason=str(_circuits_extra()))
def test_auto_circuit_scores_the_export():
    """Where the `circuits` extra is installed (auto-circuit next to TransformerLens 3.x):
    auto-circuit's EAP runs on the exported model, names every edge of the record the way the
    record does, and gives each a finite score."""
    from compiler.lab.circuits.auto_circuit_bridge import run_eap, scores_by_edge

    program, vocab, model = _example("frac_prevs")
    ids = InputDistribution(8, min_length=5).ids(model)
    record = _circuits(program, vocab, model)["resample"]
    by_name = run_eap(model, ids, model.output_encoder.width)
    assert {edge.auto_circuit for edge in record.edges} <= set(by_name)
    scores = scores_by_edge(record, by_name)
    assert scores.shape == (len(record.edges),) and np.all(np.isfinite(scores)) and scores.max() > 0


def test_scores_at_float_rounding_level_count_as_zero():
    """Scores below SCORE_FLOOR of the largest (float32 rounding of an exactly-zero effect)
    become 0, so they tie; the rest keep their values. Where every score is rounding, the unit
    (a whole change of the output) sets the floor; negative divergences are rounding too."""
    raw = np.asarray([15.9, 2.37, 9.5e-6, 4.8e-7, 0.0, 15.9 * SCORE_FLOOR])
    np.testing.assert_array_equal(floored(raw), [15.9, 2.37, 0.0, 0.0, 0.0, 15.9 * SCORE_FLOOR])
    np.testing.assert_array_equal(floored(raw, unit=1000.0), [15.9, 2.37, 0.0, 0.0, 0.0, 0.0])
    noise = np.asarray([4.05e-9, 1.7e-9, -3e-10, 0.0])
    np.testing.assert_array_equal(floored(noise), [4.05e-9, 1.7e-9, 0.0, 0.0])
    np.testing.assert_array_equal(floored(noise, unit=1.0), np.zeros(4))
    assert floored(np.zeros(0)).size == 0


def test_integrated_gradients_score_a_numerical_mlp_the_same_in_any_basis():
    """pair_balance 5 under mean and resample ablation (48 inputs): EAP reads the gradient at the
    clean run, where the numerical MLP's hidden units sit on their ReLU kinks, and ranks the
    circuit differently in variants a and e (AUROC 0.900 against 0.800 and 0.700 when
    measured); integrated gradients read it between the ends of the path and rank the circuit
    perfectly in both bases, also under resample ablation, where the summed output EAP
    differentiates cancels. Their scores agree to 1e-3 of the largest under mean ablation (1e-6
    measured) and to 2e-2 under resample ablation (9e-3 measured: a unit whose pre-activation
    stays on its kink all along the path keeps a rounding-decided gradient)."""
    example = EXAMPLES["pair_balance"]
    program = example.build(5)
    found = {}
    for variant in "ae":
        built = make_variant(variant, program, tuple(example.vocab), 5, seed=0)
        for m in measured(built, program, InputDistribution(48, 0), ("mean", "resample")):
            found[variant, m.record.ablation] = (eap_scores(m.setup), eap_ig_scores(m.setup), m.measured.circuit)
    for ablation, agree in (("mean", 1e-3), ("resample", 2e-2)):
        (eap_a, ig_a, truth), (eap_e, ig_e, _) = found["a", ablation], found["e", ablation]
        assert score(eap_a, truth).roc_auc != score(eap_e, truth).roc_auc
        np.testing.assert_allclose(ig_a, ig_e, rtol=0, atol=agree * ig_a.max())
        assert score(ig_a, truth).roc_auc == score(ig_e, truth).roc_auc == 1.0
    with pytest.raises(ValueError, match="steps=0"):
        eap_ig_scores(m.setup, steps=0)


@pytest.mark.slow
def test_method_scores_the_same_under_every_xla_optimisation_level(tmp_path):
    """detect_abc 5, variant e, every method on 12 inputs under each ablation: before the floor
    EAP's AUROC under mean ablation was 0.993 with XLA's optimisations and 0.875 without, and
    patching's moved between runs; now both levels give the same zero scores and the same rest,
    to float32 rounding."""
    script = tmp_path / "methods.py"
    script.write_text(
        "import sys, numpy as np\n"
        "from compiler.examples import CATALOGUE\n"
        "from compiler.lab.circuits import (ABLATIONS, SHARP, InputDistribution, acdc_scores, eap_scores,\n"
        "    edge_patching_scores, make_variant, measured, setup)\n"
        "ex = CATALOGUE['detect_abc']\n"
        "built = make_variant('e', ex.build(5), tuple(ex.vocab), 5, seed=0)\n"
        "rows = []\n"
        "for m in measured(built, ex.build(5), InputDistribution(48, 0), ABLATIONS):\n"
        "    s = setup(built.net, np.asarray(m.setup.ids)[:12], m.setup.ablation)\n"
        "    rows += [eap_scores(s), edge_patching_scores(s), edge_patching_scores(s, sharpness=SHARP), acdc_scores(s)[0]]\n"
        "np.save(sys.argv[1], np.stack(rows))\n")
    found = []
    for flag in ("0", "1"):
        out = tmp_path / f"scores{flag}.npy"
        env = {**os.environ, "JAX_DISABLE_MOST_OPTIMIZATIONS": flag}
        subprocess.run([sys.executable, str(script), str(out)], check=True, env=env, cwd=Path(__file__).parents[3])
        found.append(np.load(out))
    np.testing.assert_array_equal(found[0] == 0, found[1] == 0)
    np.testing.assert_allclose(found[0], found[1], rtol=1e-4)
