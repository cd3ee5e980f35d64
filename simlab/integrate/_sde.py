r"""Stochastic differential equations $dy = f(t, y)\,dt + g(t, y)\,dW$ (Itô): their methods,
and the fixed-step loop.

A stochastic model is anything with `drift(t, y, args)`, `diffusion(t, y, args)` and a
`noise` kind (the `StochasticVectorField` protocol; `simlab.models.AbstractSDEModel`
implements it):

- `"diagonal"`: `diffusion` has the state's shape, one independent Brownian motion per
  component, $dy_i = \dots + g_i\, dW_i$;
- `"scalar"`: `diffusion` has the state's shape, one Brownian motion for all;
- `"general"`: `diffusion` is a `(state, noise)` matrix, $dy = \dots + G\, dW$.

`additive = True` declares that `diffusion` does not depend on `y`. The loop is as lean
as the explicit Runge–Kutta one: the increments are drawn from the key inside the loop, a
block of steps at a time (`simlab.integrate._brownian`), so the only memory is the state
and one block of normals. SPaRK, the adaptive method, runs on Diffrax instead
(`simlab.integrate._sde_adaptive`), on the Stratonovich form (`stratonovich_drift`).
"""

from typing import Any, ClassVar, Protocol, runtime_checkable

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._misc import is_concrete
from .._results import RESULTS
from ._brownian import (
    Increment,
    block_draws,
    checked_key,
    draws_for_step,
    increment,
    path_words,
)
from ._interface import AbstractIntegrator, Problem, Solution
from ._loops import repeat_step
from ._symplectic import is_hamiltonian

NOISE_KINDS = ("diagonal", "scalar", "general")


@runtime_checkable
class StochasticVectorField(Protocol):
    """What the stochastic integrator asks of a model (see the module docstring)."""

    noise: str
    additive: bool

    def drift(self, t: Any, y: Array, args: Any) -> Array: ...

    def diffusion(self, t: Any, y: Array, args: Any) -> Array: ...


def is_stochastic(model: Any) -> bool:
    """Whether `model` is a stochastic vector field (has a drift, a diffusion and a noise kind)."""
    # `diffusion` first: a runtime-checkable protocol's isinstance costs about 10 µs.
    return hasattr(model, "diffusion") and isinstance(model, StochasticVectorField)


def noise_shape(model: Any, y0: Array, args: Any = None) -> tuple[int, ...]:
    """The shape of one Brownian increment of `model`'s noise, checking `diffusion`'s shape
    against the declared kind with a message that names both."""
    if model.noise not in NOISE_KINDS:
        raise ValueError(
            f"{type(model).__name__}.noise must be one of {NOISE_KINDS}; got {model.noise!r}."
        )
    shape = jax.eval_shape(model.diffusion, jnp.zeros((), y0.dtype), y0, args).shape
    expected = "(state, noise)" if model.noise == "general" else f"{y0.shape} (the state's)"
    fits = (
        len(shape) == 2 and shape[0] == y0.size if model.noise == "general" else shape == y0.shape
    )
    if not fits:
        raise ValueError(
            f"{type(model).__name__}.diffusion returns shape {shape}, but {model.noise} noise "
            f"needs shape {expected} for a state of shape {y0.shape}."
        )
    return {"diagonal": y0.shape, "scalar": (), "general": (shape[-1],)}[model.noise]


def noise_term(model: Any, g: Array, dW: Array) -> Array:
    """$g\\,dW$ for the model's noise kind."""
    return g @ dW if model.noise == "general" else g * dW


class AbstractStochasticSolver(eqx.Module):
    """A method for Itô SDEs: its `strong_order`, which noise it needs, and whether it takes
    adaptive steps (`adaptive_steps`, with an error estimate) or fixed ones."""

    strong_order: ClassVar[float]
    needs: ClassVar[str] = "any"  # "any", "commutative" (diagonal or scalar) or "additive"
    adaptive_steps: ClassVar[bool] = False

    @property
    def order(self) -> float:
        """The strong order: the order the save-time error against the exact path falls at."""
        return self.strong_order

    def refusal(self, model: Any) -> str | None:
        """Why this method cannot solve `model`'s noise, or `None`."""
        name = type(self).__name__
        if self.needs == "commutative" and model.noise == "general":
            return (
                f"{name} needs diagonal or scalar noise (its correction term has no Lévy "
                f"areas); {type(model).__name__} has general noise: use "
                "solver='euler_maruyama'."
            )
        if self.needs == "additive" and not model.additive:
            return (
                f"{name} is for additive noise (a diffusion that does not depend on y); "
                f"{type(model).__name__} does not declare additive = True: use "
                "solver='milstein' or 'euler_maruyama'."
            )
        return None


class AbstractSDESolver(AbstractStochasticSolver):
    """A fixed-step method for Itô SDEs, run by simlab's loop: its `weak_order`, whether its
    `step` reads the space-time Lévy area `draw.H`, and one `step`."""

    weak_order: ClassVar[float]
    uses_area: ClassVar[bool] = False  # False: `draw.H` is None (not drawn)

    def step(self, model: Any, t: Array, y: Array, h: Array, draw: Increment, args: Any):
        raise NotImplementedError


class EulerMaruyama(AbstractSDESolver):
    r"""Euler–Maruyama, $y_{n+1} = y_n + f h + g\,\Delta W$: strong order 1/2, weak order 1
    (strong order 1 for additive noise), any noise."""

    strong_order = 0.5
    weak_order = 1.0

    def step(self, model, t, y, h, draw, args):
        g = model.diffusion(t, y, args)
        return y + h * model.drift(t, y, args) + noise_term(model, g, draw.dW)


class Milstein(AbstractSDESolver):
    r"""Milstein's method for diagonal and scalar noise, strong order 1:
    $y_{n+1} = y_n + f h + g\,\Delta W + \tfrac12 (g' g)(\Delta W^2 - h)$, with $g' g$ one
    Jacobian-vector product (for diagonal noise $g_i$ must depend on $y_i$ alone)."""

    strong_order = 1.0
    weak_order = 1.0
    needs = "commutative"

    def step(self, model, t, y, h, draw, args):
        diffusion = lambda state: model.diffusion(t, state, args)  # noqa: E731
        g, slope = jax.jvp(diffusion, (y,), (diffusion(y),))
        correction = 0.5 * slope * (draw.dW**2 - h)
        return y + h * model.drift(t, y, args) + g * draw.dW + correction


class SRA1(AbstractSDESolver):
    r"""Rößler's SRA1 (SIAM J. Numer. Anal. 48, 2010) for additive noise: two drift
    evaluations a step, strong order 1.5, using the space-time Lévy area $H$:

    $z = y_n + \tfrac34 h f(t_n, y_n) + g(t_n)(\tfrac34 \Delta W + \tfrac32 H)$,
    $y_{n+1} = y_n + h(\tfrac13 f(t_n, y_n) + \tfrac23 f(t_n + \tfrac34 h, z))
    + g(t_n + \tfrac h2)\,\Delta W + (g(t_n) - g(t_n + h))\,H$,

    the last two terms being $\int g\,dW$ to order 1.5 for a time-dependent $g$."""

    strong_order = 1.5
    weak_order = 2.0
    needs = "additive"
    uses_area = True

    def step(self, model, t, y, h, draw, args):
        g0 = model.diffusion(t, y, args)
        f0 = model.drift(t, y, args)
        stage_noise = noise_term(model, g0, 0.75 * draw.dW + 1.5 * draw.H)
        z = y + 0.75 * h * f0 + stage_noise
        f1 = model.drift(t + 0.75 * h, z, args)
        g_mid = model.diffusion(t + 0.5 * h, y, args)
        g_end = model.diffusion(t + h, y, args)
        noise = noise_term(model, g_mid, draw.dW) + noise_term(model, g0 - g_end, draw.H)
        return y + h * (f0 / 3 + 2 * f1 / 3) + noise


class SPaRK(AbstractStochasticSolver):
    r"""Foster's Splitting Path Runge–Kutta method (`diffrax.SPaRK`; arXiv:2311.10598),
    three drift and diffusion evaluations a step with an embedded error estimate, for
    adaptive steps (`simulate(..., solver="spark", adaptive=True, key=...)`) on any noise.

    SPaRK solves Stratonovich SDEs, so it runs on the Stratonovich form of the Itô SDE,
    with drift $f - \tfrac12 \sum_j (\partial_y G_{:,j})\, G_{:,j}$
    (`stratonovich_drift`; the two forms agree for additive noise), driven by the key's
    virtual Brownian tree (`simlab.integrate.brownian_path(key, ts)` returns its values
    at the save times). Strong order 1/2 for general noise, 1 for diagonal or scalar
    noise, 3/2 for additive noise.

    !!! example

        ```python
        import jax
        import jax.numpy as jnp
        import simlab

        model = simlab.models.GeometricBrownianMotion(mu=0.5, sigma=0.8)
        path = simlab.simulate(
            model, jnp.array([1.0]), jnp.linspace(0.0, 1.0, 5), solver="spark",
            key=jax.random.key(0), rtol=1e-3, atol=1e-5,
        )
        path.stats["num_accepted_steps"]  # 17
        ```
    """

    strong_order = 0.5
    error_order: ClassVar[float] = 1.0  # strong order + 1/2: Diffrax's rule for SDEs
    adaptive_steps = True  # run by `simlab.integrate._sde_adaptive`


def stratonovich_drift(model: Any) -> Any:
    r"""The drift $\tilde f = f - \tfrac12 \sum_j (\partial_y G_{:,j})\, G_{:,j}$ of the
    Stratonovich form of `model`'s Itô SDE: one Jacobian-vector product per noise column
    for general noise; one in all for scalar and diagonal noise (for diagonal noise exact
    where $g_i$ depends on $y_i$ alone, as Milstein's correction); $f$ itself for additive
    noise."""

    def drift(t, y, args):
        if model.additive:
            return model.drift(t, y, args)
        diffusion = lambda state: model.diffusion(t, state, args)  # noqa: E731
        g = diffusion(y)
        if model.noise == "general":
            columns = jax.vmap(lambda column: jax.jvp(diffusion, (y,), (column,))[1])(g.T)
            correction = jnp.einsum("jij->i", columns)  # column j of G's derivative along G_j
        else:
            correction = jax.jvp(diffusion, (y,), (g,))[1]
        return model.drift(t, y, args) - 0.5 * correction

    return drift


# How the loop is differentiated for each adjoint (where the step count is traced; a count
# known at trace time runs a loop that both modes differentiate).
LOOP_KINDS = {None: "checkpointed", "forward": "lax"}


def sde_solve(problem: Problem) -> tuple[Array, Array]:
    """The states at `problem.ts` of a fixed-step solve (steps of at most `dt0`, landing on
    every save time), drawing step `n`'s increments from the block of steps that holds it
    (`simlab.integrate._brownian`), and the number of steps taken.

    The step counts are found here, outside the compiled solve, so that counts known before
    the call stay static (a scan of known length, which both modes differentiate) and a new
    key, `y0` or parameter value reuses the compiled solve."""
    return _compiled_sde_solve(problem, problem.steps_per_interval())


@eqx.filter_jit
def _compiled_sde_solve(problem: Problem, counts: Any) -> tuple[Array, Array]:
    model, solver, ts, args, key = (
        problem.model,
        problem.solver,
        problem.ts,
        problem.args,
        problem.key,
    )
    shape = noise_shape(model, problem.y0, args)
    area = solver.uses_area
    words = path_words(key)
    per_interval = jnp.broadcast_to(jnp.asarray(counts), (ts.shape[0] - 1,))
    first = jnp.cumsum(per_interval) - per_interval

    def interval(carry, xs):
        t_start, t_end, count, offset = xs
        h = (t_end - t_start) / count.astype(ts.dtype)

        def step(j, carry):
            y, draws = carry
            draws = draws_for_step(draws, words, offset + j, shape, ts.dtype, area=area)
            t = t_start + jnp.asarray(j, h.dtype) * h
            return solver.step(model, t, y, h, increment(draws, offset + j, h), args), draws

        num_steps = counts if isinstance(counts, int) else count
        kind = LOOP_KINDS[problem.adjoint]
        carry = repeat_step(step, num_steps, carry, max_steps=problem.max_steps, kind=kind)
        return carry, carry[0]

    # The draws carry over from interval to interval, as a block may span a save time.
    first_block = block_draws(words, 0, shape, ts.dtype, area=area)
    _, ys = lax.scan(interval, (problem.y0, first_block), (ts[:-1], ts[1:], per_interval, first))
    return jnp.concatenate([problem.y0[None], ys]), jnp.sum(per_interval)


# What to do with an event on a stochastic model, which no solver here locates events on.
STOCHASTIC_EVENTS_ADVICE = (
    ", nor does any solver of a stochastic model: simulate without event= on finely "
    "spaced ts and take the first save time at which the event function changes sign "
    "along trajectory.ys"
)


class SDEIntegrator(AbstractIntegrator):
    """Fixed-step Euler–Maruyama, Milstein, SRA1 and BAOAB on stochastic models, with keys."""

    name = "sde"
    runs = "stochastic solvers ('euler_maruyama', 'milstein', 'sra1', 'baoab')"
    exclusive = True
    events_advice = STOCHASTIC_EVENTS_ADVICE
    adaptive_steps = False
    adjoints = tuple(LOOP_KINDS)

    def accepts_solver(self, solver: Any) -> bool:
        return isinstance(solver, AbstractSDESolver)

    def solve(self, problem: Problem) -> Solution:
        ys, num_steps = sde_solve(problem)
        return Solution(ys, RESULTS.successful, {"num_steps": num_steps})


def checked_stochastic_inputs(
    model: Any, solver: Any, y0: Array, key: Any, args: Any, *, adaptive: bool
):
    """The key as a typed JAX key for a stochastic model (`None` for a deterministic one),
    after checking that model, solver and key belong together (and the model's `additive`
    declaration, at `y0`); errors name the argument."""
    name = type(model).__name__
    if not is_stochastic(model):
        if isinstance(solver, AbstractStochasticSolver):
            raise ValueError(
                f"{type(solver).__name__} solves stochastic models; {name} is deterministic: "
                "use an ODE solver such as solver='tsit5'" + _thermostat_hint(model) + "."
            )
        if key is not None:
            raise ValueError(
                f"key is for stochastic models (with drift and diffusion); {name} is "
                "deterministic: leave key out" + _thermostat_hint(model) + "."
            )
        return None
    if key is None:
        raise ValueError(
            f"{name} is stochastic: pass key=jax.random.key(seed); the same key gives the "
            "same Brownian path."
        )
    if not isinstance(solver, AbstractStochasticSolver):
        raise ValueError(
            f"{name} is stochastic; {type(solver).__name__} solves ODEs: use "
            "solver='euler_maruyama', 'milstein', 'sra1' or, for simlab.models.Langevin, "
            "'baoab' (fixed steps), or 'spark' (adaptive steps)."
        )
    _check_step_mode(model, solver, adaptive)
    noise_shape(model, y0, args)
    check_additive(model, y0, args)
    reason = solver.refusal(model)
    if reason is not None:
        raise ValueError(reason)
    return checked_key(key)


def check_additive(model: Any, y0: Array, args: Any, t0: Any = 0.0) -> None:
    """Refuses a model that declares `additive = True` while its diffusion depends on the
    state at time `t0` and `y0`: its derivative in `y` along a fixed pseudo-random direction is
    not zero. (SRA1 would run at strong order 1/2 instead of 3/2, and SPaRK would leave out
    the Stratonovich correction.) Values known only at run time (under `jit`, `vmap`,
    `grad`) are not checked."""
    if not model.additive:
        return
    direction = np.random.default_rng(0).standard_normal(np.shape(y0))
    slope = _diffusion_slope(model, t0, y0, np.asarray(direction, y0.dtype), args)
    if not is_concrete(slope) or not np.any(np.asarray(slope) != 0):
        return
    raise ValueError(
        f"{type(model).__name__} declares additive = True, but its diffusion depends on the "
        "state (its derivative in y at y0 is not zero), so SRA1 would lose its order 3/2: "
        "declare additive = False (Milstein or Euler–Maruyama then run), or make "
        "diffusion independent of y."
    )


@eqx.filter_jit
def _diffusion_slope(model: Any, t0: Any, y0: Array, direction: Array, args: Any) -> Array:
    """The derivative of `model.diffusion(t0, y, args)` in `y` at `y0` along `direction`."""
    return jax.jvp(lambda y: model.diffusion(t0, y, args), (y0,), (direction,))[1]


def _check_step_mode(model: Any, solver: AbstractStochasticSolver, adaptive: bool) -> None:
    """Adaptive steps only with an adaptive method (SPaRK), fixed steps only with the others."""
    method = type(solver).__name__
    if adaptive and not solver.adaptive_steps:
        raise ValueError(
            f"{type(model).__name__} is stochastic and {method} takes fixed steps: pass "
            "adaptive=False and dt0=..., or solver='spark' for adaptive steps (Diffrax on a "
            "virtual Brownian tree: many times slower a step)."
        )
    if not adaptive and solver.adaptive_steps:
        raise ValueError(
            f"{method} takes adaptive steps only: pass adaptive=True (with rtol and atol), "
            "or a fixed-step solver such as solver='euler_maruyama' with adaptive=False."
        )


def _thermostat_hint(model: Any) -> str:
    """For a Hamiltonian model, how to run its Langevin dynamics instead."""
    if not is_hamiltonian(model):
        return ""
    return (
        "; for its Langevin dynamics at a temperature, solve "
        "simlab.models.Langevin(model, friction=..., temperature=...) with solver='baoab'"
    )


def default_stochastic_solver(model: Any) -> AbstractSDESolver:
    """The strongest method the model's noise allows: SRA1 (order 1.5) for additive noise,
    Milstein (order 1) for diagonal or scalar noise, else Euler–Maruyama (order 1/2)."""
    if model.additive:
        return SRA1()
    return Milstein() if model.noise in ("diagonal", "scalar") else EulerMaruyama()
