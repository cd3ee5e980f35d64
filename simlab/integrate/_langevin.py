r"""Langevin dynamics of a separable Hamiltonian by BAOAB splitting.

The thermostatted equations are, with diagonal masses $M$, friction $\gamma$ and
temperature $kT$ (energy units),

$$
dq = M^{-1} p\,dt, \qquad
dp = -\nabla V(q)\,dt - \gamma p\,dt + \sqrt{2 \gamma\, kT}\, M^{1/2}\,dW,
$$

whose invariant distribution is the Gibbs distribution $\propto e^{-H(q, p)/kT}$. BAOAB
(Leimkuhler & Matthews, Appl. Math. Res. Express 2013, 34–56) splits them into the kick
B, $p \leftarrow p - \tfrac h2 \nabla V(q)$, the drift A,
$q \leftarrow q + \tfrac h2 \nabla T(p)$, and the exact Ornstein–Uhlenbeck flow O of the
friction and noise, $p \leftarrow e^{-\gamma h} p + \sqrt{kT (1 - e^{-2\gamma h})}\,
M^{1/2} \xi$, taken as B A O A B. With $\gamma = 0$ the O step is the identity and the
step is velocity Verlet.

Models are asked only through the `LangevinSystem` protocol; the loop, the keys and the
step grid are those of the stochastic integrator (`simlab.integrate._sde`).
"""

from typing import Any, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
from jaxtyping import Array

from ._brownian import Increment
from ._sde import AbstractSDESolver
from ._symplectic import HamiltonianSystem


@runtime_checkable
class LangevinSystem(Protocol):
    """What BAOAB asks of a model: the separable Hamiltonian `system` it thermostats, the
    `friction` $\\gamma$ and the `temperature` $kT$, and `inverse_masses(p, args)`, the
    diagonal of $M^{-1}$ with the shape of the momenta `p`. Its noise is diagonal over the
    state `(q, p)`, the positions' part unused."""

    system: HamiltonianSystem
    friction: Array
    temperature: Array

    def inverse_masses(self, p: Array, args: Any) -> Array: ...


def is_langevin(model: Any) -> bool:
    """Whether `model` is a thermostatted Hamiltonian system (see `LangevinSystem`)."""
    return isinstance(model, LangevinSystem)


class BAOAB(AbstractSDESolver):
    r"""Leimkuhler and Matthews' BAOAB splitting for Langevin dynamics (see
    `simlab.models.Langevin`): kick, drift, exact friction and noise, drift, kick. Two force
    evaluations a step; strong order 1, weak order 2. Stable for
    $h\,\omega_{\max} < 2$ at any friction, as Verlet; on a harmonic potential the
    distribution of the positions is the exact Gibbs one at any stable step (the momenta's
    is not). Step $n$ draws $\xi = \Delta W_p / \sqrt h$, the momenta's part of the
    Brownian increment the stochastic integrator draws for step $n$ from the key.

    !!! example

        ```python
        oscillator = simlab.models.Pendulum(length=1.0)
        model = simlab.models.Langevin(oscillator, friction=1.0, temperature=0.1)
        path = simlab.simulate(model, jnp.array([0.0, 0.0]), jnp.linspace(0.0, 10.0, 11),
                               solver="baoab", key=jax.random.key(0), adaptive=False, dt0=0.05)
        ```
    """

    strong_order = 1.0
    weak_order = 2.0
    needs = "langevin"

    def refusal(self, model: Any) -> str | None:
        if is_langevin(model):
            return None
        return (
            f"BAOAB integrates Langevin dynamics of a Hamiltonian model; "
            f"{type(model).__name__} is not one: wrap a Hamiltonian model as "
            "simlab.models.Langevin(model, friction=..., temperature=...), or use "
            "solver='euler_maruyama'."
        )

    def step(self, model: Any, t: Array, y: Array, h: Array, draw: Increment, args: Any):
        q, p = jnp.split(y, 2)
        velocity = jax.grad(model.system.kinetic)
        gradient = jax.grad(model.system.potential)
        half = h / 2
        p = p - half * gradient(q, args)
        q = q + half * velocity(p, args)
        p = self.friction_and_noise(model, p, h, draw.dW[p.shape[0] :], args)
        q = q + half * velocity(p, args)
        return jnp.concatenate([q, p - half * gradient(q, args)])

    @staticmethod
    def friction_and_noise(model: Any, p: Array, h: Array, dW: Array, args: Any) -> Array:
        """The O step: the exact Ornstein–Uhlenbeck flow of the momenta over `h`, with
        $\\xi = $ `dW` $/\\sqrt h$. `expm1` keeps $1 - e^{-2\\gamma h}$ accurate for small
        $\\gamma h$ and exactly zero at $\\gamma = 0$; the amplitude is a product of square
        roots so that a zero factor leaves the others' derivatives finite."""
        friction, temperature = model.friction, model.temperature
        decay = -jnp.expm1(-2 * friction * h) / h
        masses_root = jax.lax.rsqrt(model.inverse_masses(p, args))
        amplitude = jnp.sqrt(temperature) * jnp.sqrt(decay) * masses_root
        return jnp.exp(-friction * h) * p + amplitude * dW
