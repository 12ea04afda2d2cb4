"""Run Metal programs without a Mac: the Metal source compiled as host C++ against an emulation header.

- :mod:`.translate`: the Metal kernel rewritten line for line into C++ over ``itm_metal.h`` (the header says what
  it emulates and where it cannot match Metal);
- :mod:`.kernel`: compiled with the host C++ compiler (cached by source hash) and run: :class:`EmulatedKernel`,
  with data-race, bounds and barrier-divergence reports raised as :class:`EmulationError`;
- :mod:`.executable`: ``intent.compile(k, target="tilelang-metal", emulate=True)``, the tilelang-metal executable
  with the emulator in place of a Metal device.
"""
