"""PSNR-HVS's integer 8x8 DCT and its contrast-sensitivity tables.

The transform is Daala's lifting DCT (``od_bin_fdct8``/``od_bin_fdct8x8``,
as libvmaf's ``third_party/xiph/psnr_hvs.c`` uses it): butterflies and
multiply-shift lifting steps on 32-bit integers, so any implementation that
keeps the same steps gives the same coefficients.  It is written here on
numpy int32 arrays holding many blocks at once, position-major
(:func:`fdct8x8_planar`: one contiguous array per sample position, so every
step is one vector pass over all blocks).  int32 is libvmaf's own type
(``od_coeff``, ``int`` temporaries), so numpy's int32 arithmetic is its
arithmetic step for step; and nothing comes near 2^31 for samples of up to
12 bits: each 1-D pass is orthonormal, so its outputs stay below
sqrt(8) * 4095 < 11,600 after the first pass, and a lifting step's operand
(a butterfly of at most four such values, halved) below 4 * 11,600 = 46,400,
whose product with the largest multiplier (21895) is below 1.02e9 < 2^31 —
the same bound libvmaf's C relies on.

The CSF tables are Xiph's "normalized inverse quantization matrix for 8x8
DCT at the point of transparency" (BSD licence, Xiph.Org), stored as C
floats: numpy rounds the decimal literals to float32 the way the C compiler
does.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fdct8x8", "fdct8x8_planar", "CSF", "CSF_Y", "CSF_CB", "CSF_CR", "MASK", "MASK_Y", "MASK_CB", "MASK_CR"]


def _half(a: np.ndarray) -> np.ndarray:
    """``OD_DCT_RSHIFT(a, 1)``: add the sign bit before the arithmetic shift
    (halving that rounds toward zero)."""
    return (a + (a < 0)) >> 1


def _lift(a: np.ndarray, mul: int, bits: int) -> np.ndarray:
    """``(a * mul + (1 << (bits - 1))) >> bits``, the rounding lifting step."""
    return (a * mul + (1 << (bits - 1))) >> bits


def _fdct8(x: list[np.ndarray]) -> list[np.ndarray]:
    """One 8-point forward DCT on eight arrays of samples (one per position)."""
    t0, t4, t2, t6, t7, t3, t5, t1 = x
    # +1/-1 butterflies
    t1 = t0 - t1
    t1h = _half(t1)
    t0 = t0 - t1h
    t4 = t4 + t5
    t4h = _half(t4)
    t5 = t5 - t4h
    t3 = t2 - t3
    t2 = t2 - _half(t3)
    t6 = t6 + t7
    t6h = _half(t6)
    t7 = t6h - t7
    # embedded 4-point type-II DCT
    t0 = t0 + t6h
    t6 = t0 - t6
    t2 = t4h - t2
    t4 = t2 - t4
    # embedded 2-point type-II DCT
    t0 = t0 - _lift(t4, 13573, 15)
    t4 = t4 + _lift(t0, 11585, 14)
    t0 = t0 - _lift(t4, 13573, 15)
    # embedded 2-point type-IV DST
    t6 = t6 - _lift(t2, 21895, 15)
    t2 = t2 + _lift(t6, 15137, 14)
    t6 = t6 - _lift(t2, 21895, 15)
    # embedded 4-point type-IV DST
    t3 = t3 + _lift(t5, 19195, 15)
    t5 = t5 + _lift(t3, 11585, 14)
    t3 = t3 - _lift(t5, 7489, 13)
    t7 = _half(t5) - t7
    t5 = t5 - t7
    t3 = t1h - t3
    t1 = t1 - t3
    t7 = t7 + _lift(t1, 3227, 15)
    t1 = t1 - _lift(t7, 6393, 15)
    t7 = t7 + _lift(t1, 3227, 15)
    t5 = t5 + _lift(t3, 2485, 13)
    t3 = t3 - _lift(t5, 18205, 15)
    t5 = t5 + _lift(t3, 2485, 13)
    return [t0, t1, t2, t3, t4, t5, t6, t7]


def fdct8x8_planar(x: np.ndarray) -> np.ndarray:
    """``od_bin_fdct8x8`` on blocks laid out position-major: ``x[i, j, b]`` is
    row ``i``, column ``j`` of block ``b`` (int32, shape (8, 8, N)); returns
    the coefficients the same way (``out[u, v, b]``).

    libvmaf's first pass transforms each column and stores it as a row, the
    second does the same again: with ``x[k]`` a whole row of every block, the
    first pass's outputs ``t[k]`` are indexed by column, and the second pass
    reads row ``k`` of the intermediate as ``stack(t)[:, k]`` (a strided view).
    """
    x = np.asarray(x, dtype=np.int32)
    first = np.stack(_fdct8([x[k] for k in range(8)]))
    return np.stack(_fdct8([first[:, k] for k in range(8)]), axis=1)


def fdct8x8(blocks: np.ndarray) -> np.ndarray:
    """``od_bin_fdct8x8`` on (..., 8, 8) integer blocks (rows then columns), int32 out."""
    blocks = np.asarray(blocks)
    lead = blocks.shape[:-2]
    planar = np.moveaxis(blocks.reshape(-1, 8, 8), 0, -1)
    return np.moveaxis(fdct8x8_planar(planar), -1, 0).reshape(lead + (8, 8))


#: Xiph's CSF tables, one 8x8 per plane (libvmaf's csf_y, csf_cb420, csf_cr420), a row a line;
#: psnr_hvs.cu is given this same table (``DECLARATION.kernel_tables``), not a copy of it
_CSF_ROWS = (
    # Y
    (1.6193873005, 2.2901594831, 2.08509755623, 1.48366094411, 1.00227514334, 0.678296995242, 0.466224900598, 0.3265091542),
    (2.2901594831, 1.94321815382, 2.04793073064, 1.68731108984, 1.2305666963, 0.868920337363, 0.61280991668, 0.436405793551),
    (2.08509755623, 2.04793073064, 1.34329019223, 1.09205635862, 0.875748795257, 0.670882927016, 0.501731932449, 0.372504254596),
    (1.48366094411, 1.68731108984, 1.09205635862, 0.772819797575, 0.605636379554, 0.48309405692, 0.380429446972, 0.295774038565),
    (1.00227514334, 1.2305666963, 0.875748795257, 0.605636379554, 0.448996256676, 0.352889268808, 0.283006984131, 0.226951348204),
    (0.678296995242, 0.868920337363, 0.670882927016, 0.48309405692, 0.352889268808, 0.27032073436, 0.215017739696, 0.17408067321),
    (0.466224900598, 0.61280991668, 0.501731932449, 0.380429446972, 0.283006984131, 0.215017739696, 0.168869545842, 0.136153931001),
    (0.3265091542, 0.436405793551, 0.372504254596, 0.295774038565, 0.226951348204, 0.17408067321, 0.136153931001, 0.109083846276),
    # Cb (4:2:0)
    (1.91113096927, 2.46074210438, 1.18284184739, 1.14982565193, 1.05017074788, 0.898018824055, 0.74725392039, 0.615105596242),
    (2.46074210438, 1.58529308355, 1.21363250036, 1.38190029285, 1.33100189972, 1.17428548929, 0.996404342439, 0.830890433625),
    (1.18284184739, 1.21363250036, 0.978712413627, 1.02624506078, 1.03145147362, 0.960060382087, 0.849823426169, 0.731221236837),
    (1.14982565193, 1.38190029285, 1.02624506078, 0.861317501629, 0.801821139099, 0.751437590932, 0.685398513368, 0.608694761374),
    (1.05017074788, 1.33100189972, 1.03145147362, 0.801821139099, 0.676555426187, 0.605503172737, 0.55002013668, 0.495804539034),
    (0.898018824055, 1.17428548929, 0.960060382087, 0.751437590932, 0.605503172737, 0.514674450957, 0.454353482512, 0.407050308965),
    (0.74725392039, 0.996404342439, 0.849823426169, 0.685398513368, 0.55002013668, 0.454353482512, 0.389234902883, 0.342353999733),
    (0.615105596242, 0.830890433625, 0.731221236837, 0.608694761374, 0.495804539034, 0.407050308965, 0.342353999733, 0.295530605237),
    # Cr (4:2:0)
    (2.03871978502, 2.62502345193, 1.26180942886, 1.11019789803, 1.01397751469, 0.867069376285, 0.721500455585, 0.593906509971),
    (2.62502345193, 1.69112867013, 1.17180569821, 1.3342742857, 1.28513006198, 1.13381474809, 0.962064122248, 0.802254508198),
    (1.26180942886, 1.17180569821, 0.944981930573, 0.990876405848, 0.995903384143, 0.926972725286, 0.820534991409, 0.706020324706),
    (1.11019789803, 1.3342742857, 0.990876405848, 0.831632933426, 0.77418706195, 0.725539939514, 0.661776842059, 0.587716619023),
    (1.01397751469, 1.28513006198, 0.995903384143, 0.77418706195, 0.653238524286, 0.584635025748, 0.531064164893, 0.478717061273),
    (0.867069376285, 1.13381474809, 0.926972725286, 0.725539939514, 0.584635025748, 0.496936637883, 0.438694579826, 0.393021669543),
    (0.721500455585, 0.962064122248, 0.820534991409, 0.661776842059, 0.531064164893, 0.438694579826, 0.375820256136, 0.330555063063),
    (0.593906509971, 0.802254508198, 0.706020324706, 0.587716619023, 0.478717061273, 0.393021669543, 0.330555063063, 0.285345396658),
)

#: float32 (plane, row, column)
CSF = np.array(_CSF_ROWS, np.float32).reshape(3, 8, 8)
CSF_Y, CSF_CB, CSF_CR = CSF

#: masking constant: the CSF times this, squared, is the PSNR-HVS-M masking table
MASK_SCALE = 0.3885746225901003


def _mask(csf: np.ndarray) -> np.ndarray:
    # (csf * k) * (csf * k) in double (csf is promoted), stored as float
    scaled = csf.astype(np.float64) * MASK_SCALE
    return (scaled * scaled).astype(np.float32)


MASK = _mask(CSF)
MASK_Y, MASK_CB, MASK_CR = MASK
