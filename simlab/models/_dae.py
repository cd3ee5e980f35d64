r"""Differential-algebraic models $M \dot y = f(t, y)$ with a constant, singular mass matrix.

`AbstractDAEModel` names its algebraic components (rows of $M$ that are zero, equations
$0 = f_i(t, y)$); the library models are index 1, which `rodas5p` and `radau5` solve.
"""

import math
from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import Array, Float

from .._misc import is_concrete
from ._base import AbstractODEModel, parameter


class AbstractDAEModel(AbstractODEModel):
    r"""A model $M \dot y = f(t, y)$ whose mass matrix is singular: differential-algebraic.

    Subclasses set `state_names` and `algebraic_names`, the components whose equations are
    algebraic ($0 = f_i(t, y)$). The mass matrix is then diagonal, 1 for the differential
    components and 0 for the algebraic ones; override `mass_matrix` for another constant
    one (e.g. capacitances coupling two node voltages). The system must be of index 1:
    the Jacobian of the algebraic equations with respect to the algebraic components must
    be invertible (the solvers check this at $t_0$ and fail with
    `RESULTS.singular_algebraic_jacobian` otherwise).

    `simulate` picks `rodas5p` for these models and, before the first step, solves the
    algebraic components of `y0` given the differential ones (see the DAE page).
    """

    algebraic_names: ClassVar[tuple[str, ...]] = ()
    stiff: ClassVar[bool] = True

    @property
    def mass_matrix(self) -> Float[Array, " n"] | Float[Array, "n n"]:
        unknown = [name for name in self.algebraic_names if name not in self.state_names]
        if unknown:
            raise ValueError(
                f"{type(self).__name__}.algebraic_names {unknown} are not state components; "
                f"the components are {list(self.state_names)}."
            )
        return jnp.array(
            [0.0 if name in self.algebraic_names else 1.0 for name in self.state_names]
        )


class RobertsonDAE(AbstractDAEModel):
    r"""Robertson's autocatalytic reaction with mass conservation as an algebraic equation.

    $$
    \begin{aligned}
    \dot y_1 &= -k_1 y_1 + k_3 y_2 y_3, \\
    \dot y_2 &= k_1 y_1 - k_2 y_2^2 - k_3 y_2 y_3, \\
    0 &= y_1 + y_2 + y_3 - 1,
    \end{aligned}
    $$

    the index-1 form of [`simlab.models.Robertson`][] (Hairer–Wanner, Solving ODEs II,
    VI.1): its solution is that of the ODE from a state with $y_1 + y_2 + y_3 = 1$.

    **Arguments:** `k1` $= 0.04$, `k2` $= 3\times10^7$, `k3` $= 10^4$ (all non-negative).

    The state is `(y1, y2, y3)`; `y3` is algebraic.

    !!! example

        ```python
        model = simlab.models.RobertsonDAE()
        trajectory = simlab.simulate(model, jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 40.0]))
        ```
    """

    k1: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, default=0.04)
    k2: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, default=3e7)
    k3: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, default=1e4)

    state_names: ClassVar[tuple[str, ...]] = ("y1", "y2", "y3")
    algebraic_names: ClassVar[tuple[str, ...]] = ("y3",)

    def __call__(self, t, y, args):
        y1, y2, y3 = y[0], y[1], y[2]
        return jnp.stack(
            [
                -self.k1 * y1 + self.k3 * y2 * y3,
                self.k1 * y1 - self.k2 * y2**2 - self.k3 * y2 * y3,
                y1 + y2 + y3 - 1.0,
            ]
        )


class PendulumDAE(AbstractDAEModel):
    r"""A pendulum in Cartesian coordinates with its rod tension as an algebraic unknown,
    in index-1 form.

    A unit point mass at $(x, y)$ ($y$ up) on a rod of length $L$ with tension $\lambda$
    per unit mass and length:

    $$
    \begin{aligned}
    \dot x &= u, \quad \dot y = v, \quad \dot u = -\lambda x, \quad \dot v = -\lambda y - g, \\
    0 &= u^2 + v^2 - g y - \lambda (x^2 + y^2),
    \end{aligned}
    $$

    the position constraint $x^2 + y^2 = L^2$ differentiated twice, so that it involves
    $\lambda$ (index 1). The constraint itself then holds up to the integration error
    where the start is on it, with $x u + y v = 0$ (its first derivative): `simulate`
    refuses a velocity with a component along the rod, $|x u + y v|$ above
    $\sqrt{\epsilon}\,|(x, y)|\,|(u, v)|$ ($\epsilon$ the machine epsilon), which would
    change the rod's length in proportion to time. The length enters through the initial
    state only.

    **Arguments:** `gravity`: $g \ge 0$, metres per second squared (default 9.81).

    The state is `(x, y, u, v, tension)`; `tension` is algebraic.

    !!! example

        ```python
        model = simlab.models.PendulumDAE()
        y0 = jnp.array([1.0, 0.0, 0.0, 0.0, 0.0])  # horizontal, at rest; tension solved
        trajectory = simlab.simulate(model, y0, jnp.linspace(0.0, 1.0, 11))
        ```
    """

    gravity: Float[Array, ""] = parameter(
        lower=0.0, lower_inclusive=True, unit="m/s²", default=9.81
    )

    state_names: ClassVar[tuple[str, ...]] = ("x", "y", "u", "v", "tension")
    state_units: ClassVar[tuple[str, ...]] = ("m", "m", "m/s", "m/s", "1/s²")
    algebraic_names: ClassVar[tuple[str, ...]] = ("tension",)

    def initial_state_valid(self, y0: Array) -> Array:
        x, y, u, v = y0[0], y0[1], y0[2], y0[3]
        radial = x * u + y * v
        scale = jnp.sqrt((x**2 + y**2) * (u**2 + v**2))
        along = jnp.abs(radial) > jnp.sqrt(jnp.finfo(y0.dtype).eps) * scale
        if is_concrete(along) and along:
            raise ValueError(
                f"PendulumDAE: the initial velocity (u, v) = ({float(u):g}, {float(v):g}) has "
                f"a component along the rod: x u + y v = {float(radial):.6g} (0 on the "
                "constraint x^2 + y^2 = L^2). The index-1 form would change the rod's "
                "length in proportion to time; start with a velocity perpendicular to "
                "(x, y), e.g. (u, v) = w (-y, x)."
            )
        return ~along

    def __call__(self, t, y, args):
        x, y_, u, v, tension = y[0], y[1], y[2], y[3], y[4]
        return jnp.stack(
            [
                u,
                v,
                -tension * x,
                -tension * y_ - self.gravity,
                u**2 + v**2 - self.gravity * y_ - tension * (x**2 + y_**2),
            ]
        )


class RLCCircuit(AbstractDAEModel):
    r"""A series resistor–inductor–capacitor circuit driven by a constant source voltage.

    $$
    C\,\dot v_C = i, \qquad L\,\dot i = v_L, \qquad 0 = V - R\,i - v_C - v_L,
    $$

    Kirchhoff's voltage law as the algebraic equation for the inductor's voltage $v_L$;
    the mass matrix is $\mathrm{diag}(C, L, 0)$. From rest the capacitor charges to $V$
    with damping rate $R/(2L)$ and natural frequency $1/\sqrt{LC}$.

    **Arguments:**

    - `resistance`: $R \ge 0$, ohms.
    - `inductance`: $L > 0$, henries.
    - `capacitance`: $C > 0$, farads.
    - `voltage`: the source voltage $V$, volts (default 1).

    The state is `(capacitor_voltage, current, inductor_voltage)`; the last is algebraic.

    !!! example

        ```python
        model = simlab.models.RLCCircuit(resistance=1.0, inductance=1.0, capacitance=0.25)
        trajectory = simlab.simulate(model, jnp.zeros(3), jnp.linspace(0.0, 10.0, 101))
        ```
    """

    resistance: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="Ω")
    inductance: Float[Array, ""] = parameter(lower=0.0, unit="H")
    capacitance: Float[Array, ""] = parameter(lower=0.0, unit="F")
    voltage: Float[Array, ""] = parameter(unit="V", default=1.0)

    state_names: ClassVar[tuple[str, ...]] = ("capacitor_voltage", "current", "inductor_voltage")
    state_units: ClassVar[tuple[str, ...]] = ("V", "A", "V")
    algebraic_names: ClassVar[tuple[str, ...]] = ("inductor_voltage",)

    @property
    def mass_matrix(self) -> Float[Array, " 3"]:
        return jnp.stack([self.capacitance, self.inductance, jnp.zeros_like(self.inductance)])

    def __call__(self, t, y, args):
        capacitor_voltage, current, inductor_voltage = y[0], y[1], y[2]
        kirchhoff = self.voltage - self.resistance * current - capacitor_voltage - inductor_voltage
        return jnp.stack([current, inductor_voltage, kirchhoff])


class TransistorAmplifier(AbstractDAEModel):
    r"""The two-stage transistor amplifier of the Test Set for IVP Solvers (`transamp`,
    Mazzia and Magherini, Univ. of Bari; Hairer–Wanner, Solving ODEs II, VI.1).

    Eight node voltages $U_1, \dots, U_8$ obey Kirchhoff's current law,
    $M \dot U = f(t, U)$ with

    $$
    \begin{aligned}
    f_1 &= (U_1 - U_e(t))/R_0, &
    f_2 &= U_2/R_1 + (U_2 - U_b)/R_2 + (1 - \alpha)\, g(U_2 - U_3), \\
    f_3 &= U_3/R_3 - g(U_2 - U_3), &
    f_4 &= (U_4 - U_b)/R_4 + \alpha\, g(U_2 - U_3), \\
    f_5 &= U_5/R_5 + (U_5 - U_b)/R_6 + (1 - \alpha)\, g(U_5 - U_6), &
    f_6 &= U_6/R_7 - g(U_5 - U_6), \\
    f_7 &= (U_7 - U_b)/R_8 + \alpha\, g(U_5 - U_6), &
    f_8 &= U_8/R_9,
    \end{aligned}
    $$

    the transistor current $g(u) = \beta (e^{u/U_F} - 1)$, the input $U_e(t) = 0.1 \sin(200
    \pi t)$ and a mass matrix of rank 5: the capacitors $C_1, C_3, C_5$ couple the pairs
    $(U_1, U_2)$, $(U_4, U_5)$, $(U_7, U_8)$ (blocks $C_k [\begin{smallmatrix}-1 & 1 \\ 1 &
    -1\end{smallmatrix}]$) and $C_2, C_4$ ground $U_3$, $U_6$ ($-C_k$ on the diagonal).
    Index 1. The test set's consistent initial state is `initial_state()`; its reference
    solution at $t = 0.2$ (PSIDE, tolerances $10^{-14}$) is `REFERENCE_AT_0_2`.

    **Arguments** (defaults of the test set): `supply_voltage` $U_b = 6$ V,
    `thermal_voltage` $U_F = 0.026$ V, `current_gain` $\alpha = 0.99$,
    `saturation_current` $\beta = 10^{-6}$ A, the resistances `r0`, ..., `r9` (ohms;
    $R_0 = 1000$, the others 9000) and the capacitances `c1`, ..., `c5` (farads;
    $C_k = k \cdot 10^{-6}$).

    The state is `(U1, ..., U8)` in volts.

    !!! example

        ```python
        model = simlab.models.TransistorAmplifier()
        ts = jnp.linspace(0.0, 0.01, 11)
        trajectory = simlab.simulate(model, model.initial_state(), ts, rtol=1e-4, atol=1e-4)
        ```
    """

    supply_voltage: Float[Array, ""] = parameter(lower=0.0, unit="V", default=6.0)
    thermal_voltage: Float[Array, ""] = parameter(lower=0.0, unit="V", default=0.026)
    current_gain: Float[Array, ""] = parameter(lower=0.0, upper=1.0, default=0.99)
    saturation_current: Float[Array, ""] = parameter(lower=0.0, unit="A", default=1e-6)
    r0: Float[Array, ""] = parameter(lower=0.0, unit="Ω", default=1000.0)
    r1: Float[Array, ""] = parameter(lower=0.0, unit="Ω", default=9000.0)
    r2: Float[Array, ""] = parameter(lower=0.0, unit="Ω", default=9000.0)
    r3: Float[Array, ""] = parameter(lower=0.0, unit="Ω", default=9000.0)
    r4: Float[Array, ""] = parameter(lower=0.0, unit="Ω", default=9000.0)
    r5: Float[Array, ""] = parameter(lower=0.0, unit="Ω", default=9000.0)
    r6: Float[Array, ""] = parameter(lower=0.0, unit="Ω", default=9000.0)
    r7: Float[Array, ""] = parameter(lower=0.0, unit="Ω", default=9000.0)
    r8: Float[Array, ""] = parameter(lower=0.0, unit="Ω", default=9000.0)
    r9: Float[Array, ""] = parameter(lower=0.0, unit="Ω", default=9000.0)
    c1: Float[Array, ""] = parameter(lower=0.0, unit="F", default=1e-6)
    c2: Float[Array, ""] = parameter(lower=0.0, unit="F", default=2e-6)
    c3: Float[Array, ""] = parameter(lower=0.0, unit="F", default=3e-6)
    c4: Float[Array, ""] = parameter(lower=0.0, unit="F", default=4e-6)
    c5: Float[Array, ""] = parameter(lower=0.0, unit="F", default=5e-6)

    state_names: ClassVar[tuple[str, ...]] = tuple(f"U{i}" for i in range(1, 9))
    state_units: ClassVar[tuple[str, ...]] = ("V",) * 8
    # The test set's solut routine: t = 0.2, computed with PSIDE at rtol = atol = 1e-14.
    REFERENCE_AT_0_2: ClassVar[tuple[float, ...]] = (
        -0.5562145012262709e-002,
        0.3006522471903042e001,
        0.2849958788608128e001,
        0.2926422536206241e001,
        0.2704617865010554e001,
        0.2761837778393145e001,
        0.4770927631616772e001,
        0.1236995868091548e001,
    )

    def initial_state(self) -> Float[Array, " 8"]:
        """The test set's consistent initial state: the circuit at rest with $U_e = 0$."""
        ub = self.supply_voltage
        first = ub / (self.r2 / self.r1 + 1.0)
        second = ub / (self.r6 / self.r5 + 1.0)
        zero = jnp.zeros_like(ub)
        return jnp.stack([zero, first, first, ub, second, second, ub, zero])

    @property
    def mass_matrix(self) -> Float[Array, "8 8"]:
        dtype = self.c1.dtype
        pair = jnp.array([[-1.0, 1.0], [1.0, -1.0]], dtype)
        mass = jnp.zeros((8, 8), dtype)
        mass = mass.at[0:2, 0:2].set(self.c1 * pair).at[2, 2].set(-self.c2)
        mass = mass.at[3:5, 3:5].set(self.c3 * pair).at[5, 5].set(-self.c4)
        return mass.at[6:8, 6:8].set(self.c5 * pair)

    def __call__(self, t, y, args):
        ub, uf, alpha = self.supply_voltage, self.thermal_voltage, self.current_gain
        source = 0.1 * jnp.sin(200.0 * math.pi * t)
        first = self.saturation_current * jnp.expm1((y[1] - y[2]) / uf)
        second = self.saturation_current * jnp.expm1((y[4] - y[5]) / uf)
        return jnp.stack(
            [
                (y[0] - source) / self.r0,
                y[1] / self.r1 + (y[1] - ub) / self.r2 + (1.0 - alpha) * first,
                y[2] / self.r3 - first,
                (y[3] - ub) / self.r4 + alpha * first,
                y[4] / self.r5 + (y[4] - ub) / self.r6 + (1.0 - alpha) * second,
                y[5] / self.r7 - second,
                (y[6] - ub) / self.r8 + alpha * second,
                y[7] / self.r9,
            ]
        )
