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
"""

__all__: list[str] = []
