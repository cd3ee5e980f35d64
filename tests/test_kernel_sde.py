"""Fixed-step stochastic solves in the kernel integrator (`integrator="kernel"` with a key),
in the Pallas interpreter on a CPU.

The kernel hashes every member's normals from its key as the stochastic loop
(`integrator="sde"`) draws them, so the two follow the same Brownian path and agree to
roundoff at every save time; a path depends on its key alone, batched or not. The tests
marked `accelerator` hold in float32 too (see tests/test_accelerator.py).
"""

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab

FLOAT = jnp.asarray(1.0).dtype  # float64 with x64 on, float32 on an accelerator run
AGREEMENT = 1e-12 if FLOAT == jnp.float64 else 1e-5
# Three steps a save interval: in float32 a hash serves two steps, so pairs straddle saves.
TS = np.linspace(0.0, 0.6, 6)
DT = 0.04
MEMBERS = 5  # padded to a whole block

GBM = simlab.models.GeometricBrownianMotion(mu=0.5, sigma=0.8)
# name: (model, solver, initial state)
CASES = {
    "euler_maruyama": (GBM, "euler_maruyama", [1.0]),
    "milstein": (GBM, "milstein", [1.0]),
    # Additive noise on three components, with the space-time Lévy area.
    "sra1": (
        simlab.models.StochasticLorenz(sigma=10.0, rho=28.0, beta=8 / 3, noise_strength=2.0),
        "sra1",
        [1.0, 1.0, 1.0],
    ),
    # General noise: a (state, noise) matrix times the increments.
    "general": (
        simlab.models.StochasticSIR(beta=0.3, gamma=0.1, population=1000.0),
        "euler_maruyama",
        [990.0, 10.0, 0.0],
    ),
}


def _solve(case, integrator, model=None):
    default_model, solver, _ = CASES[case]
    model = default_model if model is None else model

    def solve(key, y0):
        return simlab.simulate(
            model, y0, TS.astype(FLOAT), key=key, solver=solver, adaptive=False, dt0=DT,
            integrator=integrator,
        )  # fmt: skip

    return solve


def _members(case):
    keys = jax.random.split(jax.random.key(7), MEMBERS)
    y0 = jnp.asarray(CASES[case][2], FLOAT)
    return keys, y0[None, :] * jnp.linspace(0.5, 1.5, MEMBERS, dtype=FLOAT)[:, None]


def _assert_agree(kernel, lean):
    scale = jnp.maximum(jnp.max(jnp.abs(lean), axis=-1, keepdims=True), 1.0)
    np.testing.assert_array_less(jnp.abs(kernel - lean) / scale, AGREEMENT)


@pytest.mark.accelerator
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_batch_follows_the_stochastic_loops_paths(case):
    members = _members(case)
    kernel = jax.jit(jax.vmap(_solve(case, "kernel")))(*members)
    lean = jax.jit(jax.vmap(_solve(case, "sde")))(*members)
    assert kernel.integrator == "kernel" and lean.integrator == "sde"
    assert kernel.ys.shape == lean.ys.shape == (MEMBERS, len(TS), len(CASES[case][2]))
    _assert_agree(kernel.ys, lean.ys)
    assert bool(jnp.all(kernel.succeeded))


class _PureNoise(simlab.models.AbstractSDEModel):
    additive: ClassVar[bool] = True
    state_names: ClassVar[tuple[str, ...]] = ("W",)

    def drift(self, t, y, args):
        return jnp.zeros_like(y)

    def diffusion(self, t, y, args):
        return jnp.ones_like(y)


class _Expm1Drift(_PureNoise):
    def drift(self, t, y, args):
        return -jnp.expm1(y)


@pytest.mark.accelerator
def test_the_kernel_runs_on_the_keys_brownian_path():
    # Pure noise, dy = dW: Euler–Maruyama sums the increments, so the solve is W itself.
    model = _PureNoise()
    keys, _ = _members("euler_maruyama")
    ys = jax.vmap(_solve("euler_maruyama", "kernel", model))(keys, jnp.zeros((MEMBERS, 1), FLOAT))
    for key, path in zip(keys, ys.ys, strict=True):
        W = simlab.integrate.brownian_path(key, TS.astype(FLOAT), DT)
        np.testing.assert_allclose(path[:, 0], W, rtol=0, atol=10 * AGREEMENT)


@pytest.mark.accelerator
def test_a_path_depends_on_its_key_alone_batched_or_not():
    keys, y0 = _members("euler_maruyama")
    solve = _solve("euler_maruyama", "kernel")
    batch = jax.jit(jax.vmap(solve))(keys, y0).ys
    for member in (0, MEMBERS - 1):
        alone = jax.jit(solve)(keys[member], y0[member]).ys
        np.testing.assert_array_equal(alone, batch[member])
    reordered = jax.jit(jax.vmap(solve))(keys[::-1], y0[::-1]).ys
    np.testing.assert_array_equal(reordered[::-1], batch)


def test_gradients_are_the_stochastic_loops():
    # A kernel has no transpose: derivatives in both modes are the stochastic loop's.
    keys, y0 = _members("euler_maruyama")

    def mean_end(sigma, integrator):
        model = simlab.models.GeometricBrownianMotion(mu=0.5, sigma=sigma)
        ends = jax.vmap(_solve("euler_maruyama", integrator, model))(keys, y0).ys[:, -1, 0]
        return jnp.mean(ends)

    sigma = jnp.asarray(0.8, FLOAT)
    for derivative in (jax.grad, jax.jacfwd):
        kernel = derivative(mean_end)(sigma, "kernel")
        np.testing.assert_allclose(kernel, derivative(mean_end)(sigma, "sde"), rtol=1e-12)
    step = 1e-6
    central = (mean_end(sigma + step, "kernel") - mean_end(sigma - step, "kernel")) / (2 * step)
    np.testing.assert_allclose(jax.grad(mean_end)(sigma, "kernel"), central, rtol=1e-6)


@pytest.mark.accelerator
def test_auto_takes_the_kernel_for_stochastic_solves_on_a_tpu_only(monkeypatch):
    # The choice is made when the solve is traced: `jax.eval_shape` runs nothing.
    def integrator(model, y0, solver="euler_maruyama"):
        def solve():
            key = jax.random.key(0)
            return simlab.simulate(model, y0, TS, key=key, solver=solver, adaptive=False, dt0=DT)

        return jax.eval_shape(solve).integrator

    ou = simlab.models.OrnsteinUhlenbeck(theta=1.5, mu=0.3, sigma=0.4)
    y0 = jnp.ones(1, FLOAT)
    assert integrator(ou, y0) == ("kernel" if jax.default_backend() == "tpu" else "sde")
    monkeypatch.setattr(simlab.integrate._kernel, "on_tpu", lambda: True)
    assert integrator(ou, y0) == "kernel"
    assert integrator(GBM, y0, "milstein") == "kernel"
    sir, _, sir_y0 = CASES["general"]
    assert integrator(sir, jnp.asarray(sir_y0, FLOAT)) == "kernel"  # a matrix product
    # A drift with a primitive Mosaic does not lower (expm1) keeps the stochastic loop.
    assert integrator(_Expm1Drift(), y0) == "sde"


def test_expectation_reaches_the_kernel_on_a_tpu(monkeypatch):
    # Their save times stay concrete, so "auto" may count the steps and take the kernel.
    monkeypatch.setattr(simlab.integrate._kernel, "on_tpu", lambda: True)
    ran = []

    def end(trajectory):
        ran.append(trajectory.integrator)
        return trajectory.ys[-1, 0]

    model, solver, y0 = CASES["euler_maruyama"]
    options = dict(solver=solver, dt0=DT, observable=end)
    estimate = simlab.expectation(
        model, jnp.asarray(y0, FLOAT), TS, key=jax.random.key(3), paths=64, **options
    )
    assert set(ran) == {"kernel"}
    # Geometric Brownian motion's mean is y0 exp(mu t), within the estimate's error.
    exact = y0[0] * np.exp(0.5 * TS[-1])
    assert abs(float(estimate.mean) - exact) < 5 * float(estimate.standard_error)
