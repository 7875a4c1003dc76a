"""The staged benchmark models are exact; the perfect SAE scores 1.0 and keeps outputs exact."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.lab.features.dictionary import check_dictionaries, true_dictionary
from compiler.lab.features.evaluation import accuracy_of, rasp_references
from compiler.lab.features.metrics import cofiring, data_profile, ground_truth, perfect_coder, synthetic_scores
from compiler.lab.features.sites import Site, SiteRunner
from compiler.lab.features.splice import causal_use, spliced_accuracy
from compiler.lab.features.stages import STAGES, build_stage, sample_ids
from compiler.lab.features.stream import ShardReader, default_batch, dense_codes, stream_activations


@pytest.fixture(scope="module")
def stage_1k():
    return build_stage(STAGES["1k"])


def exact_on_samples(stage, count: int, seed: int, zipf: float) -> float:
    ids = sample_ids(stage.compiled, count, seed=seed, zipf=zipf)
    refs = rasp_references(stage.compiled, stage.programs, ids)
    return accuracy_of(stage.compiled, refs, SiteRunner(stage.compiled, stage.projection).output).sequence


def test_1k_model_has_1k_features_in_superposition_and_is_exact_on_10000_inputs(stage_1k):
    model = stage_1k.compiled
    last = Site("resid", len(model.config.layers))
    dictionary = true_dictionary(model, last, stage_1k.projection)
    assert dictionary.num_features >= 1_000
    assert stage_1k.d < dictionary.num_features / 5  # d = 176: more than 6 features per dimension
    assert stage_1k.claims_exact  # the interference bound's guarantee ...
    assert exact_on_samples(stage_1k, 10_000, seed=1, zipf=1.0) == 1.0  # ... and measured
    ids = sample_ids(model, 500, seed=2)
    check = check_dictionaries(model, [dictionary], ids, stage_1k.projection)[0]
    assert check.max_abs_error < 1e-5


def stream_truth(stage, folder, tokens: int):
    """True codes (ground-truth order) of ``tokens`` streamed activations at the last site."""
    model = stage.compiled
    site = Site("resid", len(model.config.layers))
    dictionary = true_dictionary(model, site, stage.projection)
    stream_activations(model, site, folder, tokens, stage.projection, batch_inputs=1000, zipf=1.0, progress=False)
    reader = ShardReader(folder)
    truth = ground_truth(dictionary, *data_profile(reader.batches(4096, ("code_index", "dense_codes")),
                                                   dictionary.num_features))
    return [truth.codes(dense_codes(b["code_index"], b["code_value"], dictionary.num_features), b["dense_codes"])
            for b in reader.batches(4096, ("code_index", "code_value", "dense_codes"))]


@pytest.mark.slow  # streams two stages (about 7 minutes on the loaded 2-core machine)
def test_1k_features_cofire_in_classes_and_copy_stage_features_do_not(stage_1k, tmp_path):
    """The 1k stage's features are functions of one token, so they fire in classes (token and its
    15 mix values ...); the copy stage's features fire independently, and it is exact too."""
    mix = cofiring(stream_truth(stage_1k, tmp_path / "mix", 5_000))
    assert mix.num_classes < len(mix.classes) / 10 and mix.class_l0 < mix.true_l0 / 5
    copy = build_stage(STAGES["1k-copy"])
    assert copy.claims_exact and copy.d < 1_000 / 4
    assert exact_on_samples(copy, 300, seed=1, zipf=1.0) == 1.0
    found = cofiring(stream_truth(copy, tmp_path / "copy", 5_000))
    assert len(found.classes) >= 1_000
    assert found.num_classes >= 0.97 * len(found.classes)  # only a few rare values share a pattern by chance
    ids = sample_ids(copy.compiled, 300, seed=2)
    dictionary = true_dictionary(copy.compiled, Site("resid", len(copy.compiled.config.layers)), copy.projection)
    assert check_dictionaries(copy.compiled, [dictionary], ids, copy.projection)[0].max_abs_error < 1e-5


def test_perfect_sae_scores_one_and_keeps_outputs_exact(stage_1k, tmp_path):
    model, w = stage_1k.compiled, stage_1k.projection
    site = Site("resid", len(model.config.layers))
    dictionary = true_dictionary(model, site, w)
    report = stream_activations(model, site, tmp_path, 8_000, w, batch_inputs=1024, shard_tokens=3_000,
                                progress=False)
    assert report.shards == 3
    reader = ShardReader(tmp_path)
    occurring, dense_range = data_profile(reader.batches(4096, ("code_index", "dense_codes")), dictionary.num_features)
    truth = ground_truth(dictionary, occurring, dense_range)
    coder = perfect_coder(truth)

    def batches():
        for b in reader.batches(4096, ("activations", "code_index", "code_value", "dense_codes")):
            codes = dense_codes(b["code_index"], b["code_value"], dictionary.num_features)
            yield b["activations"], truth.codes(codes, b["dense_codes"])

    scores = synthetic_scores(coder, truth, batches())
    assert scores.sae_l0 == scores.true_l0 == 22.0  # one value per s-op present: tokens, 15 mix, 4 low, 2 same
    assert scores.dead_latents == 0
    for value in (scores.mcc, scores.uniqueness, scores.shrinkage, scores.explained_variance,
                  scores.classification.precision, scores.classification.recall,
                  scores.classification.f1_score, scores.classification.accuracy):
        assert value == pytest.approx(1.0, abs=1e-5)
    ids = sample_ids(model, 500, seed=3)
    refs = rasp_references(model, stage_1k.programs, ids)
    assert spliced_accuracy(model, coder, refs, site, w).sequence == 1.0
    use = causal_use(model, dictionary, coder, ids, w, examples=1, truth=truth)
    assert use.used > 900 and use.fraction == 1.0


def test_a_wrong_dictionary_is_caught(stage_1k):
    """The checks are not vacuous: shuffled feature vectors score low and break the outputs."""
    model, w = stage_1k.compiled, stage_1k.projection
    site = Site("resid", len(model.config.layers))
    truth = ground_truth(true_dictionary(model, site, w))
    coder = perfect_coder(truth)
    rng = np.random.default_rng(0)
    shuffled = type(coder)(coder.w_enc, coder.b_enc, coder.threshold, coder.w_dec[rng.permutation(len(coder.w_dec))],
                           coder.b_dec)
    ids = sample_ids(model, 200, seed=4)
    refs = rasp_references(model, stage_1k.programs, ids)
    assert spliced_accuracy(model, shuffled, refs, site, w).sequence < 0.5


@pytest.mark.slow
def test_16k_model_is_exact_on_10000_inputs():
    stage = build_stage(STAGES["16k"])
    dictionary = true_dictionary(stage.compiled, Site("resid", len(stage.compiled.config.layers)), stage.projection)
    assert dictionary.num_features >= 16_384 and stage.d <= 768 and stage.claims_exact
    assert exact_on_samples(stage, 10_000, seed=1, zipf=1.0) == 1.0


# (stage, values per copy, copies, packed width d, default stream batch or None)
COPY_STAGES = [
    # 19 s: slow, since docs/features.md's evaluation example builds this stage and scores it
    pytest.param("1k-copy", 64, 16, 211, None, marks=pytest.mark.slow),
    # about a minute on the 2-core machine (its claim's check runs RASP on 4,000 inputs); the
    # batch is one exact [batch, 34, D] stream in 512 MB: 2**29 // (34 * 4,260 * 4) = 926
    pytest.param("4k-copy", 128, 32, 483, 926, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("name, values, copies, d, batch", COPY_STAGES)
def test_copy_model_has_independent_features_and_is_exact(name, values, copies, d, batch):
    stage = build_stage(STAGES[name])
    model = stage.compiled
    dictionary = true_dictionary(model, Site("resid", len(model.config.layers)), stage.projection)
    assert dictionary.num_features == values * (copies + 1) and stage.d == d  # tokens and their copies
    assert stage.claims_exact and stage.max_load < 0.5
    assert stage.claim.check.kind == "sampled" and stage.claim.check.tightest > 0
    assert exact_on_samples(stage, 300, seed=1, zipf=1.0) == 1.0
    ids = sample_ids(model, 100, seed=2)
    assert check_dictionaries(model, [dictionary], ids, stage.projection)[0].max_abs_error < 1e-5
    if batch is not None:
        assert default_batch(model) == batch


@pytest.mark.slow  # 10 minutes on the 2-core machine beside an SAE run, 9 GB
def test_16k_copy_model_has_16k_independent_features_in_768_dimensions_and_is_exact(tmp_path):
    stage = build_stage(STAGES["16k-copy"])
    model = stage.compiled
    site = Site("resid", len(model.config.layers))
    dictionary = true_dictionary(model, site, stage.projection)
    assert dictionary.num_features == 256 * 65 and stage.d == 768 and stage.claims_exact
    assert exact_on_samples(stage, 10_000, seed=1, zipf=1.0) == 1.0
    ids = sample_ids(model, 200, seed=2)
    assert check_dictionaries(model, [dictionary], ids, stage.projection)[0].max_abs_error < 1e-5
    stream_activations(model, site, tmp_path, 20_000, stage.projection, zipf=1.0, progress=False)
    reader = ShardReader(tmp_path)
    truth = ground_truth(dictionary, *data_profile(reader.batches(4096, ("code_index", "dense_codes")),
                                                   dictionary.num_features))
    batches = ((b["activations"], truth.codes(dense_codes(b["code_index"], b["code_value"], dictionary.num_features),
                                              b["dense_codes"]))
               for b in reader.batches(4096, ("activations", "code_index", "code_value", "dense_codes")))
    scores = synthetic_scores(perfect_coder(truth), truth, batches)  # codes overlap up to 0.73 here
    for value in (scores.mcc, scores.classification.f1_score, scores.explained_variance):
        assert value == pytest.approx(1.0, abs=1e-5)


def test_an_evaluation_set_streamed_as_given_makes_the_perfect_sae_perfect_at_any_size(stage_1k, tmp_path):
    """Streamed with `inputs=`, the shards hold every real position of the given inputs in order,
    so a truth profiled on them has every feature the splice on the same inputs meets: the
    perfect SAE splices exactly even on 30 inputs."""
    from compiler.errors import LabError
    from compiler.lab.features.dictionary import real_positions

    model, w = stage_1k.compiled, stage_1k.projection
    site = Site("resid", len(model.config.layers))
    dictionary = true_dictionary(model, site, w)
    ids = sample_ids(model, 30, seed=4, zipf=1.0)
    report = stream_activations(model, site, tmp_path, None, w, batch_inputs=16, inputs=ids, progress=False)
    reader = ShardReader(tmp_path)
    acts = np.concatenate([b["activations"] for b in reader.batches(4096, ("activations",))])
    mask = real_positions(model, ids)
    assert report.tokens == len(acts) == int(mask.sum()) and reader.meta["given_inputs"] == 30
    np.testing.assert_allclose(acts, np.asarray(SiteRunner(model, w).activations(ids, site))[mask], atol=1e-6)
    truth = ground_truth(dictionary, *data_profile(reader.batches(4096, ("code_index", "dense_codes")),
                                                   dictionary.num_features))
    assert truth.num_sparse < dictionary.num_features  # 30 inputs show only some of the features
    refs = rasp_references(model, stage_1k.programs, ids)
    assert spliced_accuracy(model, perfect_coder(truth), refs, site, w).sequence == 1.0
    for tokens, inputs, message in ((100, ids, "exactly one"), (None, None, "exactly one"),
                                    (None, ids[:, :3], r"inputs must be \[n, 5\] token ids")):
        with pytest.raises(LabError, match=message):
            stream_activations(model, site, tmp_path / "bad", tokens, w, inputs=inputs, progress=False)
