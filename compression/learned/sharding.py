"""Data parallelism over every local device with ``jax.sharding``.

A 1-D mesh named ``"batch"`` spans the local devices; inputs are split along their leading
(batch) axis, W and the optimiser state are replicated. XLA inserts the gradient all-reduce. With
one device (a laptop CPU) the same code runs unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from compiler.errors import CompressionError

BATCH_AXIS = "batch"


@dataclasses.dataclass(frozen=True)
class DataParallel:
    """The mesh and the two shardings a compression run uses."""

    mesh: Mesh

    @property
    def num_devices(self) -> int:
        return int(self.mesh.devices.size)

    @property
    def batch(self) -> NamedSharding:
        """Split the leading axis across devices."""
        return NamedSharding(self.mesh, PartitionSpec(BATCH_AXIS))

    @property
    def replicated(self) -> NamedSharding:
        """A full copy on every device."""
        return NamedSharding(self.mesh, PartitionSpec())

    def check_batch(self, batch_size: int) -> None:
        """Raise unless the batch splits evenly across the devices."""
        if batch_size % self.num_devices:
            raise CompressionError(
                f"batch_size {batch_size} is not divisible by the {self.num_devices} local devices; "
                f"use a multiple of {self.num_devices}"
            )


def data_parallel(devices: Sequence[jax.Device] | None = None) -> DataParallel:
    """A :class:`DataParallel` over ``devices`` (default: all local devices)."""
    devices = list(devices) if devices is not None else jax.local_devices()
    return DataParallel(Mesh(np.asarray(devices), (BATCH_AXIS,)))
