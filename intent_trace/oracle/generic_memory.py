"""Indexed access beyond views: gather, histogram, logical buffers, scatter_reduce (spec §13, §15)."""
