"""Computation in superposition: U-AND MLP blocks, skip-feature-bigram heads, their errors."""
