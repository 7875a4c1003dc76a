"""Craft: the labelled vector-space IR that RASP programs are lowered into (numpy only)."""

from craft.bases import (
    BasisDirection,
    VectorInBasis,
    VectorSpaceWithBasis,
    direct_sum,
    join_vector_spaces,
)
from craft.blocks import (
    MLP,
    AttentionHead,
    MultiAttentionHead,
    SeriesWithResiduals,
    combine_in_parallel,
    heads_of,
)
from craft.maps import BilinearMap, LinearMap, project

__all__ = [
    "BasisDirection",
    "VectorInBasis",
    "VectorSpaceWithBasis",
    "direct_sum",
    "join_vector_spaces",
    "LinearMap",
    "BilinearMap",
    "project",
    "MLP",
    "AttentionHead",
    "MultiAttentionHead",
    "SeriesWithResiduals",
    "combine_in_parallel",
    "heads_of",
]
