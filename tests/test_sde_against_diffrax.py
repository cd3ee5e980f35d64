"""The lean fixed-step SDE solve against an adaptive Diffrax solve on the same Brownian path.

simlab's steps draw their own increments (`brownian_path` returns them), so the reference
is driven by that path: between simlab's grid points it is filled in by Brownian bridges,
down to a fine grid of `2**11` pieces, and Diffrax's adaptive Tsit5 solves the Stratonovich
form of the equation, $dy = (f - \\tfrac12 g\\,\\partial_y g)\\,dt + g \\circ dW$, driven by
the piecewise-linear interpolation of the fine path (Wong and Zakai: such solves converge to
the Stratonovich solution, here the Itô one, with an error of the order of the fine step).
As simlab's step shrinks, its end states approach the reference at its strong order.
"""

import functools
from typing import ClassVar

import diffrax as dfx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest
from jaxtyping import Array, Float

import simlab
from simlab.integrate import brownian_path
from simlab.models import AbstractSDEModel, parameter

FINE_PIECES = 2**11
STEPS = (2**3, 2**5, 2**7)  # simlab's steps over [0, 1]
KEYS = jax.random.split(jax.random.key(11), 64)
Y0 = jnp.array([0.5])


class StochasticLogistic(AbstractSDEModel):
    """Logistic growth with multiplicative noise, dX = r X (1 - X) dt + s X dW: its drift and
    diffusion do not commute, so no path is a closed-form function of W."""

    rate: Float[Array, ""] = parameter()
    volatility: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def drift(self, t, y, args):
        return self.rate * y * (1 - y)

    def diffusion(self, t, y, args):
        return self.volatility * y


MODEL = StochasticLogistic(rate=1.0, volatility=0.5)


def _stratonovich_drift(t, y, args):
    """f - g g' / 2, with g g' one Jacobian-vector product, as Milstein's correction."""
    diffusion = lambda state: MODEL.diffusion(t, state, args)  # noqa: E731
    g, g_slope = jax.jvp(diffusion, (y,), (diffusion(y),))
    return MODEL.drift(t, y, args) - 0.5 * g_slope


@jax.jit
def _diffrax_ends(fine_paths):
    """One adaptive solve of all the paths at once, a state per path and a diagonal
    diffusion (its steps also clipped to the ends of the pieces)."""
    fine_ts = jnp.linspace(0.0, 1.0, FINE_PIECES + 1)
    controller = dfx.ClipStepSizeController(
        dfx.PIDController(rtol=1e-6, atol=1e-9), step_ts=fine_ts
    )
    noise = dfx.ControlTerm(
        lambda t, y, args: lx.DiagonalLinearOperator(MODEL.diffusion(t, y, args)),
        dfx.LinearInterpolation(fine_ts, fine_paths.T),
    )
    solution = dfx.diffeqsolve(
        dfx.MultiTerm(dfx.ODETerm(_stratonovich_drift), noise),
        dfx.Tsit5(),
        0.0,
        1.0,
        1.0 / FINE_PIECES,
        jnp.broadcast_to(Y0, fine_paths.shape[:1]),
        stepsize_controller=controller,
        max_steps=8 * FINE_PIECES,
    )
    return solution.ys[-1]


def _refined(coarse_paths, rng):
    """Brownian paths on the fine grid through the given values on a coarse one: each coarse
    increment split into equal-variance Gaussian pieces conditioned on their sum."""
    paths, pieces = coarse_paths.shape[0], coarse_paths.shape[1] - 1
    per_piece = FINE_PIECES // pieces
    coarse_steps = np.diff(coarse_paths, axis=1)[..., None]
    draws = rng.normal(0.0, np.sqrt(1.0 / FINE_PIECES), (paths, pieces, per_piece))
    bridged = draws - draws.mean(axis=-1, keepdims=True) + coarse_steps / per_piece
    fine = np.cumsum(bridged.reshape(paths, FINE_PIECES), axis=1)
    return np.concatenate([np.zeros((paths, 1)), fine], axis=1)


@functools.partial(jax.jit, static_argnames="solver")
def _simlab_ends(solver, dt0):
    """End states with a traced step, so that one compiled solve serves every step."""

    def end(key):
        ts = jnp.array([0.0, 1.0])
        path = simlab.simulate(MODEL, Y0, ts, key=key, solver=solver, adaptive=False, dt0=dt0)
        return path.ys[-1, 0]

    return jax.vmap(end)(KEYS)


def _brownian_paths(steps):
    """Each key's Brownian path at the grid points of its solve with `steps` steps."""
    grid = jnp.linspace(0.0, 1.0, steps + 1)
    return jax.jit(jax.vmap(lambda key: brownian_path(key, grid, 1 / steps)))(KEYS)


@pytest.fixture(scope="module")
def references():
    """Per simlab step count, Diffrax's end state on each key's refined path (one batch)."""
    rng = np.random.default_rng(5)
    fine = np.concatenate([_refined(np.asarray(_brownian_paths(n)), rng) for n in STEPS])
    ends = np.asarray(_diffrax_ends(jnp.asarray(fine))).reshape(len(STEPS), -1)
    return dict(zip(STEPS, ends, strict=True))


@pytest.mark.parametrize(("solver", "order"), [("euler_maruyama", 0.5), ("milstein", 1.0)])
def test_lean_solve_converges_to_an_adaptive_diffrax_solve_on_its_brownian_path(
    references, solver, order
):
    errors = [
        float(jnp.mean(jnp.abs(_simlab_ends(solver, 1.0 / steps) - references[steps])))
        for steps in STEPS
    ]
    assert errors[0] > errors[1] > errors[2]
    observed = -np.polyfit(np.log(STEPS), np.log(errors), 1)[0]
    assert observed == pytest.approx(order, abs=0.2)
