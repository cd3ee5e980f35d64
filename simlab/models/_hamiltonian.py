r"""Hamiltonian models: the user writes energies, `jax.grad` gives the forces.

The state is the flat vector $(q, p)$, positions first, so every ODE tool (simulate with any
solver, fits, sweeps, plots) sees an ordinary state with named components; the symplectic
solvers of `simlab.integrate` step the separable ones, $H = T(p) + V(q)$.
"""

from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .. import _misc, kernels
from .._misc import as_count, is_concrete, nan_where
from ..integrate._symplectic import AbstractSymplecticSolver, scalar_energy
from ._base import AbstractODEModel, parameter

# Above this many coordinates the dense Hessians of the step estimate cost more than the solve
# is worth: no stability limit is estimated.
DENSE_HESSIAN_LIMIT = 1024
# dt0=None takes the step h with (h omega)^order = STEP_PHASE_ERROR, omega the fastest rate of
# the motion (`characteristic_frequency`): h omega = 0.1 for Verlet. On Kepler orbits of
# eccentricity up to 0.99 the relative energy error is then at most 2e-3 (Verlet), 5e-3
# (symplectic Euler), 1e-2 (Forest-Ruth), 5e-4 (McLachlan, Yoshida).
STEP_PHASE_ERROR = 0.01


class AbstractHamiltonianModel(AbstractODEModel):
    r"""A Hamiltonian system $\dot q = \partial H/\partial p$, $\dot p = -\partial H/\partial q$
    with the state $y = (q, p)$, positions first.

    Subclasses write energies only:

    - separable (`separable = True`, the default): `kinetic(p, args)` $T(p)$ and
      `potential(q, args)` $V(q)$, with $H = T + V$; the symplectic solvers
      (`"verlet"`, `"forest_ruth"`, `"mclachlan4"`, `"yoshida6"`, `"symplectic_euler"`)
      run these;
    - general (`separable = False`): `hamiltonian(q, p, args)`; ODE solvers run these.

    Calling the model gives the Hamiltonian vector field, so any ODE solver runs it too.
    `energy(y)` is $H$; `positions(y)` and `momenta(y)` split the state.

    With a symplectic solver and fixed steps, `max_stable_step` estimates the fastest
    oscillation $\omega_{\max}$ at `y0` from the Hessians, $\omega_{\max}^2$ the largest
    eigenvalue of $T''\,V''$ (for $T = p^2/2m$: $V''/m$), and `simulate` refuses a step with
    $h\,\omega_{\max}$ above the method's stability interval (2 for Verlet). `dt0=None`
    takes the `accurate_step` instead, $(h\omega)^{\text{order}} = 1/100$ with $\omega$ the
    `characteristic_frequency` (which counts the growth along saddle directions too, as the
    radial pull of an attracting centre): $h\omega = 0.1$ for Verlet. Both are estimates at
    `y0`: an orbit that later passes through stiffer regions (a close encounter) may need a
    shorter step, and a solve whose energy changes by more than
    `simlab.integrate.ENERGY_TOLERANCE` (10%) fails with `RESULTS.energy_drift`.

    !!! example

        ```python
        import jax.numpy as jnp
        import simlab

        model = simlab.models.Pendulum(length=1.0)
        ts = jnp.linspace(0.0, 10.0, 11)
        path = simlab.simulate(
            model, jnp.array([1.0, 0.0]), ts, solver="verlet", adaptive=False, dt0=0.01
        )
        path.ys.shape  # (11, 2)
        ```
    """

    separable: ClassVar[bool] = True
    step_limit: ClassVar[str] = "h·ω_max within the method's stability interval"

    def kinetic(self, p: Array, args: Any) -> Array:
        """The kinetic energy $T(p)$ of a separable model (a scalar)."""
        raise NotImplementedError(f"{type(self).__name__} is separable: define kinetic(p, args).")

    def potential(self, q: Array, args: Any) -> Array:
        """The potential energy $V(q)$ of a separable model (a scalar)."""
        raise NotImplementedError(f"{type(self).__name__} is separable: define potential(q, args).")

    def hamiltonian(self, q: Array, p: Array, args: Any) -> Array:
        """The total energy $H(q, p)$; $T(p) + V(q)$ for a separable model."""
        return self.kinetic(p, args) + self.potential(q, args)

    def positions(self, y: Array) -> Array:
        """The positions $q$: the first half of the state."""
        return jnp.split(y, 2, axis=-1)[0]

    def momenta(self, y: Array) -> Array:
        """The momenta $p$: the second half of the state."""
        return jnp.split(y, 2, axis=-1)[1]

    def energy(self, y: Array, args: Any = None) -> Array:
        """The total energy $H$ of the state `y` (or of each row of a trajectory's `ys`)."""
        if y.ndim > 1:
            return jax.vmap(lambda row: self.energy(row, args))(y)
        return self.hamiltonian(self.positions(y), self.momenta(y), args)

    def __call__(self, t, y, args):
        q, p = self.positions(y), self.momenta(y)
        if self.separable:
            dq = jax.grad(scalar_energy(self, "kinetic"))(p, args)
            dp = -jax.grad(scalar_energy(self, "potential"))(q, args)
        else:
            hamiltonian = scalar_energy(self, "hamiltonian")
            dH_dq, dH_dp = jax.grad(hamiltonian, argnums=(0, 1))(q, p, args)
            dq, dp = dH_dp, -dH_dq
        return jnp.concatenate([dq, dp])

    def max_stable_step(self, solver: Any, y0: Any) -> Array | None:
        if not self._estimates_steps(solver, y0):
            return None
        omega = fastest_frequency(self, jnp.asarray(y0))
        return jnp.where(omega > 0, solver.stability_interval / omega, jnp.inf)

    def accurate_step(self, solver: Any, y0: Any) -> Array | None:
        r"""The step $h$ with $(h\omega)^{\text{order}}$ = `STEP_PHASE_ERROR` (1/100) for
        `solver`, $\omega$ the `characteristic_frequency` at `y0`: the step `dt0=None`
        takes where it is below 0.9 times `max_stable_step`."""
        if not self._estimates_steps(solver, y0):
            return None
        omega = self.characteristic_frequency(jnp.asarray(y0))
        phase = STEP_PHASE_ERROR ** (1 / solver.order)
        return jnp.where(omega > 0, phase / jnp.where(omega > 0, omega, 1.0), jnp.inf)

    def characteristic_frequency(self, y: Array) -> Array:
        r"""The fastest rate of the motion through `y`: the square root of the largest
        $|\lambda|$ of $T''\,V''$ at `y` (`fastest_frequency` with `growth=True`), which
        counts saddle directions, as the radial pull of an attracting centre ($-2\mu/r^3$
        for Kepler), that `max_stable_step` leaves out. Models that know their orbits look
        further (`Kepler`: the perihelion). Not differentiated."""
        return fastest_frequency(self, y, growth=True)

    def _estimates_steps(self, solver: Any, y0: Any) -> bool:
        """Whether the step estimates apply: a separable model, a symplectic solver, and at
        most `DENSE_HESSIAN_LIMIT` coordinates."""
        symplectic = self.separable and isinstance(solver, AbstractSymplecticSolver)
        return symplectic and jnp.size(y0) // 2 <= DENSE_HESSIAN_LIMIT


@eqx.filter_jit  # one compilation per model structure, state shape and `growth`, also under jit
def fastest_frequency(
    model: AbstractHamiltonianModel, y: Array, args: Any = None, *, growth: bool = False
) -> Array:
    r"""$\omega_{\max}$ of a separable model linearised at `y`: the square root of the largest
    eigenvalue of $T''(p)\,V''(q)$, computed as that of the symmetric $S V'' S$ with
    $S = (T'')^{1/2}$. Negative eigenvalues (saddles: growth, not oscillation) give no
    stability limit; with `growth=True` they count by their magnitude, the rate at which
    nearby paths separate, which bounds the accuracy of a step. A threshold, not
    differentiated."""
    model, y = jax.lax.stop_gradient((model, y))
    q, p = model.positions(y), model.momenta(y)
    values, vectors = jnp.linalg.eigh(jax.hessian(scalar_energy(model, "kinetic"))(p, args))
    root = (vectors * jnp.sqrt(jnp.clip(values, 0.0))[None, :]) @ vectors.T
    curvature = jax.hessian(scalar_energy(model, "potential"))(q, args)
    squared = jnp.linalg.eigvalsh(root @ curvature @ root)
    fastest = jnp.maximum(squared[-1], -squared[0]) if growth else squared[-1]
    return jnp.sqrt(jnp.maximum(fastest, 0.0))


class Kepler(AbstractHamiltonianModel):
    r"""The reduced two-body (Kepler) problem in the plane,
    $H = \tfrac12 |p|^2 - \mu / |q|$, with $\mu = G(m_1 + m_2)$.

    Conserves the energy and the angular momentum $L = q_x p_y - q_y p_x$
    (`angular_momentum`). Started at perihelion $q = (1 - e, 0)$,
    $p = (0, \sqrt{\mu(1 + e)/(1 - e)})$ the orbit is an ellipse of semi-major axis 1 and
    eccentricity $e$, period $2\pi/\sqrt{\mu}$. The state is `(x, y, px, py)`; a start
    at the centre $q = 0$ is refused. With `dt0=None` a symplectic solver's step is set by
    the perihelion of the orbit through `y0`, wherever on it `y0` lies.

    !!! example

        ```python
        model = simlab.models.Kepler(mu=1.0)
        y0 = jnp.array([0.4, 0.0, 0.0, 2.0])  # perihelion, e = 0.6
        path = simlab.simulate(model, y0, jnp.linspace(0.0, 10.0, 11), solver="mclachlan4",
                               adaptive=False, dt0=0.01)
        model.angular_momentum(path.ys)  # 0.8 at every save time, to round-off
        ```
    """

    mu: Float[Array, ""] = parameter(lower=0.0, unit="length³/time²", default=1.0)

    state_names: ClassVar[tuple[str, ...]] = ("x", "y", "px", "py")

    def kinetic(self, p, args):
        return 0.5 * jnp.sum(p**2)

    def potential(self, q, args):
        return -self.mu / jnp.sqrt(jnp.sum(q**2))

    def angular_momentum(self, y: Array) -> Array:
        """$L = q_x p_y - q_y p_x$ (of each row of `ys`)."""
        return y[..., 0] * y[..., 3] - y[..., 1] * y[..., 2]

    def characteristic_frequency(self, y: Array) -> Array:
        r"""The larger of the general estimate at `y` and $\sqrt{2\mu/r_p^3}$ at the
        perihelion $r_p = L^2/\mu(1 + e)$ of the orbit through `y`, $e^2 = 1 + 2HL^2/\mu^2$
        (none for a radial orbit, $L = 0$, which falls into the centre)."""
        model, y = jax.lax.stop_gradient((self, y))
        momentum = model.angular_momentum(y)
        eccentricity = jnp.sqrt(jnp.maximum(1 + 2 * model.energy(y) * momentum**2 / model.mu**2, 0))
        perihelion = momentum**2 / (model.mu * (1 + eccentricity))
        safe = jnp.where(momentum != 0, perihelion, 1.0)
        at_perihelion = jnp.where(momentum != 0, jnp.sqrt(2 * model.mu / safe**3), 0.0)
        return jnp.maximum(super().characteristic_frequency(y), at_perihelion)

    def initial_state_valid(self, y0: Array) -> Array:
        at_centre = jnp.all(self.positions(y0) == 0)
        if is_concrete(at_centre) and at_centre:
            raise ValueError(
                "Kepler: the initial position is the centre (x, y) = (0, 0), where the "
                "potential -mu/|q| and the force are infinite; start at |q| > 0."
            )
        return ~at_centre


class HenonHeiles(AbstractHamiltonianModel):
    r"""The Hénon–Heiles system (1964), a star in a galactic potential:
    $H = \tfrac12(p_x^2 + p_y^2) + \tfrac12(x^2 + y^2) + x^2 y - y^3/3$.

    Regular below and mostly chaotic above the energy $1/8$; bounded for $H < 1/6$. The
    state is `(x, y, px, py)`.

    !!! example

        ```python
        model = simlab.models.HenonHeiles()
        y0 = jnp.array([0.0, 0.1, 0.45, 0.0])
        path = simlab.simulate(model, y0, jnp.linspace(0.0, 100.0, 101), solver="yoshida6",
                               adaptive=False, dt0=0.05)
        ```
    """

    state_names: ClassVar[tuple[str, ...]] = ("x", "y", "px", "py")

    def kinetic(self, p, args):
        return 0.5 * jnp.sum(p**2)

    def potential(self, q, args):
        x, y = q[0], q[1]
        return 0.5 * (x**2 + y**2) + x**2 * y - y**3 / 3


class Pendulum(AbstractHamiltonianModel):
    r"""A frictionless rigid pendulum, $H = \frac{p^2}{2 m L^2} - m g L \cos\theta$.

    Small oscillations have angular frequency $\sqrt{g/L}$. The state is
    `(angle, angular_momentum)`.

    !!! example

        ```python
        model = simlab.models.Pendulum(length=1.0)
        path = simlab.simulate(model, jnp.array([2.0, 0.0]), jnp.linspace(0.0, 10.0, 101),
                               solver="verlet", adaptive=False, dt0=0.01)
        ```
    """

    length: Float[Array, ""] = parameter(lower=0.0, unit="m")
    mass: Float[Array, ""] = parameter(lower=0.0, unit="kg", default=1.0)
    gravity: Float[Array, ""] = parameter(
        lower=0.0, lower_inclusive=True, unit="m/s²", default=9.81
    )

    state_names: ClassVar[tuple[str, ...]] = ("angle", "angular_momentum")
    state_units: ClassVar[tuple[str, ...]] = ("rad", "kg m²/s")

    def kinetic(self, p, args):
        return jnp.sum(p**2) / (2 * self.mass * self.length**2)

    def potential(self, q, args):
        return -self.mass * self.gravity * self.length * jnp.sum(jnp.cos(q))

    def characteristic_frequency(self, y: Array) -> Array:
        r"""$\sqrt{g/L}$, the small oscillations' frequency: the fastest that
        $\sqrt{g \cos\theta / L}$ reaches anywhere on the swing."""
        model = jax.lax.stop_gradient(self)
        return jnp.maximum(
            super().characteristic_frequency(y), jnp.sqrt(model.gravity / model.length)
        )


class FPUTChain(AbstractHamiltonianModel):
    r"""The α-Fermi–Pasta–Ulam–Tsingou chain: `num_masses` unit masses between fixed ends,
    joined by springs with a quadratic nonlinearity,

    $$
    H = \sum_{i=1}^{N} \frac{p_i^2}{2} + \sum_{i=0}^{N}
        \left(\frac{(q_{i+1} - q_i)^2}{2} + \frac{\alpha}{3} (q_{i+1} - q_i)^3\right),
    \quad q_0 = q_{N+1} = 0.
    $$

    Energy put into the lowest normal mode spreads to a few others and returns almost
    completely (the FPUT recurrence); `mode_energies` gives the harmonic energy of each
    mode. The state is `(q1, ..., qN, p1, ..., pN)`.

    !!! example

        ```python
        chain = simlab.models.FPUTChain(num_masses=16, alpha=0.25)
        sites = jnp.arange(1, 17)
        y0 = jnp.concatenate([jnp.sin(jnp.pi * sites / 17), jnp.zeros(16)])
        path = simlab.simulate(chain, y0, jnp.linspace(0.0, 100.0, 11), solver="verlet",
                               adaptive=False, dt0=0.1)
        chain.mode_energies(path.ys)  # (11, 16): the energy of each normal mode
        ```
    """

    num_masses: int = eqx.field(static=True)
    alpha: Float[Array, ""] = parameter(default=0.25)

    def __check_init__(self):
        as_count("FPUTChain: num_masses", self.num_masses)

    @property
    def state_names(self) -> tuple[str, ...]:
        indices = range(1, self.num_masses + 1)
        return (*(f"q{i}" for i in indices), *(f"p{i}" for i in indices))

    def kinetic(self, p, args):
        return 0.5 * jnp.sum(p**2)

    def potential(self, q, args):
        stretch = jnp.diff(jnp.pad(q, 1))
        return jnp.sum(stretch**2 / 2 + self.alpha * stretch**3 / 3)

    def mode_frequencies(self) -> Array:
        r"""$\omega_k = 2 \sin(k\pi / 2(N + 1))$, $k = 1 \dots N$, of the linear chain."""
        k = np.arange(1, self.num_masses + 1)
        return jnp.asarray(2 * np.sin(k * np.pi / (2 * (self.num_masses + 1))))

    def mode_shapes(self) -> Array:
        r"""The orthogonal, symmetric matrix $S_{kj} = \sqrt{2/(N+1)} \sin(jk\pi/(N+1))$ that
        takes positions (momenta) to normal-mode amplitudes $Q = S q$ ($P = S p$)."""
        n = self.num_masses
        index = np.arange(1, n + 1)
        return jnp.asarray(np.sqrt(2 / (n + 1)) * np.sin(np.outer(index, index) * np.pi / (n + 1)))

    def mode_energies(self, y: Array) -> Array:
        r"""$E_k = \tfrac12(P_k^2 + \omega_k^2 Q_k^2)$ of each normal mode (last axis), for a
        state or a trajectory's `ys`."""
        if y.ndim > 1:
            return jax.vmap(self.mode_energies)(y)
        shapes = self.mode_shapes()
        amplitudes = shapes @ self.positions(y)
        momenta = shapes @ self.momenta(y)
        return 0.5 * (momenta**2 + (self.mode_frequencies() * amplitudes) ** 2)


def _particle_state_names(names: tuple[str, ...], dimension: int) -> tuple[str, ...]:
    axes = "xyz"[:dimension]
    positions = tuple(f"{name}.{axis}" for name in names for axis in axes)
    momenta = tuple(f"{name}.p{axis}" for name in names for axis in axes)
    return positions + momenta


def _particle_kinetic(p: Array, masses: Array, dimension: int) -> Array:
    momenta = p.reshape(-1, dimension)
    return jnp.sum(momenta**2 / (2 * jnp.reshape(masses, (-1, 1))))


def _pair_mask(num_particles: int) -> Array:
    return ~jnp.eye(num_particles, dtype=bool)


# Hairer, Lubich & Wanner, Geometric Numerical Integration (2nd ed., Springer 2006), Sect.
# I.2.4: masses relative to the Sun (whose mass includes the inner planets), AU, days.
_OUTER_SOLAR_SYSTEM = {
    "names": ("Sun", "Jupiter", "Saturn", "Uranus", "Neptune", "Pluto"),
    "G": 2.95912208286e-4,
    "masses": (
        1.00000597682,
        0.000954786104043,
        0.000285583733151,
        0.0000437273164546,
        0.0000517759138449,
        1 / 1.3e8,
    ),
    "positions": (
        (0.0, 0.0, 0.0),
        (-3.5023653, -3.8169847, -1.5507963),
        (9.0755314, -3.0458353, -1.6483708),
        (8.3101420, -16.2901086, -7.2521278),
        (11.4707666, -25.7294829, -10.8169456),
        (-15.5387357, -25.2225594, -3.1902382),
    ),
    "velocities": (
        (0.0, 0.0, 0.0),
        (0.00565429, -0.00412490, -0.00190589),
        (0.00168318, 0.00483525, 0.00192462),
        (0.00354178, 0.00137102, 0.00055029),
        (0.00288930, 0.00114527, 0.00039677),
        (0.00276725, -0.00170702, -0.00136504),
    ),
}


class NBody(AbstractHamiltonianModel):
    r"""Gravitating point masses with Plummer softening $\varepsilon$:

    $$
    H = \sum_i \frac{|p_i|^2}{2 m_i}
        - G \sum_{i<j} \frac{m_i m_j}{\sqrt{|q_i - q_j|^2 + \varepsilon^2}}.
    $$

    `masses` (positive, one per body) fix the number of bodies; `dimension` is 2 or 3.
    Without softening, bodies that start at the same point are refused (their energy and
    force are infinite). Conserves energy, total momentum and angular momentum. The state
    is every body's position, then every body's momentum $m_i v_i$ (`"Jupiter.x"`, ...,
    `"Jupiter.px"`); `NBody.outer_solar_system()` gives the Sun and the five outer planets.

    !!! example

        ```python
        planets, y0 = simlab.models.NBody.outer_solar_system()
        path = simlab.simulate(planets, y0, jnp.linspace(0.0, 1e4, 11), solver="verlet",
                               adaptive=False, dt0=10.0)
        path.component("Jupiter.x")
        ```
    """

    masses: Float[Array, " bodies"] = parameter(lower=0.0, unit="mass")
    G: Float[Array, ""] = parameter(lower=0.0, default=1.0)
    softening: Float[Array, ""] = parameter(lower=0.0, lower_inclusive=True, default=0.0)
    dimension: int = eqx.field(static=True, default=3)
    names: tuple[str, ...] | None = eqx.field(static=True, default=None)

    presets: ClassVar[tuple[str, ...]] = ("outer_solar_system",)

    def __check_init__(self):
        if self.dimension not in (1, 2, 3):
            raise ValueError(f"NBody: dimension must be 1, 2 or 3; got {self.dimension}.")
        if jnp.ndim(self.masses) != 1:
            raise ValueError(
                f"NBody: masses must be a 1-D array, one per body; got shape "
                f"{jnp.shape(self.masses)}."
            )
        if self.names is not None and len(self.names) != jnp.shape(self.masses)[0]:
            raise ValueError(
                f"NBody: names has {len(self.names)} entries for {jnp.shape(self.masses)[0]} "
                "masses; give one name per body."
            )

    @property
    def num_bodies(self) -> int:
        return jnp.shape(self.masses)[0]

    @property
    def state_names(self) -> tuple[str, ...]:
        names = self.names or tuple(f"body{i}" for i in range(self.num_bodies))
        return _particle_state_names(names, self.dimension)

    def kinetic(self, p, args):
        return _particle_kinetic(p, self.masses, self.dimension)

    def potential(self, q, args):
        squared = self._squared_distances(q) + self.softening**2
        pairs = _pair_mask(self.num_bodies)
        inverse = jnp.where(pairs, jax.lax.rsqrt(jnp.where(pairs, squared, 1.0)), 0.0)
        return -0.5 * self.G * jnp.sum(jnp.outer(self.masses, self.masses) * inverse)

    def _squared_distances(self, q: Array) -> Array:
        x = q.reshape(self.num_bodies, self.dimension)
        return jnp.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)

    def initial_state_valid(self, y0: Array) -> Array:
        apart = self._squared_distances(self.positions(y0)) > 0
        coincident = ~apart & _pair_mask(self.num_bodies) & (self.softening == 0)
        if is_concrete(coincident) and np.any(coincident):
            first, second = np.argwhere(np.asarray(coincident))[0]
            names = self.names or tuple(f"body{i}" for i in range(self.num_bodies))
            raise ValueError(
                f"NBody: bodies {names[first]!r} and {names[second]!r} coincide at y0 with "
                "softening = 0, where their potential energy and the force between them are "
                "infinite; start them apart, or pass softening > 0."
            )
        return ~jnp.any(coincident)

    def total_momentum(self, y: Array) -> Array:
        """$\\sum_i p_i$, of shape `(dimension,)` (per row of `ys`)."""
        momenta = self.momenta(y)
        return jnp.sum(momenta.reshape(*momenta.shape[:-1], -1, self.dimension), axis=-2)

    @classmethod
    def outer_solar_system(cls) -> tuple["NBody", Array]:
        r"""The Sun and Jupiter, Saturn, Uranus, Neptune and Pluto, and their state on
        5 September 1994, from Hairer, Lubich and Wanner, *Geometric Numerical Integration*,
        Sect. I.2.4: masses relative to the Sun (its mass includes the inner planets),
        $G = 2.95912208286 \cdot 10^{-4}$, positions in AU, time in days.

        **Returns:** `(model, y0)`, with momenta $m_i v_i$.
        """
        data = _OUTER_SOLAR_SYSTEM
        masses = np.asarray(data["masses"])
        momenta = masses[:, None] * np.asarray(data["velocities"])
        model = cls(masses=masses, G=data["G"], dimension=3, names=data["names"])
        y0 = np.concatenate([np.ravel(data["positions"]), np.ravel(momenta)])
        return model, jnp.asarray(y0)


class LennardJones(AbstractHamiltonianModel):
    r"""`num_particles` particles of equal `mass` in a periodic box of side `box`, in
    `dimension` 2 or 3, interacting pairwise by the Lennard-Jones potential

    $$
    V = \sum_{i<j} 4\varepsilon\left[(\sigma/r_{ij})^{12} - (\sigma/r_{ij})^6\right],
    $$

    with $r_{ij}$ the minimum-image distance. With a `cutoff` $r_c \le$ `box`/2 the pair
    potential is truncated and shifted, $V(r) - V(r_c)$ for $r < r_c$ and 0 beyond, so the
    energy is continuous; without one every pair's nearest image counts. With a cutoff,
    `cells` ([`simlab.kernels.cell_grid`][]) sums over the pairs found through a cell list,
    $O(N)$ instead of $O(N^2)$ (a cell fuller than its capacity raises an error at run
    time; on a GPU or TPU it makes the distances NaN, and the solve then fails with a
    non-finite state). Positions may leave
    the box during a solve (the forces see only minimum images); `state(positions, momenta)`
    builds a starting state and checks that every particle lies inside the box.

    !!! example

        ```python
        model = simlab.models.LennardJones(num_particles=4, box=4.0, cutoff=2.0, dimension=2)
        positions = jnp.array([[0.5, 0.5], [2.5, 0.5], [0.5, 2.5], [2.5, 2.5]])
        y0 = model.state(positions, jnp.zeros((4, 2)))
        path = simlab.simulate(model, y0, jnp.linspace(0.0, 1.0, 11), solver="verlet",
                               adaptive=False, dt0=0.005)
        ```
    """

    num_particles: int = eqx.field(static=True)
    box: Float[Array, ""] = parameter(lower=0.0, unit="length")
    epsilon: Float[Array, ""] = parameter(lower=0.0, unit="energy", default=1.0)
    sigma: Float[Array, ""] = parameter(lower=0.0, unit="length", default=1.0)
    mass: Float[Array, ""] = parameter(lower=0.0, unit="mass", default=1.0)
    cutoff: float | None = eqx.field(static=True, default=None)
    dimension: int = eqx.field(static=True, default=3)
    cells: kernels.CellGrid | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.dimension not in (2, 3):
            raise ValueError(f"LennardJones: dimension must be 2 or 3; got {self.dimension}.")
        if self.num_particles < 2:
            raise ValueError(
                f"LennardJones: num_particles must be at least 2; got {self.num_particles}."
            )
        if self.cells is not None and self.cutoff is None:
            raise ValueError("LennardJones: cells need a cutoff; pass cutoff=... as well.")
        if self.cutoff is None or not is_concrete(self.box):
            return
        if self.cells is not None and float(self.box) / self.cells.per_side < self.cutoff:
            raise ValueError(
                f"LennardJones: cells of side {float(self.box) / self.cells.per_side:g} are "
                f"narrower than the cutoff {self.cutoff:g}; use simlab.kernels.cell_grid."
            )
        half_box = float(self.box) / 2
        if not 0 < self.cutoff <= half_box:
            raise ValueError(
                f"LennardJones: cutoff must lie in (0, box/2] = (0, {half_box:g}] for the "
                f"minimum-image convention (one image per pair); got {self.cutoff:g}. Use a "
                "smaller cutoff or a larger box."
            )

    @property
    def state_names(self) -> tuple[str, ...]:
        names = tuple(f"particle{i}" for i in range(self.num_particles))
        return _particle_state_names(names, self.dimension)

    def kinetic(self, p, args):
        return _particle_kinetic(
            p, jnp.broadcast_to(self.mass, (self.num_particles,)), self.dimension
        )

    def pair_potential(self, squared_distance: Array) -> Array:
        """$4\\varepsilon[(\\sigma/r)^{12} - (\\sigma/r)^6]$ of $r^2$, shifted to zero at the
        cutoff (and zero beyond it) where there is one."""

        def bare(squared):
            inverse_six = (self.sigma**2 / squared) ** 3
            return 4 * self.epsilon * (inverse_six**2 - inverse_six)

        if self.cutoff is None:
            return bare(squared_distance)
        inside = squared_distance < self.cutoff**2
        safe = jnp.where(inside, squared_distance, self.cutoff**2)
        return jnp.where(inside, bare(safe) - bare(jnp.asarray(self.cutoff**2, safe.dtype)), 0.0)

    def potential(self, q, args):
        x = q.reshape(self.num_particles, self.dimension)
        squared, pairs = self._squared_distances(x)
        energies = self.pair_potential(jnp.where(pairs, squared, 1.0))
        return 0.5 * jnp.sum(jnp.where(pairs, energies, 0.0))

    def _squared_distances(self, x: Array) -> tuple[Array, Array]:
        """Squared minimum-image distances and which entries are pairs: all pairs, or each
        particle's candidates from the cell list."""
        if self.cells is None:
            separation = x[:, None, :] - x[None, :, :]
            separation = separation - self.box * jnp.round(separation / self.box)
            return jnp.sum(separation**2, axis=-1), _pair_mask(self.num_particles)
        neighbours, overflow = kernels.cell_candidates(x, self.box, self.cells)
        squared, pairs = kernels.neighbour_squared_distances(x, neighbours, self.box)
        message = (
            f"LennardJones: a cell holds more than capacity={self.cells.capacity} particles; "
            "pass cells with a larger capacity."
        )
        if not _misc.checks_raise_in_program():  # NaN distances: the solve reports it
            return nan_where(overflow, squared), pairs
        return eqx.error_if(squared, overflow, message), pairs

    def state(self, positions: Any, momenta: Any) -> Array:
        """The flat state `(q, p)` from `positions` and `momenta` of shape
        `(num_particles, dimension)`; a ValueError names any particle outside the box
        $[0, \\text{box})^d$."""
        shape = (self.num_particles, self.dimension)
        positions, momenta = jnp.asarray(positions), jnp.asarray(momenta)
        for name, value in (("positions", positions), ("momenta", momenta)):
            if value.shape != shape:
                raise ValueError(
                    f"LennardJones.state: {name} must have shape {shape} "
                    f"(num_particles, dimension); got {value.shape}."
                )
        if is_concrete(positions) and is_concrete(self.box):
            outside = np.flatnonzero(
                np.any(
                    (np.asarray(positions) < 0) | (np.asarray(positions) >= float(self.box)), axis=1
                )
            )
            if outside.size:
                raise ValueError(
                    f"LennardJones.state: particles {outside[:8].tolist()} lie outside the "
                    f"periodic box [0, {float(self.box):g}) in some coordinate; wrap them "
                    "with positions % box."
                )
        return jnp.concatenate([positions.ravel(), momenta.ravel()])
