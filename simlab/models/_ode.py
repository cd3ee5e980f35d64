"""Textbook ODE models. Each is a final `eqx.Module`; parameters are array fields."""

from typing import Any, ClassVar

import jax.numpy as jnp
from jaxtyping import Array, Float

from ..integrate._solvers import largest_stable_step
from ._base import AbstractODEModel, parameter


class LotkaVolterra(AbstractODEModel):
    r"""Predator–prey dynamics of Lotka and Volterra.

    $$
    \begin{aligned}
    \dot x &= \alpha x - \beta x y, \\
    \dot y &= \delta x y - \gamma y,
    \end{aligned}
    $$

    with prey $x$ and predators $y$ (any consistent population unit, e.g. thousands).

    **Arguments** (all non-negative, rates per unit time; a zero rate switches a process off):

    - `alpha`: prey birth rate $\alpha \ge 0$.
    - `beta`: predation rate $\beta \ge 0$ (per predator).
    - `gamma`: predator death rate $\gamma \ge 0$.
    - `delta`: predator growth per prey eaten $\delta \ge 0$ (per prey).

    The state is `(prey, predator)`; not stiff.

    !!! example

        ```python
        model = simlab.models.LotkaVolterra(alpha=0.55, beta=0.028, gamma=0.84, delta=0.026)
        trajectory = simlab.simulate(model, jnp.array([30.0, 4.0]), jnp.linspace(0, 20, 100))
        ```
    """

    alpha: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/time")
    beta: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/(population·time)")
    gamma: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/time")
    delta: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/(population·time)")

    state_names: ClassVar[tuple[str, ...]] = ("prey", "predator")
    state_units: ClassVar[tuple[str, ...]] = ("population", "population")

    def __call__(self, t, y, args):
        prey, predator = y[0], y[1]
        return jnp.stack(
            [
                self.alpha * prey - self.beta * prey * predator,
                self.delta * prey * predator - self.gamma * predator,
            ]
        )


class Lorenz(AbstractODEModel):
    r"""The Lorenz convection model, chaotic for the classic $(10, 28, 8/3)$.

    $$
    \dot x = \sigma (y - x), \quad \dot y = x(\rho - z) - y, \quad \dot z = x y - \beta z.
    $$

    **Arguments** (dimensionless): `sigma` (Prandtl number $\sigma > 0$),
    `rho` (Rayleigh number ratio $\rho \ge 0$; $\rho = 0$ is no convection), `beta`
    (geometric factor $\beta > 0$).

    The state is `(x, y, z)`; not stiff.

    !!! example

        ```python
        model = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)
        trajectory = simlab.simulate(model, jnp.array([1.0, 1.0, 1.0]), jnp.linspace(0, 1, 50))
        ```
    """

    sigma: Float[Array, ""] = parameter(lower=0.0)
    rho: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True)  # 0: no convection
    beta: Float[Array, ""] = parameter(lower=0.0)

    state_names: ClassVar[tuple[str, ...]] = ("x", "y", "z")

    def __call__(self, t, y, args):
        x, y_, z = y[0], y[1], y[2]
        return jnp.stack([self.sigma * (y_ - x), x * (self.rho - z) - y_, x * y_ - self.beta * z])


class SIR(AbstractODEModel):
    r"""The Kermack–McKendrick epidemic model.

    $$
    \dot S = -\frac{\beta S I}{N}, \quad
    \dot I = \frac{\beta S I}{N} - \gamma I, \quad
    \dot R = \gamma I,
    $$

    with susceptible, infected and recovered counts in people; $S + I + R$ is conserved.

    **Arguments:**

    - `beta`: transmission rate $\beta \ge 0$, per day.
    - `gamma`: recovery rate $\gamma \ge 0$, per day ($R_0 = \beta/\gamma$).
    - `population`: total population $N > 0$, people.

    The state is `(S, I, R)`; not stiff.

    !!! example

        ```python
        model = simlab.models.SIR(beta=0.3, gamma=0.1, population=1000.0)
        y0 = jnp.array([990.0, 10.0, 0.0])
        trajectory = simlab.simulate(model, y0, jnp.linspace(0, 100, 101))
        ```
    """

    beta: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/day")
    gamma: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/day")
    population: Float[Array, ""] = parameter(lower=0.0, unit="people")

    state_names: ClassVar[tuple[str, ...]] = ("S", "I", "R")
    state_units: ClassVar[tuple[str, ...]] = ("people", "people", "people")

    def __call__(self, t, y, args):
        susceptible, infected = y[0], y[1]
        infections = self.beta * susceptible * infected / self.population
        recoveries = self.gamma * infected
        return jnp.stack([-infections, infections - recoveries, recoveries])


class DampedPendulum(AbstractODEModel):
    r"""A rigid pendulum with linear (viscous) damping.

    $$
    \dot\theta = \omega, \quad \dot\omega = -\frac{g}{L}\sin\theta - c\,\omega.
    $$

    **Arguments:**

    - `length`: $L > 0$, metres.
    - `damping`: $c \ge 0$, per second.
    - `gravity`: $g \ge 0$, metres per second squared (default 9.81).

    The state is `(angle, angular_velocity)` in radians and radians per second; not stiff.

    !!! example

        ```python
        model = simlab.models.DampedPendulum(length=1.0, damping=0.3)
        trajectory = simlab.simulate(model, jnp.array([1.0, 0.0]), jnp.linspace(0, 10, 200))
        ```
    """

    length: Float[Array, ""] = parameter(lower=0.0, unit="m")
    damping: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/s")
    gravity: Float[Array, ""] = parameter(
        lower=0.0, lower_inclusive=True, unit="m/s²", default=9.81
    )

    state_names: ClassVar[tuple[str, ...]] = ("angle", "angular_velocity")
    state_units: ClassVar[tuple[str, ...]] = ("rad", "rad/s")

    def __call__(self, t, y, args):
        angle, angular_velocity = y[0], y[1]
        angular_acceleration = (
            -(self.gravity / self.length) * jnp.sin(angle) - self.damping * angular_velocity
        )
        return jnp.stack([angular_velocity, angular_acceleration])


class VanDerPol(AbstractODEModel):
    r"""The Van der Pol relaxation oscillator.

    $$
    \dot x = y, \quad \dot y = \mu (1 - x^2) y - x.
    $$

    **Arguments:** `mu`, the nonlinearity $\mu \ge 0$ (dimensionless). The dynamics become
    stiff as $\mu$ grows: on the slow parts of the limit cycle (amplitude $a = 2$, or
    $|x_0|$ from farther out) the Jacobian has the eigenvalue $\mu(1 - a^2)$, which bounds an
    explicit solver's step (`max_stable_step`). The default solver follows from it as for
    grid models: explicit while the span takes an explicit solver few such steps (small
    $\mu$ or a short span), implicit beyond (`Trajectory.solver_choice` says why). Where
    $\mu$ is only known at run time (a traced parameter under `jit` or `vmap`) the model
    counts as stiff, so such a solve is implicit whatever $\mu$.

    The state is `(x, y)`.

    !!! example

        ```python
        model = simlab.models.VanDerPol(mu=1.0)
        trajectory = simlab.simulate(model, jnp.array([2.0, 0.0]), jnp.linspace(0, 10, 100))
        ```
    """

    mu: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True)

    state_names: ClassVar[tuple[str, ...]] = ("x", "y")
    stiff: ClassVar[bool] = True  # where the stable step is not known before run time
    step_limit: ClassVar[str] = "the stiffness mu (1 - a^2) of its limit cycle's slow parts"

    def __call__(self, t, y, args):
        x, y_ = y[0], y[1]
        return jnp.stack([y_, self.mu * (1 - x**2) * y_ - x])

    def max_stable_step(self, solver: Any, y0: Any) -> Array | None:
        r"""The largest stable fixed step of an explicit `solver` for the stiff eigenvalue
        $\mu(1 - a^2)$, $a = \max(2, |x_0|)$; `None` for implicit solvers."""
        amplitude = jnp.maximum(2.0, jnp.abs(jnp.asarray(y0)[0]))
        return largest_stable_step(solver, self.mu * (1 - amplitude**2))


class Robertson(AbstractODEModel):
    r"""Robertson's autocatalytic reaction, the classic stiff test problem.

    $$
    \begin{aligned}
    \dot y_1 &= -k_1 y_1 + k_3 y_2 y_3, \\
    \dot y_2 &= k_1 y_1 - k_2 y_2^2 - k_3 y_2 y_3, \\
    \dot y_3 &= k_2 y_2^2,
    \end{aligned}
    $$

    with concentrations $y_i$ (their sum is conserved). The rate constants span nine
    orders of magnitude, so the default solver is implicit.

    **Arguments:** `k1` $= 0.04$, `k2` $= 3\times10^7$, `k3` $= 10^4$ (all non-negative).

    !!! example

        ```python
        model = simlab.models.Robertson()
        trajectory = simlab.simulate(model, jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 40.0]))
        ```
    """

    k1: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, default=0.04)
    k2: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, default=3e7)
    k3: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, default=1e4)

    state_names: ClassVar[tuple[str, ...]] = ("y1", "y2", "y3")
    stiff: ClassVar[bool] = True

    def __call__(self, t, y, args):
        y1, y2, y3 = y[0], y[1], y[2]
        return jnp.stack(
            [
                -self.k1 * y1 + self.k3 * y2 * y3,
                self.k1 * y1 - self.k2 * y2**2 - self.k3 * y2 * y3,
                self.k2 * y2**2,
            ]
        )


class Brusselator(AbstractODEModel):
    r"""The Brusselator, Prigogine and Lefever's model of an autocatalytic oscillating reaction.

    $$
    \dot x = a - (b + 1)\,x + x^2 y, \qquad \dot y = b\,x - x^2 y,
    $$

    with dimensionless concentrations $x$, $y$ of the two intermediates. The one fixed point
    $(x^\ast, y^\ast) = (a, b/a)$ has Jacobian trace $b - 1 - a^2$ and determinant $a^2$: it
    is stable for $b < 1 + a^2$ and loses stability in a supercritical Hopf bifurcation at
    $b = 1 + a^2$, beyond which the concentrations oscillate on a limit cycle.

    **Arguments** (dimensionless, both positive): `a`, the feed of the first reactant
    $a > 0$; `b`, that of the second $b > 0$.

    The state is `(x, y)`; not stiff for moderate $a$, $b$.

    !!! example

        ```python
        model = simlab.models.Brusselator(a=1.0, b=3.0)  # past the Hopf point b = 2
        trajectory = simlab.simulate(model, jnp.array([1.0, 1.0]), jnp.linspace(0, 50, 500))
        ```
    """

    a: Float[Array, ""] = parameter(lower=0.0)
    b: Float[Array, ""] = parameter(lower=0.0)

    state_names: ClassVar[tuple[str, ...]] = ("x", "y")

    def __call__(self, t, y, args):
        x, y_ = y[0], y[1]
        autocatalysis = x**2 * y_
        return jnp.stack([self.a - (self.b + 1) * x + autocatalysis, self.b * x - autocatalysis])
