r"""A Langevin thermostat: a separable Hamiltonian model with friction and noise at a
temperature, an SDE whose invariant distribution is the Gibbs one."""

from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._misc import is_concrete
from ..integrate._langevin import BAOAB
from ..integrate._symplectic import Verlet, is_hamiltonian
from ._base import parameter
from ._hamiltonian import AbstractHamiltonianModel
from ._sde import AbstractSDEModel

# Relative agreement asked of T(p) and its gradient with the quadratic form of the masses
# read at unit momenta: round-off in float32 passes, a quartic or coupled kinetic energy fails.
QUADRATIC_TOLERANCE = 1e-5


class Langevin(AbstractSDEModel):
    r"""The Langevin dynamics of a separable Hamiltonian model `system`,
    $H = T(p) + V(q)$ with $T = \sum_i p_i^2 / 2 m_i$:

    $$
    dq = M^{-1} p\,dt, \qquad
    dp = -\nabla V(q)\,dt - \gamma p\,dt + \sqrt{2 \gamma\, kT}\, M^{1/2}\,dW,
    $$

    with the `friction` $\gamma \ge 0$ (per unit time) and the `temperature` $kT \ge 0$ in
    the units of the energy. Samples the Gibbs distribution $\propto e^{-H/kT}$: positions
    from $e^{-V/kT}$, each momentum $N(0, m_i kT)$. `solver="baoab"` (the default for this
    model) integrates it by Leimkuhler and Matthews' splitting; any stochastic solver runs
    it (the noise is additive and diagonal, zero on the positions).

    The masses are read from the kinetic energy, $1/m_i = \partial T/\partial p_i$ at unit
    momenta, which holds for a kinetic energy $\sum_i p_i^2 / 2 m_i$ with constant masses
    (every library model's); where the system's parameters are known at construction the
    kinetic energy is checked to be of that form, and a model whose kinetic energy is not
    (or a non-separable one) is refused. The state is the system's, $(q, p)$.

    !!! example

        ```python
        import jax
        import jax.numpy as jnp
        import simlab

        pendulum = simlab.models.Pendulum(length=1.0)
        model = simlab.models.Langevin(pendulum, friction=1.0, temperature=0.5)
        keys = jax.random.split(jax.random.key(0), 256)
        ends = jax.vmap(
            lambda key: simlab.simulate(model, jnp.array([0.0, 0.0]), jnp.array([0.0, 10.0]),
                                        key=key, adaptive=False, dt0=0.05).ys[-1]
        )(keys)
        ends[:, 1].var()  # about m L^2 kT = 0.5
        ```
    """

    system: AbstractHamiltonianModel
    friction: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="1/time")
    temperature: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, unit="energy")

    additive: ClassVar[bool] = True
    step_limit: ClassVar[str] = "h·ω_max below 2, BAOAB's stability interval as Verlet's"

    def __check_init__(self):
        name = type(self.system).__name__
        if not is_hamiltonian(self.system):
            raise ValueError(
                f"Langevin thermostats a Hamiltonian model (a simlab.models."
                f"AbstractHamiltonianModel with kinetic and potential energies); got {name}."
            )
        if not self.system.separable:
            raise ValueError(
                f"Langevin needs a separable Hamiltonian H = T(p) + V(q) with "
                f"T = sum p_i^2 / 2 m_i; {name} declares separable = False: write its "
                "energy as kinetic plus potential."
            )
        if all(is_concrete(leaf) for leaf in jax.tree.leaves(self.system)):
            _check_quadratic_kinetic(self.system, self.system.state_shape[0] // 2)

    @property
    def state_names(self) -> tuple[str, ...]:
        return self.system.state_names

    @property
    def state_units(self) -> tuple[str, ...]:
        return self.system.state_units

    def inverse_masses(self, p: Array, args: Any) -> Array:
        """$1/m_i$, the diagonal of $M^{-1}$, with the shape and dtype of the momenta `p`."""
        return jax.grad(self.system.kinetic)(jnp.ones_like(p), args)

    def drift(self, t, y, args):
        q_rate, p_rate = jnp.split(self.system(t, y, args), 2)
        return jnp.concatenate([q_rate, p_rate - self.friction * self.system.momenta(y)])

    def diffusion(self, t, y, args):
        p = self.system.momenta(y)
        amplitude = jnp.sqrt(2 * self.friction * self.temperature / self.inverse_masses(p, args))
        return jnp.concatenate([jnp.zeros_like(p), amplitude])

    def parameters_in_range(self) -> Array:
        return super().parameters_in_range() & self.system.parameters_in_range()

    def max_stable_step(self, solver: Any, y0: Any) -> Array | None:
        if not isinstance(solver, BAOAB):
            return None
        # BAOAB is stable on a harmonic potential exactly where Verlet is, at any friction.
        return self.system.max_stable_step(Verlet(), y0)


@eqx.filter_jit  # one compilation per system structure, instead of one per eager operation
def _kinetic_probe(system: AbstractHamiltonianModel, probe: Array) -> tuple[Array, Array, Array]:
    """$\\partial T/\\partial p$ at unit momenta; $T$ and $\\partial T/\\partial p$ at `probe`."""
    energy, velocity = jax.value_and_grad(system.kinetic)(probe, None)
    return jax.grad(system.kinetic)(jnp.ones_like(probe), None), energy, velocity


def _check_quadratic_kinetic(system: AbstractHamiltonianModel, size: int) -> None:
    """A ValueError unless `system.kinetic` is $\\sum_i p_i^2 / 2 m_i$ with positive masses,
    checked at one uneven momentum against the masses read at unit momenta."""
    name = type(system).__name__
    probe = np.linspace(0.5, 1.5, size)
    inverse, energy, velocity = (np.asarray(x) for x in _kinetic_probe(system, jnp.asarray(probe)))
    if not np.all(inverse > 0):
        raise ValueError(
            f"Langevin needs positive masses; {name}'s kinetic energy gives 1/m = "
            f"{inverse if inverse.size < 8 else 'an array'} with zero or negative entries."
        )
    quadratic = 0.5 * float(np.sum(inverse * probe**2))
    if not (
        np.isclose(energy, quadratic, rtol=QUADRATIC_TOLERANCE, atol=0.0)
        and np.allclose(velocity, inverse * probe, rtol=QUADRATIC_TOLERANCE, atol=0.0)
    ):
        raise ValueError(
            f"Langevin reads the masses from a kinetic energy T = sum p_i^2 / 2 m_i with "
            f"constant masses; {name}.kinetic is not of that form (T(p) = {float(energy):.6g} "
            f"at an uneven p, where the masses give {quadratic:.6g}): write the kinetic energy as "
            "such a sum, or use an SDE model of your own with solver='euler_maruyama'."
        )
