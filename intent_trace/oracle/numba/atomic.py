"""Atomic operations on view elements (spec §16, numerics T9)."""
