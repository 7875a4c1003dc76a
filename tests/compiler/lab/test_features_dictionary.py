"""The true dictionary reproduces site activations: codes x dictionary == activations."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import compile_rasp
from compiler.examples import EXAMPLES
from compiler.lab.features.dictionary import check_dictionaries, true_dictionary
from compiler.lab.features.sites import Site, SiteRunner, residual_sites
from compiler.lab.features.stages import STAGES, build_stage
from compiler.model.norm import ANCHOR
from compiler.model.projected import projection_blocks
from compression.analytic import packed_projection, packed_width, random_projection, residual_structure
from compression.learned.sampling import enumerate_inputs
from compression.task import frac_prevs_task, input_space_of, sort_unique_task

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def tasks():
    return {"frac_prevs": frac_prevs_task(), "sort_unique": sort_unique_task(5, 5)}


def packed(task):
    structure = residual_structure(task.compiled)
    return packed_projection(structure, packed_width(structure))


@pytest.mark.parametrize("name", ["frac_prevs", "sort_unique"])
@pytest.mark.parametrize("compressed", [False, True])
def test_codes_times_dictionary_is_the_activation_at_every_site(tasks, name, compressed):
    task = tasks[name]
    model = task.compiled
    w = packed(task) if compressed else None
    ids = enumerate_inputs(task.space)[::7]  # every length, a few hundred inputs
    sites = list(residual_sites(model))
    sites += [Site("mlp", i) for i, layer in enumerate(model.config.layers)
              if getattr(layer, "w_in", None) is not None and layer.w_in.shape[1]]
    dictionaries = [true_dictionary(model, site, w) for site in sites]
    for site, check in zip(sites, check_dictionaries(model, dictionaries, ids, w)):
        assert check.positions > 150
        assert check.max_activation > 0.5, site
        assert check.max_abs_error <= TOLERANCE * max(1.0, check.max_activation), (site, check)


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_a_normalised_model_has_the_dictionary_and_states_the_factor_its_sites_are_read_with(norm):
    """With a norm the sites hold the stream before it: codes times dictionary is still every
    activation (the anchor coordinates among the dense directions), and the factor the norm reading
    each site applies stays within the stated 1 +- spread (plus float32's share)."""
    example = EXAMPLES["sort_unique"]
    model = compile_rasp(example.build(5), set(example.vocab), 5, norm=norm)
    ids = enumerate_inputs(input_space_of(model))[::7]
    sites = [*residual_sites(model), *(Site("mlp", i) for i, layer in enumerate(model.config.layers)
                                       if getattr(layer, "w_in", None) is not None and layer.w_in.shape[1])]
    dictionaries = [true_dictionary(model, site) for site in sites]
    for dictionary, check in zip(dictionaries, check_dictionaries(model, dictionaries, ids)):
        assert ANCHOR in dictionary.dense_labels or dictionary.site.kind == "mlp"
        assert check.max_abs_error <= TOLERANCE * max(1.0, check.max_activation), (dictionary.site, check)
        low, high = dictionary.read_factor_range
        assert check.norm_factor is not None
        assert low - 1e-6 <= check.norm_factor[0] <= check.norm_factor[1] <= high + 1e-6, (dictionary.site, check)


def test_exact_model_dictionary_is_the_labelled_basis(tasks):
    model = tasks["frac_prevs"].compiled
    last = Site("resid", len(model.config.layers))
    dictionary = true_dictionary(model, last)
    assert set(dictionary.labels) == {"tokens:a", "tokens:b", "tokens:c", "tokens:x"}
    assert {"one", "indices:0", "frac_prevs"} <= set(dictionary.dense_labels)
    np.testing.assert_array_equal(dictionary.vectors, np.eye(len(model.residual_labels))[dictionary.coords])
    embedding = true_dictionary(model, Site("resid", 0))
    assert "frac_prevs" not in embedding.dense_labels  # written by the last layer, absent at the embedding


def test_compressed_dictionary_rows_are_rows_of_w_and_unread_values_are_dropped(tasks):
    task = tasks["sort_unique"]
    w = packed(task)
    dictionary = true_dictionary(task.compiled, Site("resid", len(task.compiled.config.layers)), w)
    np.testing.assert_array_equal(dictionary.vectors, w[dictionary.coords])
    assert dictionary.width == w.shape[1] < len(task.compiled.residual_labels)
    assert all(not np.any(w[task.compiled.residual_labels.index(label)]) for label in dictionary.dropped)


def test_splicing_the_site_activation_back_changes_nothing(tasks):
    task = tasks["sort_unique"]
    w = packed(task)
    runner = SiteRunner(task.compiled, w)
    ids = enumerate_inputs(task.space)[::11]
    site = Site("resid", 2)
    spliced = runner.spliced_output(ids, site, runner.activations(ids, site))
    np.testing.assert_allclose(np.asarray(spliced), np.asarray(runner.output(ids)), atol=1e-5)


def test_bad_sites_are_refused_with_the_valid_range(tasks):
    model = tasks["frac_prevs"].compiled
    with pytest.raises(ValueError, match="snapshots of this model are 0..4"):
        true_dictionary(model, Site("resid", 9))
    with pytest.raises(ValueError, match="not a non-empty MLP"):
        true_dictionary(model, Site("mlp", 0))
    with pytest.raises(ValueError, match="rows"):
        true_dictionary(model, Site("resid", 1), np.zeros((3, 2), np.float32))


def test_a_compiled_loop_has_sites_per_iteration_and_its_dictionary_holds():
    """A tied block (compiled rasp.Loop) is stored once but run per iteration: every iteration has
    its own sites, the runner's output is the model's, and codes x dictionary is the activation."""
    from compiler import compile_rasp
    from rasp import lib

    model = compile_rasp(lib.make_parity_loop(3), {0, 1}, 4)
    assert model.config.tied is not None and model.config.tied.repeats == 3
    executed = len(model.config.layer_order)
    assert executed > len(model.config.layers)
    sites = residual_sites(model)
    assert len(sites) == executed + 1
    ids = enumerate_inputs(input_space_of(model))
    runner = SiteRunner(model)
    np.testing.assert_allclose(np.asarray(runner.output(ids)), np.asarray(model.run(ids).output), atol=1e-5)
    mlps = [Site("mlp", k) for k in range(executed) if k % 2]
    dictionaries = [true_dictionary(model, site) for site in (*sites, *mlps)]
    for dictionary, check in zip(dictionaries, check_dictionaries(model, dictionaries, ids)):
        assert check.max_abs_error <= TOLERANCE, (dictionary.site, check)
    # the loop's state is rewritten each iteration, so later sites hold the state's features too
    assert dictionaries[executed].num_features >= dictionaries[0].num_features
    with pytest.raises(ValueError, match=f"snapshots of this model are 0..{executed}"):
        true_dictionary(model, Site("resid", executed + 1))


def test_the_runner_computes_what_the_model_computes_with_block_and_dense_projections(tasks):
    """``SiteRunner`` reads and writes a packed W block by block (each s-op's code block) and a
    dense W as one product; both give the model's own compressed forward pass."""
    task = tasks["sort_unique"]
    model = task.compiled
    structure = residual_structure(model)
    ids = enumerate_inputs(task.space)[::9]
    for w in (packed(task), random_projection(structure, packed_width(structure), seed=3)):
        runner = SiteRunner(model, w)
        reference = model.forward(model.params, ids, projection=w)
        np.testing.assert_allclose(np.asarray(runner.output(ids)), np.asarray(reference.output), atol=1e-5)
        for site in residual_sites(model):  # the model's residuals are decompressed: r @ Wᵀ
            np.testing.assert_allclose(np.asarray(runner.activations(ids, site)) @ w.T,
                                       np.asarray(reference.residuals[site.index]), atol=1e-5)


def test_projection_blocks_cover_exactly_the_non_zeros_of_the_rows():
    w = build_stage(STAGES["1k-copy"]).projection  # 16 copy s-ops of 64 values, each in its own block
    rows = tuple(range(len(w)))
    blocks = projection_blocks(w, rows)
    assert blocks is not None and len(blocks) == 17  # the copies, and the protected axes merged into one
    rebuilt = np.zeros_like(w)
    for block in blocks:
        rebuilt[np.ix_(block.positions, block.columns)] = w[np.ix_(block.positions, block.columns)]
    np.testing.assert_array_equal(rebuilt, w)
    positions = [p for block in blocks for p in block.positions]
    columns = [c for block in blocks for c in block.columns]
    assert len(set(positions)) == len(positions) and len(set(columns)) == len(columns)  # disjoint blocks
    dense = np.random.default_rng(0).standard_normal(w.shape)
    assert projection_blocks(dense, rows) is None  # one block costs the whole product: stay dense


def test_splice_decodes_outputs_as_the_model_decoder_does(sort_unique_model):
    """A logit of exactly 1/2 is a value for the model's decoder, so for the splice too; below
    it the position is None (-1)."""
    from compiler.lab.features.splice import decoded

    encoder = sort_unique_model.output_encoder
    width = len(encoder.values)
    logits = np.zeros((1, 3, width), np.float32)
    logits[0, 0, 0] = 0.5  # exactly the threshold: value 0
    logits[0, 1, 1] = 0.4999  # below it: None
    logits[0, 2, width - 1] = 1.0
    assert decoded(sort_unique_model, logits)[0, :, 0].tolist() == [0, -1, width - 1]
    assert encoder.decode(logits[0])[1:] == [None, encoder.values[width - 1]]
    assert encoder.value_indices(logits[0]).tolist() == [0, -1, width - 1]
