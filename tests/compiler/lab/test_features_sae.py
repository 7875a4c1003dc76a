"""The SAELens adapter: trains a real SAELens SAE on activation shards; our metrics equal SAELens'.

SAELens needs transformer-lens<4; the 'sae' extra (or every extra, '.[all]', what CI installs)
brings it with TransformerLens 3.9. In an environment without it these tests skip, printing why.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

from compiler.lab.features.dictionary import true_dictionary
from compiler.lab.features.metrics import data_profile, ground_truth, synthetic_scores
from compiler.lab.features.sites import Site
from compiler.lab.features.stream import ShardReader, dense_codes, stream_activations
from compression.analytic import packed_projection, packed_width, residual_structure
from compression.task import sort_unique_task

HAVE_SAE_LENS = importlib.util.find_spec("sae_lens") is not None
REASON = ("sae_lens is not installed in this environment; install the 'sae' extra or every extra: "
          "pip install -e '.[all]'")


def require_sae_lens() -> None:
    if not HAVE_SAE_LENS:
        print(f"\nSAELens adapter test not run: {REASON}")
        pytest.skip(REASON)


def test_the_adapter_module_imports_without_sae_lens():
    code = "import sys, compiler.lab.features.sae as m; print('sae_lens' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    require_sae_lens()
    task = sort_unique_task(5, 5)
    structure = residual_structure(task.compiled)
    w = packed_projection(structure, packed_width(structure))
    site = Site("resid", len(task.compiled.config.layers))
    folder = tmp_path_factory.mktemp("shards")
    stream_activations(task.compiled, site, folder, 4_000, w, batch_inputs=256, shard_tokens=1_500, progress=False)
    return folder, true_dictionary(task.compiled, site, w)



def test_a_folder_smaller_than_one_batch_is_refused_before_training(tmp_path):
    """Fewer activations than one batch would leave the batch loop spinning without a batch;
    `train_sae` refuses it up front (before SAELens is imported, so this runs without it)."""
    from compiler.errors import LabError
    from compiler.lab.features.sae import train_sae

    task = sort_unique_task(3, 3)
    site = Site("resid", len(task.compiled.config.layers))
    stream_activations(task.compiled, site, tmp_path, 100, None, batch_inputs=64, progress=False)
    assert ShardReader(tmp_path).meta["tokens"] == 100
    with pytest.raises(LabError, match="holds 100 activations, fewer than one batch of 1024"):
        train_sae(tmp_path, d_sae=8, k=2, steps=10, batch_size=1024)

def test_adapter_trains_a_tiny_sae_on_the_shards_and_metrics_match_sae_lens(shards):
    require_sae_lens()
    import torch
    from sae_lens.synthetic.evals import ClassificationMetricsCalculator, feature_uniqueness, mean_correlation_coefficient

    from compiler.lab.features.sae import TorchCoder, train_sae

    folder, dictionary = shards
    reader = ShardReader(folder)
    occurring, dense_range = data_profile(reader.batches(1024, ("code_index", "dense_codes")), dictionary.num_features)
    truth = ground_truth(dictionary, occurring, dense_range)
    curve = []
    sae = train_sae(folder, d_sae=len(truth.labels) + 4, k=4, steps=8, batch_size=256, lr=1e-3, history=curve,
                    log_every=3)
    assert [point.step for point in curve] == [3, 6, 8]
    assert all(np.isfinite(point.loss) and point.loss > 0 and "mse_loss" in point.parts for point in curve)
    assert sae.W_dec.shape == (len(truth.labels) + 4, reader.meta["width"])
    coder = TorchCoder(sae)
    batch = next(reader.batches(2048, ("activations", "code_index", "code_value", "dense_codes")))
    codes = truth.codes(dense_codes(batch["code_index"], batch["code_value"], dictionary.num_features),
                        batch["dense_codes"])
    z = coder.encode(batch["activations"])
    assert z.shape == (len(batch["activations"]), len(truth.labels) + 4)
    assert np.all(np.sum(z != 0, axis=1) <= 4)
    ours = synthetic_scores(coder, truth, [(batch["activations"], codes)])
    decoder, gt = torch.from_numpy(coder.decoder), torch.from_numpy(truth.vectors)
    assert ours.mcc == pytest.approx(mean_correlation_coefficient(decoder, gt), abs=1e-5)
    assert ours.uniqueness == pytest.approx(feature_uniqueness(decoder, gt), abs=1e-6)
    theirs = ClassificationMetricsCalculator(decoder, gt)
    theirs.add_batch(torch.from_numpy(z), torch.from_numpy(codes.astype(np.float32)))
    expected = theirs.compute()
    assert ours.classification.precision == pytest.approx(expected.precision, abs=1e-6)
    assert ours.classification.recall == pytest.approx(expected.recall, abs=1e-6)
    assert ours.classification.f1_score == pytest.approx(expected.f1_score, abs=1e-6)
    assert ours.classification.accuracy == pytest.approx(expected.accuracy, abs=1e-6)


def test_the_learning_rate_warms_up_holds_and_decays_to_zero(shards):
    require_sae_lens()
    from compiler.lab.features.sae import train_sae

    folder, _ = shards
    curve = []
    train_sae(folder, d_sae=12, k=2, steps=10, batch_size=128, lr=1e-3, history=curve, log_every=1,
              warmup_steps=2, decay_steps=4)
    lrs = np.array([point.lr for point in curve])
    assert [point.step for point in curve] == list(range(1, 11))
    # SAELens' linear warm-up from lr / warmup_steps, constant, then linear decay towards 0
    np.testing.assert_allclose(lrs, 1e-3 * np.array([0.5, 1, 1, 1, 1, 1, 1, 0.75, 0.5, 0.25]), rtol=1e-6)


def test_a_schedule_longer_than_training_is_refused(shards):
    require_sae_lens()
    from compiler.lab.features.sae import train_sae

    folder, _ = shards
    with pytest.raises(ValueError, match="decay_steps"):
        train_sae(folder, d_sae=12, k=2, steps=5, warmup_steps=3, decay_steps=3)
