r"""Stochastic models: Itô SDEs $dy = f(t, y)\,dt + g(t, y)\,dW$ with named parameters."""

import abc
from typing import Any, ClassVar

import jax.numpy as jnp
import numpy as np
from jax.scipy.stats import norm
from jaxtyping import Array, Float

from ._base import AbstractODEModel, parameter


class AbstractSDEModel(AbstractODEModel):
    r"""An Itô SDE $dy = f(t, y)\,dt + g(t, y)\,dW$ with a named state.

    Subclasses implement `drift(t, y, args)` ($f$) and `diffusion(t, y, args)` ($g$) and
    declare the noise with class variables:

    - `noise`: `"diagonal"` (`diffusion` has the state's shape, one independent Brownian
      motion per component), `"scalar"` (the state's shape, one Brownian motion for all)
      or `"general"` (a `(state, noise)` matrix $G$, $dy = \dots + G\,dW$);
    - `additive = True` where `diffusion` does not depend on `y` (SRA1 then reaches
      strong order 1.5); `simulate`, `sweep` and `expectation` refuse the declaration
      where `diffusion`'s derivative in `y` at `y0` is not zero.

    Calling the model gives the drift, so the deterministic tools (steady states, the
    vector-field checks) see the noise-free dynamics; `simulate` needs a `key`.

    !!! example

        ```python
        import jax
        import jax.numpy as jnp
        import simlab

        model = simlab.models.OrnsteinUhlenbeck(theta=1.0, mu=0.0, sigma=0.5)
        ts = jnp.linspace(0.0, 5.0, 11)
        path = simlab.simulate(
            model, jnp.array([1.0]), ts, key=jax.random.key(0), adaptive=False, dt0=0.01
        )
        path.ys.shape  # (11, 1)
        ```
    """

    noise: ClassVar[str] = "diagonal"
    additive: ClassVar[bool] = False

    @abc.abstractmethod
    def drift(self, t: Any, y: Array, args: Any) -> Array:
        """The drift $f(t, y)$, with the state's shape."""

    @abc.abstractmethod
    def diffusion(self, t: Any, y: Array, args: Any) -> Array:
        """The diffusion $g(t, y)$: the state's shape, or `(state, noise)` for general noise."""

    def __call__(self, t, y, args):
        return self.drift(t, y, args)


class OrnsteinUhlenbeck(AbstractSDEModel):
    r"""The Ornstein–Uhlenbeck process, $dx = \theta(\mu - x)\,dt + \sigma\,dW$.

    Mean reversion at rate $\theta > 0$ to the level $\mu$; stationary distribution
    $N(\mu, \sigma^2 / 2\theta)$. Additive noise. The state is `(x,)`. Its transition
    density is known exactly (`transition_log_density`), so `fit` uses it.
    """

    theta: Float[Array, ""] = parameter(lower=0.0, unit="1/time")
    mu: Float[Array, ""] = parameter()
    sigma: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/sqrt(time)")

    state_names: ClassVar[tuple[str, ...]] = ("x",)
    additive: ClassVar[bool] = True

    def drift(self, t, y, args):
        return self.theta * (self.mu - y)

    def diffusion(self, t, y, args):
        return jnp.broadcast_to(self.sigma, y.shape)

    def transition_log_density(self, t, y, t_next, y_next, args):
        r"""$\log p(y_{t'} \mid y_t)$: Gaussian, mean $\mu + (y_t - \mu) e^{-\theta\Delta}$,
        variance $\sigma^2 (1 - e^{-2\theta\Delta}) / 2\theta$, $\Delta = t' - t$."""
        dt = t_next - t
        mean = self.mu + (y - self.mu) * jnp.exp(-self.theta * dt)
        variance = self.sigma**2 * -jnp.expm1(-2 * self.theta * dt) / (2 * self.theta)
        return jnp.sum(norm.logpdf(y_next, mean, jnp.sqrt(variance)))


class GeometricBrownianMotion(AbstractSDEModel):
    r"""Geometric Brownian motion, $dS = \mu S\,dt + \sigma S\,dW$ (Black–Scholes).

    Exact solution $S_t = S_0 \exp((\mu - \sigma^2/2) t + \sigma W_t)$, so
    $E[S_t] = S_0 e^{\mu t}$. Diagonal noise. The state is `(S,)`. Its transition density
    is known exactly (`transition_log_density`), so `fit` uses it.
    """

    mu: Float[Array, ""] = parameter(unit="1/time")
    sigma: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/sqrt(time)")

    state_names: ClassVar[tuple[str, ...]] = ("S",)

    def drift(self, t, y, args):
        return self.mu * y

    def diffusion(self, t, y, args):
        return self.sigma * y

    def transition_log_density(self, t, y, t_next, y_next, args):
        r"""$\log p(S_{t'} \mid S_t)$: log-normal, $\log S_{t'} \sim N(\log S_t + (\mu -
        \sigma^2/2)\Delta, \sigma^2 \Delta)$, $\Delta = t' - t$ (positive states only)."""
        dt = t_next - t
        log_ratio = jnp.log(y_next) - jnp.log(y)
        spread = self.sigma * jnp.sqrt(dt)
        log_density = norm.logpdf(log_ratio, (self.mu - self.sigma**2 / 2) * dt, spread)
        return jnp.sum(log_density - jnp.log(y_next))


class DoubleWell(AbstractSDEModel):
    r"""Overdamped Langevin dynamics in the double well $U(x) = x^4/4 - x^2/2$:
    $dx = (x - x^3)\,dt + \sqrt{2D}\,dW$.

    Wells at $x = \pm 1$, barrier $\Delta U = 1/4$ at $x = 0$; at small noise $D$ the
    escape rate follows Kramers' formula $r = \frac{\sqrt{2}}{2\pi} e^{-\Delta U / D}$.
    Stationary density $\propto e^{-U(x)/D}$. Additive noise. The state is `(x,)`.
    """

    D: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True)

    state_names: ClassVar[tuple[str, ...]] = ("x",)
    additive: ClassVar[bool] = True

    def drift(self, t, y, args):
        return y - y**3

    def diffusion(self, t, y, args):
        return jnp.broadcast_to(jnp.sqrt(2 * self.D), y.shape)

    @staticmethod
    def potential(x):
        """$U(x) = x^4/4 - x^2/2$."""
        return x**4 / 4 - x**2 / 2

    def kramers_rate(self) -> float:
        r"""Kramers' escape rate over the barrier,
        $r = \frac{\sqrt{U''(-1)\,|U''(0)|}}{2\pi} e^{-\Delta U / D}
        = \frac{\sqrt 2}{2\pi} e^{-1/4D}$: the leading order as $D \to 0$."""
        return float(np.sqrt(2.0) / (2 * np.pi) * np.exp(-0.25 / float(self.D)))

    def mean_first_passage_time(self, start: float, end: float, num_points: int = 20001) -> float:
        r"""The exact mean time for a path started at `start` to first reach `end > start`,

        $$
        T = \frac1D \int_{\text{start}}^{\text{end}} e^{U(y)/D}
        \int_{-\infty}^{y} e^{-U(z)/D}\,dz\,dy,
        $$

        by the trapezoidal rule on about `num_points` points in float64 (NumPy), from where
        $e^{-U/D}$ is below $e^{-40}$ of its peak. At small $D$ it tends to $1/r$
        (`kramers_rate`) for `start` in the left well and `end` past the barrier.

        !!! example

            ```python
            import simlab

            well = simlab.models.DoubleWell(D=0.1)
            well.mean_first_passage_time(-1.0, 1.0)  # 66.3; 1 / kramers_rate() is 54.1
            ```
        """
        D = float(self.D)
        if not (D > 0 and end > start):
            raise ValueError(
                f"mean_first_passage_time needs D > 0 and end > start; got D = {D}, "
                f"start = {start}, end = {end}."
            )
        # U(z) - U(-1) = (z^2 - 1)^2 / 4 reaches 40 D at z^2 = 1 + sqrt(160 D).
        lowest = min(start, -np.sqrt(1 + np.sqrt(160 * D)))
        half = num_points // 2  # points below `start`, then from `start` to `end`
        z = np.concatenate(
            [np.linspace(lowest, start, half, endpoint=False), np.linspace(start, end, half + 1)]
        )
        exponent = -self.potential(z) / D
        weight = np.exp(exponent - exponent.max())
        steps = np.diff(z) * (weight[1:] + weight[:-1]) / 2
        inner = np.concatenate([[0.0], np.cumsum(steps)])  # the integral from `lowest` to z
        outer = np.exp(exponent.max() - exponent) * inner  # e^{U/D} times the true integral
        return float(np.trapezoid(outer[half:], z[half:]) / D)


class StochasticLorenz(AbstractSDEModel):
    r"""The Lorenz system with additive noise of strength $s$ on every component:
    $dx = \sigma(y - x)\,dt + s\,dW_1$, $dy = (x(\rho - z) - y)\,dt + s\,dW_2$,
    $dz = (xy - \beta z)\,dt + s\,dW_3$. The state is `(x, y, z)`.
    """

    sigma: Float[Array, ""] = parameter(lower=0.0)
    rho: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True)
    beta: Float[Array, ""] = parameter(lower=0.0)
    noise_strength: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True)

    state_names: ClassVar[tuple[str, ...]] = ("x", "y", "z")
    additive: ClassVar[bool] = True

    def drift(self, t, y, args):
        x, v, z = y[0], y[1], y[2]
        return jnp.stack([self.sigma * (v - x), x * (self.rho - z) - v, x * v - self.beta * z])

    def diffusion(self, t, y, args):
        return jnp.broadcast_to(self.noise_strength, y.shape)


class StochasticSIR(AbstractSDEModel):
    r"""The chemical Langevin SIR epidemic: demographic noise of the infection and recovery
    events (counts in people, population $N$):

    $$
    \begin{aligned}
    dS &= -a\,dt - \sqrt{a}\,dW_1, \\
    dI &= (a - b)\,dt + \sqrt{a}\,dW_1 - \sqrt{b}\,dW_2, \\
    dR &= b\,dt + \sqrt{b}\,dW_2,
    \end{aligned}
    \qquad a = \frac{\beta S I}{N},\ b = \gamma I,
    $$

    the diffusion approximation of the Markov jump process, whose mean follows
    [`simlab.models.SIR`][] and whose relative fluctuations shrink as $1/\sqrt{N}$. Rates
    are clipped at zero where a path crosses $I = 0$. General noise (one Brownian motion
    per reaction); $S + I + R$ is conserved on every path. The state is `(S, I, R)`.
    """

    beta: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/day")
    gamma: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/day")
    population: Float[Array, ""] = parameter(lower=0.0, unit="people")

    state_names: ClassVar[tuple[str, ...]] = ("S", "I", "R")
    state_units: ClassVar[tuple[str, ...]] = ("people", "people", "people")
    noise: ClassVar[str] = "general"

    def _rates(self, y):
        infections = self.beta * y[0] * y[1] / self.population
        return jnp.maximum(infections, 0.0), jnp.maximum(self.gamma * y[1], 0.0)

    def drift(self, t, y, args):
        infections, recoveries = self._rates(y)
        return jnp.stack([-infections, infections - recoveries, recoveries])

    def diffusion(self, t, y, args):
        infections, recoveries = (jnp.sqrt(rate) for rate in self._rates(y))
        zero = jnp.zeros_like(infections)
        return jnp.stack(
            [
                jnp.stack([-infections, zero]),
                jnp.stack([infections, -recoveries]),
                jnp.stack([zero, recoveries]),
            ]
        )


class StochasticFitzHughNagumo(AbstractSDEModel):
    r"""The FitzHugh–Nagumo neuron with additive noise on the voltage:

    $$
    dv = (v - v^3/3 - w + I)\,dt + s\,dW, \qquad dw = \varepsilon (v + a - b w)\,dt.
    $$

    Below the firing threshold of the current $I$, noise alone makes the neuron spike
    (coherence resonance). Additive noise; the state is `(v, w)`.
    """

    current: Float[Array, ""] = parameter()
    a: Float[Array, ""] = parameter()
    b: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True)
    epsilon: Float[Array, ""] = parameter(lower=0.0)
    noise_strength: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True)

    state_names: ClassVar[tuple[str, ...]] = ("v", "w")
    additive: ClassVar[bool] = True

    def drift(self, t, y, args):
        v, w = y[0], y[1]
        return jnp.stack(
            [v - v**3 / 3 - w + self.current, self.epsilon * (v + self.a - self.b * w)]
        )

    def diffusion(self, t, y, args):
        return jnp.stack([self.noise_strength, jnp.zeros_like(self.noise_strength)])
