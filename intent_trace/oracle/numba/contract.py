"""Numba rule for contract (spec §10, numerics T5)."""
