"""Learned compression: W (D x d) found by gradient descent on the frozen compiled model.

Modules in reading order:

* ``config``: frozen records describing a run (optimiser, loss, sampling, width-search recipe).
* ``frozen``: the model contract, a pure forward function with and without W, plus metadata.
* ``sampling``: a program's valid input space, enumerated or sampled inside JAX.
* ``projection``: initial W and its Gram matrix.
* ``losses``: the paper's objective and the exactness objective (logit-gap margin, the
  sub-layers' own outputs, attention patterns).
* ``optim``: AdamW and its learning-rate schedule.
* ``sharding``: data parallelism over the local devices.
* ``checkpoint``: one safetensors file per run, written atomically.
* ``train``: the jitted, resumable training loop (``Compressor``).
"""

from compression.learned.checkpoint import load_checkpoint, save_checkpoint
from compression.learned.config import GDRecipe, LossConfig, OptimizerConfig, SamplingConfig, TrainConfig
from compression.learned.frozen import FrozenModel
from compression.learned.losses import compression_loss
from compression.learned.projection import gram, init_projection
from compression.learned.sampling import InputSpace, enumerate_inputs, sample_inputs
from compression.learned.sharding import DataParallel, data_parallel
from compression.learned.train import Compressor, TrainResult, TrainState, compress

__all__ = [
    "Compressor", "DataParallel", "FrozenModel", "GDRecipe", "InputSpace", "LossConfig", "OptimizerConfig",
    "SamplingConfig", "TrainConfig", "TrainResult", "TrainState", "compress", "compression_loss",
    "data_parallel", "enumerate_inputs", "gram", "init_projection", "load_checkpoint", "sample_inputs",
    "save_checkpoint",
]
