"""Circuit analysis (QK, OV, path expansion) of attention-only models, compiled ones included."""
