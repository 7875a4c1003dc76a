"""Bilinear layers: the interaction tensor, exact Boolean gates, Craft blocks."""
