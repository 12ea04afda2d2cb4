"""RNG: Philox4x32-10 bits and uniform floats (spec §17, numerics T8)."""
