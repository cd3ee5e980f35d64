"""The stiff solvers' LU factorisation: Gaussian elimination in elementwise operations (what
a TPU runs in float64, where XLA's LU implements only float32) against LAPACK, and a
float64 Rodas5P solve (of an ODE, and of a DAE from its consistent initialisation) that lowers
for a TPU without XLA's LU decomposition."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import robertson_scipy_reference

import simlab
from simlab.integrate import Radau5, Rodas5P
from simlab.integrate._stiff._lu import eliminate, lu_factor, lu_solve, substitute
from simlab.models import Robertson, RobertsonDAE

ROBERTSON = Robertson()
needs_x64 = pytest.mark.skipif(
    not jax.config.jax_enable_x64, reason="a float64 check: SIMLAB_TEST_X64=1"
)


def _system(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, n)), rng.normal(size=(n, 2))


@needs_x64
@pytest.mark.parametrize("n", [1, 3, 9, 30])
def test_elimination_solves_as_lapack(n):
    a, b = _system(n)
    factors = jax.jit(eliminate)(jnp.asarray(a))
    expected = np.linalg.solve(a, b)
    # One right-hand side, and several at once.
    np.testing.assert_allclose(
        substitute(factors, jnp.asarray(b[:, 0])), expected[:, 0], atol=1e-12
    )
    np.testing.assert_allclose(substitute(factors, jnp.asarray(b)), expected, atol=1e-12)
    lu, pivots = jax.scipy.linalg.lu_factor(a)  # LAPACK's pivots and factors
    np.testing.assert_array_equal(factors[1], pivots)
    np.testing.assert_allclose(factors[0], lu, atol=1e-12)


@needs_x64
def test_the_derivative_of_an_elimination_solve_is_minus_the_inverse_times_the_change():
    a, b = _system(6, seed=1)
    da = np.random.default_rng(2).normal(size=a.shape)
    x = np.linalg.solve(a, b[:, 0])

    def solve(matrix):
        return substitute(eliminate(matrix), jnp.asarray(b[:, 0]))

    _, tangent = jax.jvp(solve, (jnp.asarray(a),), (jnp.asarray(da),))
    np.testing.assert_allclose(tangent, -np.linalg.solve(a, da @ x), rtol=1e-10)
    batched = jax.vmap(lambda m: lu_solve(lu_factor(m), jnp.asarray(b[:, 0])))(
        jnp.stack([a, 2 * a])
    )
    np.testing.assert_allclose(batched, np.stack([x, x / 2]), rtol=1e-12)


def test_a_singular_matrix_leaves_a_zero_pivot():
    lu, _ = eliminate(jnp.asarray([[1.0, 2.0], [2.0, 4.0]]))
    assert float(jnp.min(jnp.abs(jnp.diagonal(lu)))) == 0.0


def _robertson_solve(solver, rtol, atol, model=ROBERTSON):
    ts = jnp.concatenate([jnp.zeros(1), jnp.logspace(-4, 4, 9)])  # from t = 0

    def solve(y0):
        # throw=False: a runtime check is a host callback, which a cross-lowering cannot hold
        options = dict(solver=solver(), rtol=rtol, atol=atol, throw=False)
        return simlab.simulate(model, y0, ts, **options).ys

    return solve, ts


@needs_x64
@pytest.mark.parametrize("model", [ROBERTSON, RobertsonDAE()], ids=["ode", "dae"])
def test_a_float64_rodas5p_solve_lowers_for_a_tpu_without_xlas_lu_decomposition(model):
    # The chip's compiler rejects XLA's LuDecomposition in float64 (only F32 and C64); the
    # DAE's consistent initialisation solves with the same elimination.
    solve, _ = _robertson_solve(Rodas5P, 1e-8, 1e-10, model)
    exported = jax.export.export(jax.jit(solve), platforms=["tpu"])(
        jax.ShapeDtypeStruct((3,), jnp.float64)
    )
    assert "LuDecomposition" not in set(re.findall(r"custom_call @(\w+)", exported.mlir_module()))


@pytest.mark.accelerator
@needs_x64
@pytest.mark.parametrize(
    "solver",
    # Radau5's complex pair is complex128 in float64, which a TPU has no arithmetic for: on
    # the CPU only.
    [
        Rodas5P,
        pytest.param(
            Radau5, marks=pytest.mark.skipif(jax.default_backend() == "tpu", reason="complex128")
        ),
    ],
)
def test_a_float64_stiff_solve_agrees_with_scipy(solver):
    # On a TPU, Rodas5P runs the elimination; on a CPU, LAPACK.
    solve, ts = _robertson_solve(solver, 1e-10, 1e-12)
    ys = np.asarray(jax.jit(solve)(jnp.asarray([1.0, 0.0, 0.0])))
    reference = robertson_scipy_reference(ts)
    np.testing.assert_allclose(ys, reference, rtol=1e-6, atol=1e-10)


@pytest.mark.accelerator
@needs_x64
def test_a_float64_dae_solve_agrees_with_scipy():
    # Robertson's reaction with its conservation law as the algebraic equation: Rodas5P
    # with the mass matrix, from a consistent state found by Newton's method.
    solve, ts = _robertson_solve(Rodas5P, 1e-9, 1e-14, RobertsonDAE())
    ys = np.asarray(jax.jit(solve)(jnp.asarray([1.0, 0.0, 0.0])))
    np.testing.assert_allclose(ys[1:], robertson_scipy_reference(ts)[1:], rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(ys.sum(axis=1), 1.0, atol=1e-12)
