"""Problems of the Test Set for IVP Solvers (F. Mazzia, C. Magherini, Univ. of Bari, release
2.4, https://archimede.uniba.it/~testset/), written from its problem descriptions, with the
reference solutions at the final time that its `solut` routines publish (computed there
with RADAU5 in quadruple-like precision, rtol = atol = 1.1e-18).

Each problem: `vector_field(t, y)`, `y0`, `t1`, `reference`, the tolerances the comparison
uses (`atol` relative to `rtol`), and which components enter the scd (components whose
reference is below roundoff of the others are compared in absolute terms, as the test set
does for E5).
"""

import dataclasses
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Problem:
    name: str
    vector_field: Callable
    y0: np.ndarray
    t1: float
    reference: np.ndarray
    atol_over_rtol: float  # atol = rtol * atol_over_rtol
    absolute_floor: float = 0.0  # |reference| below this: absolute error instead of relative

    def scd(self, y_final) -> float:
        """Significant correct digits: -log10 of the largest relative error (mixed below
        `absolute_floor`)."""
        y_final = np.asarray(y_final)
        ref = self.reference
        denom = np.maximum(np.abs(ref), self.absolute_floor)
        denom = np.where(denom > 0, denom, 1.0)
        err = np.max(np.abs(y_final - ref) / denom)
        return float(-np.log10(max(err, 1e-300)))

    def mescd(self, y_final) -> float:
        """The test set's mixed-error significant correct digits,
        -log10 max_i |err_i| / (atol / rtol + |reference_i|)."""
        err = np.abs(np.asarray(y_final) - self.reference)
        return float(
            -np.log10(max(np.max(err / (self.atol_over_rtol + np.abs(self.reference))), 1e-300))
        )


def rober(t, y):
    """ROBER: Robertson's autocatalytic reaction, t in [0, 1e11]."""
    del t
    k1, k2, k3 = 0.04, 3e7, 1e4
    return jnp.stack(
        [
            -k1 * y[0] + k3 * y[1] * y[2],
            k1 * y[0] - k3 * y[1] * y[2] - k2 * y[1] ** 2,
            k2 * y[1] ** 2,
        ]
    )


def hires(t, y):
    """HIRES: high irradiance responses of photomorphogenesis, t in [0, 321.8122]."""
    del t
    return jnp.stack(
        [
            -1.71 * y[0] + 0.43 * y[1] + 8.32 * y[2] + 0.0007,
            1.71 * y[0] - 8.75 * y[1],
            -10.03 * y[2] + 0.43 * y[3] + 0.035 * y[4],
            8.32 * y[1] + 1.71 * y[2] - 1.12 * y[3],
            -1.745 * y[4] + 0.43 * y[5] + 0.43 * y[6],
            -280.0 * y[5] * y[7] + 0.69 * y[3] + 1.71 * y[4] - 0.43 * y[5] + 0.69 * y[6],
            280.0 * y[5] * y[7] - 1.81 * y[6],
            -280.0 * y[5] * y[7] + 1.81 * y[6],
        ]
    )


def orego(t, y):
    """OREGO: the Oregonator (Belousov–Zhabotinskii reaction), t in [0, 360]."""
    del t
    s, w, q = 77.27, 0.161, 8.375e-6
    return jnp.stack(
        [
            s * (y[1] - y[0] * y[1] + y[0] - q * y[0] ** 2),
            (-y[1] - y[0] * y[1] + y[2]) / s,
            w * (y[0] - y[2]),
        ]
    )


def e5(t, y):
    """E5: a chemical pyrolysis, t in [0, 1e13]."""
    del t
    a, b, c, m = 7.89e-10, 1.1e7, 1.13e3, 1e6
    return jnp.stack(
        [
            -a * y[0] - b * y[0] * y[2],
            a * y[0] - m * c * y[1] * y[2],
            a * y[0] - b * y[0] * y[2] - m * c * y[1] * y[2] + c * y[3],
            b * y[0] * y[2] - c * y[3],
        ]
    )


def vdpol(t, y):
    """VDPOL: van der Pol in the test set's scaled form, epsilon = 1e-6, t in [0, 2]."""
    del t
    eps = 1e-6
    return jnp.stack([y[1], ((1 - y[0] ** 2) * y[1] - y[0]) / eps])


_POLLU_K = np.array(
    [0.35, 0.266e2, 0.123e5, 0.86e-3, 0.82e-3, 0.15e5, 0.13e-3, 0.24e5, 0.165e5, 0.9e4,
     0.22e-1, 0.12e5, 0.188e1, 0.163e5, 0.48e7, 0.35e-3, 0.175e-1, 0.1e9, 0.444e12, 0.124e4,
     0.21e1, 0.578e1, 0.474e-1, 0.178e4, 0.312e1]
)  # fmt: skip


# Reactants of the 25 reactions (0-based species indices) and, per species, the reactions
# that produce (+) or consume (-) it, as in the problem description (1-based reactions).
_POLLU_REACTANTS = [(0,), (1, 3), (4, 1), (6,), (6,), (6, 5), (8,), (8, 5), (10, 1), (10, 0),
                    (12,), (9, 1), (13,), (0, 5), (2,), (3,), (3,), (15,), (15,), (16, 5),
                    (18,), (18,), (0, 3), (18, 0), (19,)]  # fmt: skip
_POLLU_TERMS = [
    [-1, -10, -14, -23, -24, 2, 3, 9, 11, 12, 22, 25],
    [-2, -3, -9, -12, 1, 21],
    [-15, 1, 17, 19, 22],
    [-2, -16, -17, -23, 15],
    [-3, 4, 4, 6, 7, 13, 20],
    [-6, -8, -14, -20, 3, 18, 18],
    [-4, -5, -6, 13],
    [4, 5, 6, 7],
    [-7, -8],
    [-12, 7, 9],
    [-9, -10, 8, 11],
    [9],
    [-11, 10],
    [-13, 12],
    [14],
    [-18, -19, 16],
    [-20],
    [20],
    [-21, -22, -24, 23, 25],
    [-25, 24],
]
_POLLU_S = np.zeros((20, 25))
for _species, _terms in enumerate(_POLLU_TERMS):
    for _term in _terms:
        _POLLU_S[_species, abs(_term) - 1] += np.sign(_term)
_POLLU_FIRST = np.array([r[0] for r in _POLLU_REACTANTS])
_POLLU_SECOND = np.array([r[-1] for r in _POLLU_REACTANTS])
_POLLU_BIMOLECULAR = np.array([len(r) == 2 for r in _POLLU_REACTANTS])


def pollu(t, y):
    """POLLU: the air-pollution model of Verwer (1994), 20 species, 25 reactions, t in [0, 60]."""
    del t
    rates = _POLLU_K * y[_POLLU_FIRST] * jnp.where(_POLLU_BIMOLECULAR, y[_POLLU_SECOND], 1.0)
    return jnp.asarray(_POLLU_S) @ rates


_POLLU_Y0 = np.zeros(20)
_POLLU_Y0[[1, 3, 6, 7, 8, 16]] = [0.2, 0.04, 0.1, 0.3, 0.01, 0.007]

PROBLEMS = {
    "rober": Problem(
        "rober",
        rober,
        np.array([1.0, 0.0, 0.0]),
        1e11,
        np.array([0.2083340149701255e-7, 0.8333360770334713e-13, 0.9999999791665050]),
        atol_over_rtol=1e-4,
        absolute_floor=0.0,
    ),
    "hires": Problem(
        "hires",
        hires,
        np.array([1.0, 0, 0, 0, 0, 0, 0, 0.0057]),
        321.8122,
        np.array(
            [
                0.7371312573325668e-3,
                0.1442485726316185e-3,
                0.5888729740967575e-4,
                0.1175651343283149e-2,
                0.2386356198831331e-2,
                0.6238968252742796e-2,
                0.2849998395185769e-2,
                0.2850001604814231e-2,
            ]
        ),  # fmt: skip
        atol_over_rtol=1e-4,
    ),
    "orego": Problem(
        "orego",
        orego,
        np.array([1.0, 2.0, 3.0]),
        360.0,
        np.array([0.1000814870318523e1, 0.1228178521549917e4, 0.1320554942846706e3]),
        atol_over_rtol=1e-2,
    ),
    "pollu": Problem(
        "pollu",
        pollu,
        _POLLU_Y0,
        60.0,
        np.array(
            [
                0.5646255480022769e-1,
                0.1342484130422339,
                0.4139734331099427e-8,
                0.5523140207484359e-2,
                0.2018977262302196e-6,
                0.1464541863493966e-6,
                0.7784249118997964e-1,
                0.3245075353396018,
                0.7494013383880406e-2,
                0.1622293157301561e-7,
                0.1135863833257075e-7,
                0.2230505975721359e-2,
                0.2087162882798630e-3,
                0.1396921016840158e-4,
                0.8964884856898295e-2,
                0.4352846369330103e-17,
                0.6899219696263405e-2,
                0.1007803037365946e-3,
                0.1772146513969984e-5,
                0.5682943292316392e-4,
            ]
        ),  # fmt: skip
        atol_over_rtol=1e-2,
    ),
    "e5": Problem(
        "e5",
        e5,
        np.array([1.76e-3, 0.0, 0.0, 0.0]),
        1e13,
        np.array([0.1152903278711829e-290, 0.8867655517642120e-22, 0.8854814626268838e-22, 0.0]),
        atol_over_rtol=1e-14,
        absolute_floor=1e-30,
    ),
    "vdpol": Problem(
        "vdpol",
        vdpol,
        np.array([2.0, 0.0]),
        2.0,
        np.array([0.1706167732170483e1, -0.8928097010247975]),
        atol_over_rtol=1.0,
    ),
}
