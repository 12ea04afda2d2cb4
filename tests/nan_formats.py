"""NaN words of the float formats, for the tests that hold NaN payloads bit for bit (T3): per dtype the unsigned view,
the quiet bit, and four NaNs with distinct payloads (quiet +, quiet -, signalling +, signalling -)."""
import numpy as np

FORMATS = {
    "f32": (np.uint32, 0x0040_0000, [0x7FC0_0011, 0xFFC0_0022, 0x7F80_0033, 0xFF80_0044]),
    "f64": (np.uint64, 0x0008_0000_0000_0000, [0x7FF8_0000_0000_0011, 0xFFF8_0000_0000_0022,
                                                0x7FF0_0000_0000_0033, 0xFFF0_0000_0000_0044]),
    "f16": (np.uint16, 0x0200, [0x7E05, 0xFE06, 0x7C07, 0xFC09]),
    "bf16": (np.uint16, 0x0040, [0x7FC5, 0xFFC6, 0x7F87, 0xFF89]),
}


def quiet(name: str, bits: int) -> int:
    """The NaN ``bits`` quieted, as a result of the format holds it: f16 keeps its payload (NumPy's conversion from
    float), bf16 only its sign (ml_dtypes' conversion, which every target follows: README, T4 functions)."""
    return (bits & 0x8000) | 0x7FC0 if name == "bf16" else bits | FORMATS[name][1]
