"""Computed features in superposition: a ground-truth benchmark for dictionary learning.

Modules, in reading order (docs/features.md):

* ``sites``: where activations are read (residual snapshots, MLP sub-layers; a compiled loop's
  per iteration), the compressed model's own d-dimensional stream, spliced forward passes;
* ``dictionary``: the true dictionary at a site (rows of W of the features present, dense
  directions apart) and the check that activations equal codes times dictionary;
* ``stages``: the staged benchmark models (1k, 4k, 16k features), compiled side by side and
  compressed with the packed projection, and the copy stages whose features fire independently;
  input sampling (uniform or Zipf tokens);
* ``evaluation``: decoded-output accuracy of a multi-output model against RASP;
* ``stream``: activations with their true codes into safetensors shards, and a reader;
* ``metrics``: SynthSAEBench's metrics, the ground truth, the perfect SAE, co-firing classes;
* ``splice``: spliced-reconstruction accuracy and matched-and-causally-used features;
* ``sae``: train SAELens SAEs on the shards (imports SAELens lazily);
* ``plots``: recovery against d and L0.

Entry points, importable from here: the stages (`STAGES`, `build_stage`, `sample_ids`), the
sites and their true dictionaries (`Site`, `residual_sites`, `true_dictionary`,
`check_dictionaries`), the activation shards (`stream_activations`, `ShardReader`), the
metrics and ground truth (`ground_truth`, `synthetic_scores`, `data_profile`), the splice
checks (`spliced_accuracy`, `causal_use`), SAELens training (`train_sae`) and the plots.
"""

from compiler.lab.features.dictionary import check_dictionaries, true_dictionary
from compiler.lab.features.evaluation import accuracy_of, rasp_references
from compiler.lab.features.metrics import TopKOf, cofiring, data_profile, dictionary_mcc, ground_truth, perfect_coder, synthetic_scores
from compiler.lab.features.plots import loss_plot, recovery_plot
from compiler.lab.features.sae import TorchCoder, train_sae
from compiler.lab.features.sites import Site, SiteRunner, residual_sites
from compiler.lab.features.splice import causal_use, spliced_accuracy
from compiler.lab.features.stages import STAGES, CopySpec, Stage, StageSpec, build_stage, sample_ids
from compiler.lab.features.stream import ShardReader, default_batch, dense_codes, stream_activations

__all__ = [
    "STAGES",
    "CopySpec",
    "ShardReader",
    "Site",
    "SiteRunner",
    "Stage",
    "StageSpec",
    "TopKOf",
    "TorchCoder",
    "accuracy_of",
    "build_stage",
    "causal_use",
    "check_dictionaries",
    "cofiring",
    "data_profile",
    "default_batch",
    "dense_codes",
    "dictionary_mcc",
    "ground_truth",
    "loss_plot",
    "perfect_coder",
    "rasp_references",
    "recovery_plot",
    "residual_sites",
    "sample_ids",
    "spliced_accuracy",
    "stream_activations",
    "synthetic_scores",
    "train_sae",
    "true_dictionary",
]
