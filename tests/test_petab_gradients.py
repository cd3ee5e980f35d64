"""Gradients of `simlab.petab` log-likelihoods (`jax.grad`, by forward sensitivities through
each solve) against central differences of a tighter solve, in float64, on problems of the
PEtab benchmark collection: one condition (Crauste), six conditions solved together under
`jax.vmap` (Fujita), preequilibration to a steady state (Brannmark, Weber); and against the
exact gradient of a one-species problem whose control condition starts at its steady state.

AMICI's benchmark tests accept a gradient within 1e-2 (relative) of finite differences; the
tolerances here are that or tighter where the agreement has a wide margin."""

import functools
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

petab = pytest.importorskip("petab.v1")
pytest.importorskip("libsbml")

from petab_turnover import K_IN, K_OUT, MEASURED, SIGMA, STIMULI, TIMES, write_turnover  # noqa: E402

import simlab.petab  # noqa: E402

pytestmark = pytest.mark.skipif(not jax.config.jax_enable_x64, reason="PEtab solves in float64")

COLLECTION = pathlib.Path(__file__).parent / "data" / "petab"

# The differences are taken on a solve 100 times tighter than the default (1e-10, 1e-12), on
# the fourth-order stencil with steps of 1e-3 on the parameter scales: two-point differences
# carry truncation errors up to 100 % on these problems (the log10 scales curve strongly).
TIGHT = dict(rtol=1e-12, atol=1e-14)
STEP = 1e-3


def _load(name: str, **tolerances) -> simlab.petab.PetabProblem:
    return simlab.petab.load(COLLECTION / name / f"{name}.yaml", **tolerances)


def _compiled(name: str):
    """The problem at the default tolerances, its jitted gradient, and the jitted, vmapped
    log-likelihood of the tightly solved problem."""
    problem = _load(name)
    tight = _load(name, **TIGHT)
    return (
        problem,
        jax.jit(jax.grad(problem.log_likelihood)),
        jax.jit(jax.vmap(tight.log_likelihood)),
    )


@pytest.fixture(scope="module")
def compiled():
    # Cached per problem: the two points of a problem share one compilation.
    return functools.cache(_compiled)


def _bounds(problem) -> tuple[np.ndarray, np.ndarray]:
    tables = problem.petab_problem
    return (
        np.asarray(tables.get_lb(fixed=False, scaled=True), float),
        np.asarray(tables.get_ub(fixed=False, scaled=True), float),
    )


def _nominal(problem) -> np.ndarray:
    return np.asarray(problem.nominal)


def _inward(problem) -> np.ndarray:
    """The nominal point moved by 0.1 on every parameter's scale toward the middle of its
    bounds (Brannmark's and Weber's optima have parameters on a bound)."""
    lower, upper = _bounds(problem)
    x = _nominal(problem)
    return x + 0.1 * np.sign((lower + upper) / 2 - x)


def _slower_pathogen(problem) -> np.ndarray:
    """Crauste's nominal point with the pathogen's growth rate rho_P lowered by 0.1 (log10).

    The nominal point itself is within 1e-4 (on delta_EL's log10 scale) of a finite-time
    blow-up of the pathogen (its growth rho_P P^2 against the effectors' killing), where
    the log-likelihood is NaN: its second derivatives there are ~1e9 and its gradient moves
    by 6 % between solves at rtol 1e-10 and 1e-12. AMICI leaves Crauste out of its gradient
    checks ("excessive numerical failures"). With rho_P lowered the late effectors clear the
    pathogen well before, and the problem is well conditioned."""
    x = _nominal(problem).copy()
    x[problem.parameter_ids.index("rho_P")] -= 0.1
    return x


def _central_differences(batched_log_likelihood, x: np.ndarray) -> np.ndarray:
    """The derivatives along each parameter by the fourth-order central stencil, all 4p
    evaluations in one batched call."""
    p = x.shape[0]
    offsets = np.array([STEP, -STEP, 2 * STEP, -2 * STEP])
    points = x[None, :] + (offsets[:, None, None] * np.eye(p)[None]).reshape(-1, p)
    values = np.asarray(batched_log_likelihood(jnp.asarray(points))).reshape(4, p)
    assert np.all(np.isfinite(values))
    return (8 * (values[0] - values[1]) - (values[2] - values[3])) / (12 * STEP)


def _assert_gradient(gradient, expected, names, *, rtol: float, floor: float) -> None:
    """Each component within `rtol` of its expected value, or within `floor` times the
    expected gradient's norm. A component near zero (a parameter the data barely inform, or
    any at an optimum: Brannmark's k1e is 3e-8 against a norm of 0.2) is a difference of
    nearly equal terms, whose error is a fraction of the whole gradient's, not of its own
    size: it gets an absolute tolerance scaled to the norm."""
    atol = floor * np.linalg.norm(expected)
    wrong = [
        f"{name}: {g:.10g}, expected {e:.10g} (relative error {abs(g - e) / abs(e):.1e})"
        for name, g, e in zip(names, np.asarray(gradient), expected, strict=True)
        if not abs(g - e) <= atol + rtol * abs(e)
    ]
    assert not wrong, "\n".join(wrong)


# (problem, point, relative tolerance, floor as a fraction of the gradient's norm), with the
# largest relative error seen (tight differences against the default solve's gradient).
CASES = [
    # 12 parameters, one condition; 3e-6.
    pytest.param(
        "Crauste_CellSystems2017", _slower_pathogen, 1e-4, 1e-6, id="Crauste-slower-pathogen"
    ),
    # 19 parameters, six conditions under vmap; 3e-5.
    pytest.param(
        "Fujita_SciSignal2010", _nominal, 1e-3, 1e-5, id="Fujita-nominal", marks=pytest.mark.slow
    ),
    pytest.param(  # 2e-7
        "Fujita_SciSignal2010", _inward, 1e-5, 1e-7, id="Fujita-inward", marks=pytest.mark.slow
    ),
    # 22 parameters, eight conditions after one preequilibration; at the optimum (gradient
    # norm 0.24) 1e-3, k1e aside.
    pytest.param(
        "Brannmark_JBC2010", _nominal, 1e-2, 1e-5, id="Brannmark-nominal", marks=pytest.mark.slow
    ),
    # The condition without insulin starts at the preequilibrated steady state, where a
    # differentiated initial step size gave NaN; 1.5e-7.
    pytest.param(
        "Brannmark_JBC2010",
        _inward,
        1e-4,
        1e-6,
        id="Brannmark-inward",
        marks=[pytest.mark.slow],
    ),
    # 36 parameters, two conditions after one preequilibration; 2e-6 (2e-2 in s21 while the
    # initial step size was differentiated).
    pytest.param(
        "Weber_BMC2015",
        _inward,
        1e-4,
        1e-6,
        id="Weber-inward",
        marks=[pytest.mark.slow],
    ),
]


@pytest.mark.parametrize(("name", "point", "rtol", "floor"), CASES)
def test_gradient_matches_central_differences_of_a_tight_solve(compiled, name, point, rtol, floor):
    problem, gradient_of, batched_tight = compiled(name)
    x = point(problem)
    lower, upper = _bounds(problem)
    assert np.all((lower <= x) & (x <= upper))
    expected = _central_differences(batched_tight, x)
    gradient = gradient_of(jnp.asarray(x))
    _assert_gradient(gradient, expected, problem.parameter_ids, rtol=rtol, floor=floor)


@pytest.fixture(scope="module")
def turnover(tmp_path_factory):
    return simlab.petab.load(write_turnover(tmp_path_factory.mktemp("turnover")))


def _turnover_exact() -> tuple[float, np.ndarray]:
    """The log-likelihood and its gradient in (log10 k_in, log10 k_out), in closed form:
    A(t) = r (s + (1 - s) exp(-k_out t)) with r = k_in / k_out."""
    ratio, ln10 = K_IN / K_OUT, math.log(10.0)
    value, gradient = 0.0, np.zeros(2)
    for condition, s in STIMULI.items():
        for t, measured in zip(TIMES, MEASURED[condition], strict=True):
            decay = math.exp(-K_OUT * t)
            a = ratio * (s + (1 - s) * decay)
            value -= 0.5 * math.log(2 * math.pi * SIGMA**2) + (a - measured) ** 2 / (2 * SIGMA**2)
            da = np.array([ln10 * a, -ln10 * (a + ratio * (1 - s) * K_OUT * t * decay)])
            gradient -= (a - measured) / SIGMA**2 * da
    return value, gradient


def test_turnover_log_likelihood_after_preequilibration_is_exact(turnover):
    assert turnover.parameter_ids == ("k_in", "k_out")
    value, _ = _turnover_exact()
    assert float(jax.jit(turnover.log_likelihood)(turnover.nominal)) == pytest.approx(
        value, rel=1e-9
    )


def test_turnover_gradient_from_a_steady_state_is_exact(turnover):
    # The control condition starts where its rate is zero to within roundoff: a
    # differentiated initial step size (the square root of a zero norm) made this NaN.
    _, gradient = _turnover_exact()
    computed = jax.jit(jax.grad(turnover.log_likelihood))(turnover.nominal)
    _assert_gradient(computed, gradient, turnover.parameter_ids, rtol=1e-7, floor=0.0)
