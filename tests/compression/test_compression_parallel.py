"""Data parallelism: the same run on two (simulated) CPU devices matches one device."""

import json
import os
import subprocess
import sys
from pathlib import Path

import compression_fake as fake
import numpy as np

from compression.learned.config import OptimizerConfig, TrainConfig
from compression.learned.train import Compressor

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CONFIG = TrainConfig(d=10, steps=60, batch_size=32, chunk_size=20, seed=3, optimizer=OptimizerConfig(lr_init=1e-3))

SCRIPT = """
import json, sys
import jax, numpy as np
import compression_fake as fake
from compression.learned.config import OptimizerConfig, TrainConfig
from compression.learned.train import Compressor, _run_chunk
config = TrainConfig(d=10, steps=60, batch_size=32, chunk_size=20, seed=3, optimizer=OptimizerConfig(lr_init=1e-3))
c = Compressor(fake.frozen_model(), fake.input_space(), config)
state = c.init_state()
hlo = _run_chunk.lower(state, c._params, c._data_key, c._pool, c._columns, c._replay, spec=c.spec, length=20).compile().as_text()
state, _ = c.run_chunk(state, 20)
spec = c.spec.parallel
result = c.train(progress=False)
json.dump({"devices": jax.local_device_count(), "mesh": spec.num_devices,
           "w_sharding": list(state.projection.sharding.spec), "all_reduce": "all-reduce" in hlo,
           "w": result.projection.tolist()}, sys.stdout)
"""


def test_two_devices_give_the_single_device_result():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT)]))
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert report["devices"] == 2 and report["mesh"] == 2
    assert report["w_sharding"] == []  # W is replicated on both devices
    assert report["all_reduce"]  # the batch is split and the gradients summed across devices
    single = Compressor(fake.frozen_model(), fake.input_space(), CONFIG).train(progress=False)
    # Summation order differs across devices, and Adam amplifies float noise in near-zero
    # gradient coordinates, so the runs agree closely rather than bit for bit.
    np.testing.assert_allclose(np.asarray(report["w"]), single.projection, atol=1e-3)
