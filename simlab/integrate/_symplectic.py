r"""Symplectic splitting methods for separable Hamiltonians $H(q, p) = T(p) + V(q)$.

Every method here is one composition of two exact flows: the *drift*
$q \leftarrow q + a\,h\,\partial T/\partial p$ and the *kick*
$p \leftarrow p - b\,h\,\partial V/\partial q$. A method is its coefficients
$a_1, b_1, a_2, b_2, \dots, b_s, a_{s+1}$ (`AbstractSymplecticSolver.step` runs them all),
so a new method is a new row of numbers, not a new loop. Each composition of exact flows
of Hamiltonians is symplectic: the energy error stays bounded over exponentially long times
instead of drifting, as it does for Runge–Kutta methods.

Models are asked only through the `HamiltonianSystem` protocol (`kinetic`, `potential`,
`separable`); forces come from `jax.grad` of the energies.

A fixed step can still be too long for where the path goes (a close encounter, a fall
through a singularity of the potential): a solve whose energy at some save time differs
from its energy at `t0` by more than `ENERGY_TOLERANCE` (relative) fails with
`RESULTS.energy_drift`, a status, so under `jit` and `vmap` too.
"""

import functools
from typing import Any, ClassVar, Protocol, runtime_checkable

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._results import RESULTS
from ._interface import AbstractIntegrator, Problem, Solution
from ._loops import repeat_step

# A symplectic solve fails (`RESULTS.energy_drift`) where its energy at a save time differs
# from that at t0 by more than this, relative to |H(t0)|, or to KINETIC_RANGE_SHARE times the
# range of the kinetic energy over the save times where that is larger (an energy near zero,
# which an additive constant in the potential can make it). Errors that large come from steps
# too long for the motion; the step dt0=None takes keeps them near 1e-3.
ENERGY_TOLERANCE = 0.1
KINETIC_RANGE_SHARE = 0.1


@runtime_checkable
class HamiltonianSystem(Protocol):
    """What the symplectic integrator asks of a model: `separable` (whether
    $H = T(p) + V(q)$), the kinetic energy `kinetic(p, args)` and the potential energy
    `potential(q, args)`, scalars whose gradients are the velocities and minus the forces.
    The state is the flat vector `(q, p)`, positions first."""

    separable: bool

    def kinetic(self, p: Array, args: Any) -> Array: ...

    def potential(self, q: Array, args: Any) -> Array: ...


def scalar_energy(model: Any, name: str) -> Any:
    """The energy method `name` of `model` ("kinetic", "potential" or "hamiltonian"), as a
    function that refuses a value that is not a scalar by name and shape (where `jax.grad`
    would only say that its output is not a scalar)."""
    energy = getattr(model, name)

    def checked(*inputs):
        value = energy(*inputs)
        if jnp.shape(value) != ():
            raise ValueError(
                f"{type(model).__name__}.{name} returns shape {jnp.shape(value)}; an energy "
                "must be a scalar (shape ()): sum over the components, e.g. "
                "return 0.5 * jnp.sum(p**2)."
            )
        return value

    return checked


def is_hamiltonian(model: Any) -> bool:
    """Whether `model` is a Hamiltonian system (has energies and says whether it is separable)."""
    return isinstance(model, HamiltonianSystem)


def verlet_composition(weights: tuple[float, ...]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The drift and kick coefficients of Störmer–Verlet steps of sizes `weights` (times
    $h$) taken in turn, each a half drift, a kick, a half drift: the half drifts that meet
    merge, so $s$ Verlet steps cost $s$ force evaluations."""
    drifts = [weights[0] / 2]
    drifts += [(left + right) / 2 for left, right in zip(weights[:-1], weights[1:], strict=True)]
    return (*drifts, weights[-1] / 2), tuple(weights)


_STABILITY_SCAN = np.linspace(1e-3, 8.0, 8000)


def _oscillator_trace(drifts: tuple[float, ...], kicks: tuple[float, ...], x: float) -> float:
    """The trace of the one-step map of $H = p^2/2 + q^2/2$ with step $x$."""
    step = np.eye(2)
    for index, drift in enumerate(drifts):
        step = np.array([[1.0, drift * x], [0.0, 1.0]]) @ step
        if index < len(kicks):
            step = np.array([[1.0, 0.0], [-kicks[index] * x, 1.0]]) @ step
    return float(np.trace(step))


@functools.cache
def _stability_interval(drifts: tuple[float, ...], kicks: tuple[float, ...]) -> float:
    r"""The largest $x = h\omega$ up to which the method is stable on the harmonic oscillator
    $H = p^2/2 + \omega^2 q^2/2$: its one-step map is a $2\times2$ matrix of determinant 1,
    bounded over many steps while $|\mathrm{tr}| < 2$. A scan finds the first unstable
    step, bisection its edge."""
    stable = [abs(_oscillator_trace(drifts, kicks, x)) < 2.0 for x in _STABILITY_SCAN]
    if all(stable):
        return np.inf
    first = stable.index(False)
    below, above = (_STABILITY_SCAN[first - 1] if first else 0.0), _STABILITY_SCAN[first]
    for _ in range(50):
        middle = 0.5 * (below + above)
        if abs(_oscillator_trace(drifts, kicks, middle)) < 2.0:
            below = middle
        else:
            above = middle
    return float(below)


class AbstractSymplecticSolver(eqx.Module):
    r"""A fixed-step splitting method: `drifts` $a_1 \dots a_{s+1}$ and `kicks`
    $b_1 \dots b_s$, taken as $a_1, b_1, a_2, \dots, b_s, a_{s+1}$ (zero coefficients
    are skipped), and its `order`.

    `stability_interval` is the largest $h\omega$ at which it stays stable on a harmonic
    oscillator of frequency $\omega$ (2 for Störmer–Verlet); `symmetric` methods
    (palindromic coefficients) are time-reversible: flipping the momenta and stepping on
    retraces the path.
    """

    order: ClassVar[int]
    drifts: ClassVar[tuple[float, ...]]
    kicks: ClassVar[tuple[float, ...]]

    @property
    def stability_interval(self) -> float:
        return _stability_interval(self.drifts, self.kicks)

    @property
    def symmetric(self) -> bool:
        return np.allclose(self.drifts, self.drifts[::-1]) and np.allclose(
            self.kicks, self.kicks[::-1]
        )

    def step(self, model: HamiltonianSystem, y: Array, h: Array, args: Any) -> Array:
        """One step of size `h` from the flat state `y = (q, p)`."""
        q, p = jnp.split(y, 2)
        velocity = jax.grad(scalar_energy(model, "kinetic"))
        gradient = jax.grad(scalar_energy(model, "potential"))
        for index, drift in enumerate(self.drifts):
            if drift != 0:
                q = q + (drift * h) * velocity(p, args)
            if index < len(self.kicks) and self.kicks[index] != 0:
                p = p - (self.kicks[index] * h) * gradient(q, args)
        return jnp.concatenate([q, p])


class SymplecticEuler(AbstractSymplecticSolver):
    r"""Symplectic Euler, $q_{n+1} = q_n + h\,T'(p_n)$, $p_{n+1} = p_n - h\,V'(q_{n+1})$:
    order 1, one force evaluation a step, not symmetric."""

    order = 1
    drifts = (1.0, 0.0)
    kicks = (1.0,)


class Verlet(AbstractSymplecticSolver):
    r"""Störmer–Verlet (leapfrog) in its position form, half drift, kick, half drift:
    order 2, one force evaluation a step, symmetric; stable for $h\omega < 2$. (Velocity
    Verlet is the other form, half kick, drift, half kick, of the same order and stability.)"""

    order = 2
    drifts, kicks = verlet_composition((1.0,))


_FOREST_RUTH = 1 / (2 - 2 ** (1 / 3))


class ForestRuth(AbstractSymplecticSolver):
    r"""Forest–Ruth (Yoshida's fourth-order triple jump, 1990): Verlet steps of
    $\theta h, (1 - 2\theta) h, \theta h$ with $\theta = 1/(2 - 2^{1/3})$; order 4, three
    force evaluations a step, symmetric."""

    order = 4
    drifts, kicks = verlet_composition((_FOREST_RUTH, 1 - 2 * _FOREST_RUTH, _FOREST_RUTH))


class McLachlan4(AbstractSymplecticSolver):
    r"""McLachlan and Atela's optimised four-stage fourth-order method (Nonlinearity 5,
    541–562, 1992), with the coefficients SUNDIALS ARKODE tabulates as
    `ARKODE_SPRK_MCLACHLAN_4_4` (a kick first, a drift last): order 4, four force
    evaluations a step, an error constant much smaller than Forest–Ruth's. Not symmetric."""

    order = 4
    drifts = (
        0.0,
        0.515352837431122936,
        -0.085782019412973646,
        0.441583023616466524,
        0.128846158365384185,
    )
    kicks = (
        0.134496199277431089,
        -0.224819803079420806,
        0.756320000515668291,
        0.33400360328632142,
    )


# Yoshida (Phys. Lett. A 150, 262, 1990), sixth order, solution A: w1, w2, w3; w0 = 1 - 2 Σ.
_YOSHIDA_6 = (-1.17767998417887, 0.235573213359357, 0.784513610477560)
_YOSHIDA_6_CENTRE = 1 - 2 * sum(_YOSHIDA_6)


class Yoshida6(AbstractSymplecticSolver):
    r"""Yoshida's sixth-order composition (solution A, Phys. Lett. A 150, 262, 1990): seven
    Verlet steps of $w_3, w_2, w_1, w_0, w_1, w_2, w_3$ times $h$; order 6, seven force
    evaluations a step, symmetric."""

    order = 6
    drifts, kicks = verlet_composition((*_YOSHIDA_6[::-1], _YOSHIDA_6_CENTRE, *_YOSHIDA_6))


def _steps(solver: AbstractSymplecticSolver, model, y: Array, h: Array, args, count) -> Array:
    """`count` steps of size `h` from `y` in a plain loop (no stored states)."""
    return lax.fori_loop(0, count, lambda _, y: solver.step(model, y, h, args), y)


@eqx.filter_custom_vjp
def reversible_steps(inputs, solver: AbstractSymplecticSolver, count) -> Array:
    """`count` steps of a symmetric `solver` from `inputs = (y, model, args, h)`, whose
    reverse mode rebuilds each step's input by a step of `-h` (the exact inverse of a
    symmetric method, up to round-off) instead of storing it: memory independent of
    `count`, at the price of one more step per step on the backward pass."""
    y, model, args, h = inputs
    return _steps(solver, model, y, h, args, count)


@reversible_steps.def_fwd
def _reversible_forward(perturbed, inputs, solver, count):
    end = reversible_steps.fn(inputs, solver, count)
    return end, end


@reversible_steps.def_bwd
def _reversible_backward(end, cotangent, perturbed, inputs, solver, count):
    _, model, args, h = inputs

    def step(inputs):
        y, model, args, h = inputs
        return solver.step(model, y, h, args)

    def back(_, carry):
        # `gradients` holds the cotangent of the state, then those summed over the steps
        # so far of the model, `args` and `h`.
        y, gradients = carry
        before = solver.step(model, y, -h, args)
        _, vjp = eqx.filter_vjp(step, (before, model, args, h))
        ((cotangent, *parameters),) = vjp(gradients[0])
        return before, (cotangent, *jax.tree.map(jnp.add, gradients[1:], tuple(parameters)))

    zeros = jax.tree.map(jnp.zeros_like, eqx.filter((model, args, h), eqx.is_inexact_array))
    _, gradients = lax.fori_loop(0, count, back, (end, (cotangent, *zeros)))
    return gradients


@eqx.filter_jit  # one compilation per model structure, method, step counts and adjoint
def symplectic_solve(
    model: HamiltonianSystem,
    solver: AbstractSymplecticSolver,
    ts: Array,
    y0: Array,
    args: Any,
    *,
    steps_per_interval: Any,
    max_steps: int,
    reversible: bool = False,
    forward: bool = False,
) -> Array:
    """The states at `ts` of a fixed-step symplectic solve, taking `steps_per_interval`
    equal steps in each save interval (`fixed_steps_per_interval`: a Python int, or one
    count per interval), so every save time lies on the grid. `reversible`: reverse mode
    rebuilds the states backwards from each saved one (`reversible_steps`) instead of
    storing or checkpointing them. `forward`: differentiable in forward mode (`jax.jvp`,
    `jax.jacfwd`) also where the step counts are traced, whose loop is otherwise
    checkpointed for reverse mode only."""
    counts = jnp.broadcast_to(jnp.asarray(steps_per_interval), (ts.shape[0] - 1,))
    static = isinstance(steps_per_interval, int)

    def interval(y, bounds):
        t_start, t_end, count = bounds
        h = (t_end - t_start) / count.astype(ts.dtype)
        count = steps_per_interval if static else count

        def step(_, y):
            return solver.step(model, y, h, args)

        if reversible:
            # A traced count stops at `max_steps`, as the other loops' bound does.
            bounded = count if static else jnp.minimum(count, max_steps)
            y = reversible_steps((y, model, args, h), solver, bounded)
        else:
            kind = "lax" if forward else "checkpointed"
            y = repeat_step(step, count, y, max_steps=max_steps, kind=kind)
        return y, y

    _, ys = lax.scan(interval, y0, (ts[:-1], ts[1:], counts))
    return jnp.concatenate([y0[None], ys])


def check_symplectic_inputs(model: Any, solver: AbstractSymplecticSolver, adjoint: Any) -> None:
    """A ValueError, naming what to do, unless `model` is a separable Hamiltonian system
    (and, for `adjoint="reversible"`, `solver` is symmetric)."""
    name, method = type(model).__name__, type(solver).__name__
    if adjoint == "reversible" and not solver.symmetric:
        raise ValueError(
            f"adjoint='reversible' rebuilds states by stepping backwards, which only a "
            f"symmetric method does exactly; {method} is not symmetric: pass "
            "solver='verlet', 'forest_ruth' or 'yoshida6', or adjoint=None."
        )
    if not is_hamiltonian(model):
        raise ValueError(
            f"{method} integrates Hamiltonian models (kinetic and potential energies, e.g. a "
            f"simlab.models.AbstractHamiltonianModel); {name} is not one: use an ODE solver "
            "such as solver='tsit5'."
        )
    if not model.separable:
        raise ValueError(
            f"{method} is a splitting method for separable Hamiltonians H = T(p) + V(q); "
            f"{name} declares separable = False: use an ODE solver such as solver='dopri8' "
            "(or write H as kinetic plus potential energy)."
        )


def energy_error(model: HamiltonianSystem, ys: Array, args: Any) -> Array:
    """The largest change of the energy from `ys[0]` over the saved states `ys`, relative
    to |H| at `ys[0]`, or to `KINETIC_RANGE_SHARE` times the range of the kinetic energy
    over `ys` where that is larger (NaN where an energy is not finite). A check, not
    differentiated."""
    ys = lax.stop_gradient(ys)
    q, p = jnp.split(ys, 2, axis=-1)
    kinetic = jax.vmap(scalar_energy(model, "kinetic"), in_axes=(0, None))(p, args)
    potential = jax.vmap(scalar_energy(model, "potential"), in_axes=(0, None))(q, args)
    energy = kinetic + potential
    exchanged = KINETIC_RANGE_SHARE * (jnp.max(kinetic) - jnp.min(kinetic))
    scale = jnp.maximum(jnp.abs(energy[0]), exchanged)
    change = jnp.max(jnp.abs(energy - energy[0]))
    return jnp.where(change == 0, 0.0, change / scale)


def energy_status(error: Array, ys: Array) -> RESULTS:
    """`RESULTS.energy_drift` where the energy error exceeds `ENERGY_TOLERANCE`, or is not
    finite while the states are (an energy infinite at `y0`); non-finite states are left
    to `simulate`'s check, which names them."""
    finite = jnp.all(jnp.isfinite(ys))
    drifted = finite & ~(error <= ENERGY_TOLERANCE)
    return RESULTS.where(drifted, RESULTS.energy_drift, RESULTS.successful)


class SymplecticIntegrator(AbstractIntegrator):
    """Fixed-step symplectic splitting methods on separable Hamiltonian models. The solve
    fails with `RESULTS.energy_drift` where the energy changes by more than
    `ENERGY_TOLERANCE` (see `energy_error`, which `stats["energy_error"]` reports)."""

    name = "symplectic"
    runs = (
        "symplectic splitting methods ('symplectic_euler', 'verlet', 'forest_ruth', "
        "'mclachlan4', 'yoshida6')"
    )
    exclusive = True
    adaptive_steps = False
    events_advice = (
        ", nor does any symplectic solver: for a Hamiltonian model with an event pass an "
        "explicit solver that locates events, such as solver='dopri8' (it keeps the energy "
        "to the tolerances rtol, atol, not by construction), or simulate without event= and "
        "find the crossing in trajectory.ys"
    )
    adjoints = (None, "checkpoint", "forward", "reversible")

    def accepts_solver(self, solver: Any) -> bool:
        return isinstance(solver, AbstractSymplecticSolver)

    def wrong_solver(self, solver: Any, model: Any) -> str:
        if model is not None and not is_hamiltonian(model):
            return (
                "integrator='symplectic' needs a Hamiltonian model, split into kinetic and "
                "potential energies (e.g. a simlab.models.AbstractHamiltonianModel), for its "
                f"{self.runs}; {type(model).__name__} is not one. For an ODE pass "
                "integrator='auto' (the default), 'lean', 'stiff' or 'diffrax'."
            )
        return (
            f"integrator='symplectic' runs {self.runs}; got {type(solver).__name__}. Pass a "
            "symplectic solver such as solver='verlet', with adaptive=False (they take "
            "fixed steps)."
        )

    def solve(self, problem: Problem) -> Solution:
        check_symplectic_inputs(problem.model, problem.solver, problem.adjoint)
        counts = problem.steps_per_interval()
        ys = symplectic_solve(
            problem.model,
            problem.solver,
            problem.ts,
            problem.y0,
            problem.args,
            steps_per_interval=counts,
            max_steps=problem.max_steps,
            reversible=problem.adjoint == "reversible",
            forward=problem.adjoint == "forward",
        )
        num_steps = jnp.sum(jnp.broadcast_to(jnp.asarray(counts), (problem.ts.shape[0] - 1,)))
        error = energy_error(problem.model, ys, problem.args)
        stats = {"num_steps": num_steps, "energy_error": error}
        return Solution(ys, energy_status(error, ys), stats)
