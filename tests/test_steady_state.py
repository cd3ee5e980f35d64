"""Fixed points, their stability and branches of them, against closed-form answers."""

import warnings
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import with_dtype
from jaxtyping import Array, Float

import simlab
import simlab.plot
from simlab._eigenvalues import host_eigenvalues
from simlab._steady_state import STABILITY_LABELS
from simlab.models import AbstractODEModel, parameter

LV = dict(alpha=0.55, beta=0.028, gamma=0.84, delta=0.026)


def brusselator_b(model, b):
    return simlab.models.Brusselator(a=model.a, b=b)


def test_stability_labels_follow_the_enumeration():
    for code, name in enumerate(STABILITY_LABELS):
        assert getattr(simlab.STABILITY, name)._value == code


def test_lotka_volterra_fixed_point_is_a_centre():
    """Interior fixed point (gamma/delta, alpha/beta); eigenvalues +-i sqrt(alpha gamma)."""
    model = simlab.models.LotkaVolterra(**LV)
    fixed_point = simlab.steady_state(model, jnp.array([30.0, 20.0]))
    assert fixed_point.result == simlab.RESULTS.successful
    expected = [LV["gamma"] / LV["delta"], LV["alpha"] / LV["beta"]]
    np.testing.assert_allclose(fixed_point.state, expected, rtol=1e-12)
    frequency = np.sqrt(LV["alpha"] * LV["gamma"])
    np.testing.assert_allclose(np.sort(fixed_point.eigenvalues.imag), [-frequency, frequency])
    np.testing.assert_allclose(fixed_point.eigenvalues.real, 0.0, atol=1e-12)
    assert fixed_point.label == "hopf_pair"


def test_lotka_volterra_extinction_is_a_saddle():
    """At (0, 0) the eigenvalues are alpha > 0 and -gamma < 0."""
    model = simlab.models.LotkaVolterra(**LV)
    fixed_point = simlab.steady_state(model, jnp.array([0.1, 0.1]))
    np.testing.assert_allclose(fixed_point.state, 0.0, atol=1e-12)
    np.testing.assert_allclose(
        np.sort(fixed_point.eigenvalues.real), [-LV["gamma"], LV["alpha"]], rtol=1e-12
    )
    assert fixed_point.stability == simlab.STABILITY.unstable


@pytest.mark.parametrize("beta, label", [(0.3, "unstable"), (0.05, "zero_eigenvalue")])
def test_sir_disease_free_state(beta, label):
    """Every (S, 0, R) is a fixed point; its one nonzero eigenvalue is beta S / N - gamma,
    so the epidemic can invade exactly when R0 S / N > 1. The other two are zero (S + I + R
    is conserved and the disease-free states form a plane)."""
    gamma, population = 0.1, 1000.0
    model = simlab.models.SIR(beta=beta, gamma=gamma, population=population)
    fixed_point = simlab.steady_state(model, jnp.array([990.0, 10.0, 0.0]))
    assert fixed_point.result == simlab.RESULTS.successful
    susceptible, infected, _ = np.asarray(fixed_point.state)
    assert abs(infected) < 1e-10
    eigenvalues = np.sort(fixed_point.eigenvalues.real)
    growth = beta * susceptible / population - gamma
    np.testing.assert_allclose(np.sort([0.0, 0.0, growth]), eigenvalues, atol=1e-12)
    assert fixed_point.label == label


def test_brusselator_fixed_point_and_stability():
    """(a, b/a), trace b - 1 - a^2, determinant a^2: a stable focus below b = 1 + a^2."""
    for b, label in [(1.5, "stable"), (2.5, "oscillatory")]:
        fixed_point = simlab.steady_state(
            simlab.models.Brusselator(a=1.0, b=b), jnp.array([0.5, 0.5])
        )
        np.testing.assert_allclose(fixed_point.state, [1.0, b], rtol=1e-12)
        np.testing.assert_allclose(np.sum(fixed_point.eigenvalues).real, b - 2.0, atol=1e-12)
        np.testing.assert_allclose(np.prod(fixed_point.eigenvalues).real, 1.0, rtol=1e-12)
        assert fixed_point.label == label


@pytest.mark.parametrize("kwargs, bad", [(dict(a=-1.0, b=1.0), "a"), (dict(a=1.0, b=0.0), "b")])
def test_brusselator_refuses_nonpositive_feeds(kwargs, bad):
    with pytest.raises(ValueError, match=f"parameter '{bad}'"):
        simlab.models.Brusselator(**kwargs)


def test_failed_solve_is_a_status_not_nan():
    """dx/dt = a - (b+1)x + x^2 y has no root with too few Newton steps from far away."""
    model = simlab.models.Brusselator(a=1.0, b=1.5)
    fixed_point = simlab.steady_state(model, jnp.array([50.0, 50.0]), max_steps=2)
    assert fixed_point.result != simlab.RESULTS.successful
    assert fixed_point.stability == simlab.STABILITY.unknown
    assert np.all(np.isfinite(fixed_point.state))


def test_steady_state_gradient_matches_analytic_and_central_differences():
    """d(prey*)/d(gamma) = 1/delta and d(predator*)/d(alpha) = 1/beta for Lotka–Volterra;
    d(y*)/da = -b/a^2 for the Brusselator; all against central differences in float64."""

    def lv_state(alpha, gamma):
        model = simlab.models.LotkaVolterra(
            alpha=alpha, beta=LV["beta"], gamma=gamma, delta=LV["delta"]
        )
        return simlab.steady_state(model, jnp.array([30.0, 20.0])).state

    gradient = jax.jacrev(lv_state, argnums=(0, 1))(LV["alpha"], LV["gamma"])
    np.testing.assert_allclose(gradient[1][0], 1 / LV["delta"], rtol=1e-10)
    np.testing.assert_allclose(gradient[0][1], 1 / LV["beta"], rtol=1e-10)
    np.testing.assert_allclose(gradient[0][0], 0.0, atol=1e-10)

    def brusselator_y(a):
        model = simlab.models.Brusselator(a=a, b=1.5)
        return simlab.steady_state(model, jnp.array([1.0, 1.0])).state[1]

    a, step = 1.2, 1e-5
    derivative = jax.grad(brusselator_y)(a)
    central = (brusselator_y(a + step) - brusselator_y(a - step)) / (2 * step)
    np.testing.assert_allclose(derivative, -1.5 / a**2, rtol=1e-12)
    np.testing.assert_allclose(derivative, central, rtol=1e-8)


def test_steady_state_under_vmap():
    bs = jnp.linspace(1.2, 3.0, 5)

    def state(b):
        return simlab.steady_state(simlab.models.Brusselator(a=1.0, b=b), jnp.array([1.0, 1.0]))

    fixed_points = jax.vmap(state)(bs)
    np.testing.assert_allclose(fixed_points.state[:, 1], bs, rtol=1e-12)
    assert list(fixed_points.label) == ["stable"] * 2 + ["oscillatory"] * 3


def _order(eigenvalues):
    """The permutation that puts eigenvalues in one order (by real, then imaginary part),
    whatever order they came out in."""
    values = np.asarray(eigenvalues)
    return np.lexsort((values.imag, values.real))


def _sorted(eigenvalues):
    return np.asarray(eigenvalues)[_order(eigenvalues)]


def test_the_hosts_eigenvalues_and_their_derivatives_are_xlas():
    # What a TPU computes (it has no nonsymmetric eigensolver) against XLA's eigvals on a
    # CPU: the values, a directional derivative, a gradient, and a vmapped batch.
    matrix, direction = jax.random.normal(jax.random.key(0), (2, 5, 5), jnp.float64)
    np.testing.assert_allclose(
        _sorted(host_eigenvalues(matrix)), _sorted(jnp.linalg.eigvals(matrix)), rtol=1e-12
    )
    (values, tangent), (xla_values, xla_tangent) = (
        jax.jvp(eigenvalues, (matrix,), (direction,))
        for eigenvalues in (host_eigenvalues, jnp.linalg.eigvals)
    )
    np.testing.assert_allclose(
        np.asarray(tangent)[_order(values)],
        np.asarray(xla_tangent)[_order(xla_values)],
        rtol=1e-10,
        atol=1e-12,
    )
    gradients = [
        jax.grad(lambda m, f=eigenvalues: jnp.sum(jnp.real(f(m)) ** 2))(matrix)
        for eigenvalues in (host_eigenvalues, jnp.linalg.eigvals)
    ]
    np.testing.assert_allclose(gradients[0], gradients[1], rtol=1e-10, atol=1e-12)
    batch = jax.random.normal(jax.random.key(1), (3, 4, 4), jnp.float64)
    for one, values in zip(batch, jax.vmap(host_eigenvalues)(batch), strict=True):
        np.testing.assert_allclose(_sorted(values), _sorted(jnp.linalg.eigvals(one)), rtol=1e-12)


@pytest.mark.parametrize(
    ("model", "guess", "expected", "label"),
    [
        (
            simlab.models.LotkaVolterra(**LV),
            [30.0, 20.0],
            [0.84 / 0.026, 0.55 / 0.028],
            "hopf_pair",
        ),
        (simlab.models.Brusselator(a=1.0, b=2.5), [1.2, 2.0], [1.0, 2.5], "oscillatory"),
        (
            simlab.models.SIR(beta=0.3, gamma=0.1, population=1000.0),
            [990, 10, 0],
            [990, 0, 0],
            "unstable",
        ),
    ],
    ids=["centre", "focus", "disease-free"],
)
def test_a_float32_state_meets_the_default_tolerances(model, guess, expected, label):
    # An accelerator's precision: float64's 1e-10 would run Newton's method into roundoff
    # until max_steps, and its eigenvalue_tol would read a centre's roundoff as a focus.
    point = simlab.steady_state(with_dtype(model, jnp.float32), jnp.asarray(guess, jnp.float32))
    assert bool(point.succeeded) and point.state.dtype == jnp.float32
    np.testing.assert_allclose(point.state, expected, rtol=1e-5, atol=1e-4)
    assert point.label == label


@pytest.fixture(scope="module")
def brusselator_branch():
    model = simlab.models.Brusselator(a=1.5, b=2.0)
    values = jnp.linspace(2.0, 4.5, 26)
    return model, values, simlab.continuation(model, "b", values, jnp.array([1.0, 1.0]))


def test_continuation_equals_independent_solves(brusselator_branch):
    model, values, branch = brusselator_branch
    assert np.all(branch.succeeded)
    for value, state in zip(values, branch.states, strict=True):
        alone = simlab.steady_state(brusselator_b(model, value), jnp.array([1.0, 1.0]))
        np.testing.assert_allclose(state, alone.state, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(branch.states[:, 1], values / 1.5, rtol=1e-12)


def test_brusselator_hopf_point_is_at_one_plus_a_squared(brusselator_branch):
    _, _, branch = brusselator_branch
    assert [b.kind for b in branch.bifurcations] == ["hopf"]
    hopf = branch.bifurcations[0]
    assert abs(hopf.value - (1 + 1.5**2)) < 1e-6
    np.testing.assert_allclose(hopf.eigenvalues.real, 0.0, atol=1e-6)
    np.testing.assert_allclose(np.abs(hopf.eigenvalues.imag), 1.5, rtol=1e-6)  # omega = a
    before = branch.values <= hopf.value
    assert np.all(branch.is_stable[before]) and np.all(branch.is_oscillatory[~before])


def test_oscillation_envelope_grows_from_the_hopf_point(brusselator_branch):
    """Supercritical Hopf: the limit cycle's amplitude grows like sqrt(b - b_c)."""
    _, _, branch = brusselator_branch
    oscillating = branch.is_oscillatory
    assert np.all(np.isnan(branch.oscillation_max[~oscillating]))
    amplitude = (branch.oscillation_max - branch.oscillation_min)[oscillating, 0]
    assert np.all(np.diff(amplitude) > 0)
    assert np.all(branch.oscillation_min[oscillating, 0] < branch.states[oscillating, 0])
    assert np.all(branch.oscillation_max[oscillating, 0] > branch.states[oscillating, 0])
    # Near onset, amplitude^2 is linear in b - b_c: the ratio of the first two is close to
    # the ratio of their distances from b_c.
    distance = branch.values[oscillating] - (1 + 1.5**2)
    np.testing.assert_allclose(
        (amplitude[1] / amplitude[0]) ** 2, distance[1] / distance[0], rtol=0.15
    )


def test_lorenz_pitchfork_at_rho_one_is_a_zero_eigenvalue_crossing():
    """At the origin J has eigenvalues -beta and the roots of
    lambda^2 + (sigma + 1) lambda + sigma (1 - rho) = 0: one crosses zero at rho = 1."""
    model = simlab.models.Lorenz(sigma=10.0, rho=0.5, beta=8 / 3)
    branch = simlab.continuation(model, "rho", jnp.linspace(0.5, 1.5, 11), jnp.full(3, 0.1))
    np.testing.assert_allclose(branch.states, 0.0, atol=1e-12)
    assert [b.kind for b in branch.bifurcations] == ["fold"]
    assert abs(branch.bifurcations[0].value - 1.0) < 1e-6
    assert list(branch.labels[:5]) == ["stable"] * 5 and np.all(branch.labels[6:] == "unstable")


def test_lorenz_hopf_point_of_the_convection_branch():
    """The fixed points C+- = (+-sqrt(beta (rho - 1)), ..., rho - 1) lose stability in a
    (subcritical) Hopf bifurcation at rho_H = sigma (sigma + beta + 3) / (sigma - beta - 1),
    24.7368 for the classic sigma = 10, beta = 8/3 (Sparrow, The Lorenz Equations, 1982)."""
    sigma, beta = 10.0, 8 / 3
    model = simlab.models.Lorenz(sigma=sigma, rho=20.0, beta=beta)
    start = jnp.array([np.sqrt(beta * 19.0), np.sqrt(beta * 19.0), 19.0])
    branch = simlab.continuation(
        model, "rho", jnp.linspace(20.0, 30.0, 11), start, oscillations=False
    )
    np.testing.assert_allclose(branch.states[:, 2], branch.values - 1.0, rtol=1e-12)
    assert [b.kind for b in branch.bifurcations] == ["hopf"]
    rho_hopf = sigma * (sigma + beta + 3) / (sigma - beta - 1)
    assert abs(branch.bifurcations[0].value - rho_hopf) < 1e-6
    assert np.all(np.isnan(branch.oscillation_max))


def test_bifurcation_diagram_draws_stable_solid_unstable_dashed(brusselator_branch):
    _, values, branch = brusselator_branch
    ax = simlab.plot.bifurcation(branch, "x")
    drawn = [line for line in ax.lines if len(line.get_xdata())]
    solid = [
        line for line in drawn if line.get_linestyle() == "-" and line.get_color() == "#0072B2"
    ]
    dashed = [line for line in drawn if line.get_linestyle() == "--"]
    assert len(solid) == 1 and len(dashed) == 1
    hopf = branch.bifurcations[0].value
    np.testing.assert_allclose(solid[0].get_xdata()[[0, -1]], [values[0], hopf])
    np.testing.assert_allclose(dashed[0].get_xdata()[0], hopf)
    np.testing.assert_allclose(dashed[0].get_xdata()[-1], values[-1])
    envelope = [line for line in drawn if line.get_color() == "#D55E00"]
    np.testing.assert_allclose(
        envelope[0].get_ydata(), branch.oscillation_max[branch.is_oscillatory, 0]
    )
    marker = [line for line in drawn if line.get_marker() == "o"]
    np.testing.assert_allclose(marker[0].get_xdata(), [hopf])
    assert ax.get_xlabel() == "b" and ax.get_ylabel() == "x"
    with pytest.raises(ValueError, match="unknown state component 'z'"):
        simlab.plot.bifurcation(branch, "z")


class SaddleNode(AbstractODEModel):
    """dx/dt = r + x^2: fixed points x = -+sqrt(-r) for r < 0, meeting in a fold at r = 0."""

    r: Float[Array, ""] = parameter()
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return self.r + y**2


def test_continuation_goes_round_a_fold_on_a_requested_value():
    # 61 values put one at r = -4e-17, on the fold: the root solve there is singular, and
    # the walk used to stop short of it (at r = -5.7e-12) with no fold reported.
    values = jnp.linspace(-1.0, 0.5, 61)
    assert abs(float(values[40])) < 1e-15
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning that the branch stopped
        branch = simlab.continuation(SaddleNode(r=-1.0), "r", values, jnp.array([-1.0]))
    [fold] = branch.bifurcations
    assert fold.kind == "fold" and abs(fold.value) < 1e-9 and abs(fold.state[0]) < 1e-4
    r, x = branch.values, branch.states[:, 0]
    np.testing.assert_allclose(r + x**2, 0.0, atol=1e-9)
    # Round the fold from the stable x = -sqrt(-r) back to r = -1 on the unstable x = sqrt(-r).
    assert x[0] == pytest.approx(-1.0) and x[-1] == pytest.approx(1.0) and r[-1] == -1.0
    assert list(np.unique(branch.labels[x < -1e-3])) == ["stable"]
    assert list(np.unique(branch.labels[x > 1e-3])) == ["unstable"]


@pytest.mark.parametrize(
    "parameter, values, match",
    [
        ("c", jnp.linspace(1.0, 2.0, 3), "unknown parameter 'c'"),
        ("b", jnp.array([1.0]), "at least two"),
        ("b", jnp.array([1.0, 2.0, 1.5]), "strictly increasing or strictly decreasing"),
        ("b", jnp.array([-1.0, 1.0]), "must lie in"),
        ("b", jnp.array([1.0, jnp.nan]), "finite"),
    ],
)
def test_continuation_bad_input(parameter, values, match):
    model = simlab.models.Brusselator(a=1.0, b=1.5)
    with pytest.raises(ValueError, match=match):
        simlab.continuation(model, parameter, values, jnp.ones(2))


def test_steady_state_bad_input():
    model = simlab.models.Brusselator(a=1.0, b=1.5)
    with pytest.raises(ValueError, match="shape"):
        simlab.steady_state(model, jnp.ones(3))
    with pytest.raises(TypeError, match="AbstractModel"):
        simlab.steady_state(lambda t, y, args: -y, jnp.ones(2))
