"""Stage Two on an emulated carrier: ``verify metal-tilelang --emulate`` runs the generated Metal programs on the
host (``backends/tilelang/metal_emulation``), and this module says what such a result is evidence of.

The emulator runs the real Metal source (TileLang's output, translated line for line to C++), with real
concurrency inside each threadgroup, bounds and race checks, IEEE binary32 arithmetic without contraction as
MTLMathModeSafe specifies, and simdgroups of 32 lanes. Two things it cannot be:

- **Apple's math library.** ``metal::precise::`` and ``metal::fast::`` functions (and the unqualified library
  calls) are the host's libm here (``metal_emulation/host_math.py`` names them per program). The MSL specification
  bounds their error (most precise:: functions within 4 ulp) but does not fix their bits, and the host's libm is
  not Apple's. So, for a case whose program calls one (kernel-verification: vendor-transcendental accuracy is a
  deferred domain):

  - an *exact* obligation (bit-exact, signed zero, special values: ``tolerance`` None) that passed is **deferred**,
    not passed: the host's bits say nothing about the bits a Metal GPU returns, so no pass is claimed for it;
  - a *numerical* obligation that passed stays **passed**: its bound already charges each library call the
    specification's ulp budget (``kernel_bounds.VENDOR_ULPS["tilelang-metal"]``), which the host's libm meets, so
    the pass shows the program around the call is right under the specification's promise (exactly what a run on
    a Mac would show, short of testing Apple's library itself, which stays deferred); its reason says so;
  - a failure or error stays what it is (fail closed: the program, or the emulation, is wrong, and either needs a
    look); deferred records keep their outcome. Every affected record's reason names the host functions.

- **The GPU's scheduling.** Threadgroups run one after another and simdgroup reductions in one fixed lane order.
  This needs no reclassification: exact obligations on integer or max/min reductions do not depend on order, and
  floating accumulations are compared with T5's any-order bound, not the serial bits.

The report records that the carrier was emulated (``StageReport.emulated``, the JSONL header's
``carrier_emulated``, the summary lines), so an emulated PASSED is never read as a run on Apple hardware.
"""
from __future__ import annotations

import attrs

from .evidence import Outcome

EMULATED_TARGETS = ("tilelang-metal",)  # targets with a host emulator (TileLangTarget.emulated_executable)


def check_emulate(profile, emulate) -> None:
    """TypeError unless ``emulate`` is a bool; ValueError when it is True and the profile's carrier has no emulator."""
    if type(emulate) is not bool:
        raise TypeError(f"emulate must be True or False, got {type(emulate).__name__}")
    if emulate and profile.target not in EMULATED_TARGETS:
        raise ValueError(f"profile {profile.profile_id} runs on {profile.target}, which has no host emulator; "
                         f"emulate=True is for {', '.join(EMULATED_TARGETS)}")


def require_emulator() -> None:
    """The actionable RuntimeError when the emulator cannot run here (TileLang, a host C++ compiler)."""
    from ...backends.tilelang.metal_emulation.executable import require_runtime

    require_runtime()


def host_functions(exe) -> tuple:
    """The library functions the emulated executable's Metal program runs as the host's libm (sorted)."""
    from ...backends.tilelang.metal_emulation.host_math import host_math

    return host_math(exe.kernel.source)


def classify(evidence, functions: tuple):
    """``evidence`` of an emulated run whose program calls ``functions`` (host libm), classified as the module
    docstring says; unchanged when ``functions`` is empty."""
    if not functions:
        return evidence
    note = (f"emulated on the host: {', '.join(functions)} ran as the host's libm, not the Metal GPU's library")
    exact = evidence.policy is not None and evidence.policy.tolerance is None
    if evidence.outcome is Outcome.PASSED and exact:
        return attrs.evolve(evidence, outcome=Outcome.DEFERRED,
                            reason=f"{note}: exact bits on an Apple GPU are not shown (vendor-math accuracy is a "
                                   f"deferred domain)")
    if evidence.outcome is Outcome.PASSED:
        return attrs.evolve(evidence, reason=f"{note}; passed within a bound that charges each call the MSL "
                                             f"specification's accuracy")
    return attrs.evolve(evidence, reason=f"{evidence.reason} [{note}]" if evidence.reason else note)
