"""Fixed points of a model, their stability, and branches of them across a parameter."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx
from jaxtyping import Array, ArrayLike, Complex, Float

from ._misc import Integer, RealNumber, as_count
from ._results import RESULTS
from ._simulate import checked_y0, simulate
from .models._base import AbstractModel


class STABILITY(eqx.Enumeration):
    """The linear stability of a fixed point, read from the eigenvalues $\\lambda_i$ of the
    Jacobian there. Compare with `==` (it works under `jax.jit` and `jax.vmap`)."""

    stable = "Every eigenvalue has a negative real part: small perturbations decay."
    unstable = "A real eigenvalue is positive: a saddle or an unstable node."
    oscillatory = (
        "Only complex pairs have positive real parts: an unstable focus, from which "
        "trajectories spiral out (to a limit cycle past a supercritical Hopf point)."
    )
    zero_eigenvalue = (
        "A real eigenvalue is zero: a fold or branch point, or one of a continuum of fixed "
        "points (a conservation law)."
    )
    hopf_pair = (
        "A complex pair lies on the imaginary axis, the others in the left half-plane: a "
        "Hopf point, or the centre of a conservative system."
    )
    unknown = "The root solve failed: there is no fixed point to classify."


# The names in declaration order: `STABILITY.<name>._value` indexes this tuple.
STABILITY_LABELS = (
    "stable",
    "unstable",
    "oscillatory",
    "zero_eigenvalue",
    "hopf_pair",
    "unknown",
)


class SteadyState(eqx.Module):
    r"""A fixed point $y^\ast$ of $\dot y = f(y)$, from [`simlab.steady_state`][].

    **Attributes:**

    - `state`: $y^\ast$ (after a failed solve, the last iterate: read `result`).
    - `jacobian`: $J = \partial f / \partial y$ at `state`, shape `(n, n)`.
    - `eigenvalues`: the eigenvalues of $J$ (complex), shape `(n,)`.
    - `stability`: a [`simlab.STABILITY`][] code; `.label` names it.
    - `result`: a [`simlab.RESULTS`][] status; `RESULTS[s.result]` is its message.
    - `num_steps`: Newton iterations taken.
    """

    state: Float[Array, " *state"]
    jacobian: Float[Array, "n n"]
    eigenvalues: Complex[Array, " n"]
    stability: STABILITY
    result: RESULTS
    num_steps: Array

    @property
    def succeeded(self):
        """Boolean array: did the root solve converge (one value per point under `vmap`)?"""
        return self.result == RESULTS.successful

    @property
    def label(self):
        """The stability's name (`"stable"`, `"hopf_pair"`, ...), or an array of names."""
        codes = np.asarray(self.stability._value)
        return np.asarray(STABILITY_LABELS)[codes] if codes.ndim else STABILITY_LABELS[codes]


def default_root_solver(rtol: RealNumber, atol: RealNumber) -> optx.AbstractRootFinder:
    """Newton's method with an SVD linear solve, so that a singular Jacobian (a line of
    fixed points, as conservation laws make) still converges, to the nearest fixed point."""
    # Python floats: a NumPy scalar tolerance would not promote with the state's dtype.
    return optx.Newton(
        rtol=float(rtol), atol=float(atol), linear_solver=lx.AutoLinearSolver(well_posed=False)
    )


def steady_state(
    model: AbstractModel,
    y_guess: ArrayLike,
    *,
    args: Any = None,
    solver: optx.AbstractRootFinder | None = None,
    rtol: RealNumber = 1e-10,
    atol: RealNumber = 1e-10,
    max_steps: Integer = 256,
    eigenvalue_tol: float = 1e-8,
) -> SteadyState:
    r"""Finds a fixed point $f(y^\ast) = 0$ of `model` near `y_guess`, and its stability.

    The root is found with an Optimistix root finder (Newton's method by default); the
    eigenvalues $\lambda_i$ of the Jacobian $J = \partial f/\partial y\,(y^\ast)$ decide the
    label: `stable` when every $\operatorname{Re}\lambda_i < 0$, `hopf_pair` when a complex
    pair sits on the imaginary axis, and so on (see [`simlab.STABILITY`][]). An eigenvalue
    counts as zero (or real) when its real (or imaginary) part is below
    `eigenvalue_tol` $\cdot \max(1, \max_i|\lambda_i|)$.

    The fixed point is differentiable with respect to the model's parameters $\theta$ by the
    implicit function theorem, $\partial y^\ast/\partial\theta = -J^{-1}\,\partial f/\partial
    \theta$ (Optimistix's `ImplicitAdjoint`): `jax.grad` never differentiates the Newton
    iterations.

    A solve that does not converge is reported in `result` (with `stability` `unknown`),
    never raised, so that it can run under `jax.vmap` and [`simlab.continuation`][].

    **Arguments:**

    - `model`: a [`simlab.models.AbstractModel`][] (autonomous: it is evaluated at $t = 0$).
    - `y_guess`: the starting point of the root solve, of shape `model.state_shape`.
    - `args`: passed through to `model(t, y, args)`.
    - `solver`: an Optimistix root finder; `None` takes `optx.Newton(rtol, atol)` with an
      SVD linear solve (which copes with the singular Jacobian of a conservation law).
    - `rtol`, `atol`: tolerances of the default solver.
    - `max_steps`: the most iterations before the solve reports failure.
    - `eigenvalue_tol`: the relative size below which a real or imaginary part counts as zero.

    **Returns:** a [`simlab.SteadyState`][] with `.state`, `.eigenvalues`, `.stability`
    (`.label`), `.result`.

    !!! example

        ```python
        model = simlab.models.LotkaVolterra(alpha=0.55, beta=0.028, gamma=0.84, delta=0.026)
        fixed_point = simlab.steady_state(model, jnp.array([30.0, 20.0]))
        fixed_point.state  # [gamma / delta, alpha / beta]
        fixed_point.label  # 'hopf_pair': a centre, eigenvalues +-i sqrt(alpha gamma)
        ```
    """
    _check_model(model)
    y_guess = checked_y0(model, y_guess)
    max_steps = as_count("max_steps", max_steps)
    if solver is None:
        solver = default_root_solver(rtol, atol)
    return _steady_state(model, y_guess, args, solver, max_steps, eigenvalue_tol)


@eqx.filter_jit
def _steady_state(model, y_guess, args, solver, max_steps, eigenvalue_tol) -> SteadyState:
    solution = optx.root_find(
        _residual, solver, y_guess, args=(model, args), max_steps=max_steps, throw=False
    )
    state = solution.value
    size = state.size
    jacobian = jax.jacfwd(_residual)(state, (model, args)).reshape(size, size)
    eigenvalues = jnp.linalg.eigvals(jacobian)
    result = RESULTS.promote(solution.result)
    finite = jnp.all(jnp.isfinite(state)) & jnp.all(jnp.isfinite(jacobian))
    result = RESULTS.where(
        (result == RESULTS.successful) & ~finite, RESULTS.nonfinite_state, result
    )
    stability = classify(eigenvalues, eigenvalue_tol)
    stability = STABILITY.where(result == RESULTS.successful, stability, STABILITY.unknown)
    return SteadyState(
        state=state,
        jacobian=jacobian,
        eigenvalues=eigenvalues,
        stability=stability,
        result=result,
        num_steps=solution.stats["num_steps"],
    )


def _residual(y, model_and_args):
    model, args = model_and_args
    return model(0.0, y, args)


def eigenvalue_kinds(eigenvalues, eigenvalue_tol: float):
    """Which eigenvalues (along the last axis) are complex, have a positive real part, and
    lie on the imaginary axis, to `eigenvalue_tol` times the largest modulus (or 1)."""
    largest = jnp.max(jnp.abs(eigenvalues), axis=-1, keepdims=True)
    tol = eigenvalue_tol * jnp.maximum(1.0, largest)
    real, imag = jnp.real(eigenvalues), jnp.abs(jnp.imag(eigenvalues))
    return imag > tol, real > tol, jnp.abs(real) <= tol


def classify(eigenvalues: Array, eigenvalue_tol: float) -> STABILITY:
    """The [`STABILITY`][simlab.STABILITY] of a fixed point with these Jacobian eigenvalues."""
    is_complex, positive, on_axis = eigenvalue_kinds(eigenvalues, eigenvalue_tol)
    label = STABILITY.stable
    label = STABILITY.where(jnp.any(on_axis & is_complex), STABILITY.hopf_pair, label)
    label = STABILITY.where(jnp.any(on_axis & ~is_complex), STABILITY.zero_eigenvalue, label)
    label = STABILITY.where(jnp.any(positive & is_complex), STABILITY.oscillatory, label)
    return STABILITY.where(jnp.any(positive & ~is_complex), STABILITY.unstable, label)


def _check_model(model) -> None:
    if not isinstance(model, AbstractModel):
        raise TypeError(
            "steady_state needs a simlab.models.AbstractModel (an autonomous vector field "
            f"with named state); got {type(model).__name__}."
        )


# -- Continuation ---------------------------------------------------------------------------


class Bifurcation(eqx.Module):
    """A fold or Hopf point located on a [`simlab.Branch`][].

    **Attributes:**

    - `kind`: `"fold"` (a real eigenvalue crosses zero) or `"hopf"` (a complex pair crosses
      the imaginary axis).
    - `value`: the parameter value, refined by bisection on the test function.
    - `state`: the fixed point there.
    - `index`: the branch point just before the crossing.
    - `eigenvalues`: the Jacobian's eigenvalues there.
    """

    kind: str
    value: float
    state: np.ndarray
    index: int
    eigenvalues: np.ndarray


class Branch(eqx.Module):
    r"""A branch of fixed points across a parameter, from [`simlab.continuation`][].

    **Attributes:**

    - `parameter`: the name of the continued parameter; `values`: its values, `(m,)`.
    - `states`: the fixed point at each value, `(m, n)`; `state_names`: their names.
    - `eigenvalues`: the Jacobian's eigenvalues there, `(m, n)` complex.
    - `stability`: [`simlab.STABILITY`][] codes, `(m,)`; `labels`: their names.
    - `result`: [`simlab.RESULTS`][] codes of each root solve, `(m,)`.
    - `bifurcations`: the folds and Hopf points found, in order of the values.
    - `oscillation_min`, `oscillation_max`: where the fixed point is `oscillatory`, the
      smallest and largest value of each state component over the late part of a
      simulation started next to it (the limit cycle's envelope); `NaN` elsewhere, `(m, n)`.
    """

    parameter: str
    values: np.ndarray
    states: np.ndarray
    state_names: tuple[str, ...]
    eigenvalues: np.ndarray
    stability: np.ndarray
    result: np.ndarray
    bifurcations: tuple[Bifurcation, ...]
    oscillation_min: np.ndarray
    oscillation_max: np.ndarray

    @property
    def succeeded(self) -> np.ndarray:
        return self.result == RESULTS.successful._value

    @property
    def labels(self) -> np.ndarray:
        return np.asarray(STABILITY_LABELS)[self.stability]

    @property
    def is_stable(self) -> np.ndarray:
        return self.stability == STABILITY.stable._value

    @property
    def is_oscillatory(self) -> np.ndarray:
        return self.stability == STABILITY.oscillatory._value


def continuation(
    model: AbstractModel,
    parameter: str,
    values: ArrayLike,
    y_guess: ArrayLike,
    *,
    args: Any = None,
    solver: optx.AbstractRootFinder | None = None,
    rtol: RealNumber = 1e-10,
    atol: RealNumber = 1e-10,
    max_steps: Integer = 256,
    eigenvalue_tol: float = 1e-8,
    refine: bool = True,
    oscillations: bool = True,
    oscillation_time: float | None = None,
    num_oscillation_times: int = 4001,
) -> Branch:
    r"""Follows a branch of fixed points of `model` as `parameter` runs over `values`.

    Natural-parameter continuation: the fixed point at `values[i]` is found by
    [`simlab.steady_state`][] starting from the one at `values[i-1]` (the first from
    `y_guess`), in one compiled `jax.lax.scan`. Between successive converged points the
    eigenvalues of the Jacobian are compared:

    - a **fold** where a real eigenvalue crosses zero: the sign of $\det J = \prod_i
      \lambda_i$ changes;
    - a **Hopf point** where a complex pair crosses the imaginary axis: the number of
      complex eigenvalues with positive real part changes, and so does the sign of the
      test function $\prod_{i<j}(\lambda_i + \lambda_j)$ (the determinant of the
      bialternate product $2J \odot I$, which vanishes when $\lambda_i = -\lambda_j$).

    With `refine=True` each crossing is located by bisection (`optx.Bisection`) on its test
    function, each evaluation a root solve, to the solve's tolerance. A branch that turns
    back at a fold cannot be followed past it by this method: the solves beyond it fail
    (see `result`) or land on another branch.

    Where the fixed point is `oscillatory` and `oscillations=True`, the model is simulated
    ([`simlab.simulate`][], vmapped over the points) from a point next to it, and the
    smallest and largest state over the second half of the run give the oscillation's
    envelope (`NaN` where that simulation fails).

    **Arguments:**

    - `model`: a [`simlab.models.AbstractModel`][] holding the other parameters' values.
    - `parameter`: the name of the parameter to vary.
    - `values`: its values, a strictly monotonic 1-D array (finely spaced: each solve
      starts from the last).
    - `y_guess`: the starting guess of the first root solve.
    - `args`, `solver`, `rtol`, `atol`, `max_steps`, `eigenvalue_tol`: as in
      [`simlab.steady_state`][].
    - `refine`: locate folds and Hopf points by bisection.
    - `oscillations`: simulate the oscillatory points for their envelope.
    - `oscillation_time`: the length of those simulations; `None` takes, for each point,
      the longer of 50 periods $2\pi/|\operatorname{Im}\lambda|$ and 25 e-folding times
      $1/\operatorname{Re}\lambda$ of its unstable pair.
    - `num_oscillation_times`: save times of those simulations (enough to resolve a period).

    **Returns:** a [`simlab.Branch`][].

    !!! example

        ```python
        model = simlab.models.Brusselator(a=1.0, b=1.5)
        branch = simlab.continuation(
            model, "b", jnp.linspace(1.0, 3.0, 81), jnp.array([1.0, 1.5])
        )
        branch.bifurcations[0].value  # 2.0 = 1 + a**2, a Hopf point
        ```
    """
    _check_model(model)
    values = _checked_values(model, parameter, values)
    y_guess = checked_y0(model, y_guess)
    max_steps = as_count("max_steps", max_steps)
    if solver is None:
        solver = default_root_solver(rtol, atol)
    points = _branch(
        model, parameter, jnp.asarray(values), y_guess, args, solver, max_steps, eigenvalue_tol
    )
    points = jax.tree.map(np.asarray, points)
    eigenvalues, stability = points.eigenvalues, points.stability
    succeeded = points.result == RESULTS.successful._value
    bifurcations = _bifurcations(
        model,
        parameter,
        values,
        points,
        succeeded,
        args=args,
        solver=solver,
        max_steps=max_steps,
        eigenvalue_tol=eigenvalue_tol,
        refine=refine,
        rtol=rtol,
        atol=atol,
    )
    oscillatory = stability == STABILITY.oscillatory._value
    envelope_min = np.full(points.state.shape, np.nan)
    envelope_max = np.full(points.state.shape, np.nan)
    if oscillations and np.any(oscillatory):
        lowest, highest = _envelopes(
            model,
            parameter,
            values[oscillatory],
            points.state[oscillatory],
            eigenvalues[oscillatory],
            args=args,
            time=oscillation_time,
            num_times=num_oscillation_times,
            eigenvalue_tol=eigenvalue_tol,
        )
        envelope_min[oscillatory], envelope_max[oscillatory] = lowest, highest
    return Branch(
        parameter=parameter,
        values=values,
        states=points.state,
        state_names=tuple(model.state_names),
        eigenvalues=eigenvalues,
        stability=stability,
        result=points.result,
        bifurcations=tuple(bifurcations),
        oscillation_min=envelope_min,
        oscillation_max=envelope_max,
    )


class _Point(eqx.Module):
    state: Array
    eigenvalues: Array
    result: Array
    stability: Array
    fold_test: Array
    hopf_test: Array


def _with_parameter(model, parameter, value):
    current = getattr(model, parameter)
    return eqx.tree_at(lambda m: getattr(m, parameter), model, value.astype(current.dtype))


def _point(model, y_guess, args, solver, max_steps, eigenvalue_tol) -> _Point:
    fixed_point = _steady_state(model, y_guess, args, solver, max_steps, eigenvalue_tol)
    return _Point(
        state=fixed_point.state,
        eigenvalues=fixed_point.eigenvalues,
        result=fixed_point.result._value,
        stability=fixed_point.stability._value,
        fold_test=fold_test(fixed_point.eigenvalues),
        hopf_test=hopf_test(fixed_point.eigenvalues),
    )


def fold_test(eigenvalues: Array) -> Array:
    r"""$\det J = \prod_i \lambda_i$: changes sign where a real eigenvalue crosses zero."""
    return jnp.real(jnp.prod(eigenvalues))


def hopf_test(eigenvalues: Array) -> Array:
    r"""$\prod_{i<j}(\lambda_i + \lambda_j)$, real and continuous in the Jacobian's entries:
    changes sign where a complex pair crosses the imaginary axis."""
    rows, columns = np.triu_indices(eigenvalues.shape[-1], k=1)
    return jnp.real(jnp.prod(eigenvalues[rows] + eigenvalues[columns]))


@eqx.filter_jit
def _branch(model, parameter, values, y_guess, args, solver, max_steps, eigenvalue_tol):
    def step(guess, value):
        point = _point(
            _with_parameter(model, parameter, value), guess, args, solver, max_steps, eigenvalue_tol
        )
        converged = point.result == RESULTS.successful._value
        return jnp.where(converged, point.state, guess), point

    _, points = jax.lax.scan(step, y_guess, values)
    return points


@eqx.filter_jit
def _locate(model, parameter, lower, upper, y_guess, args, solver, max_steps, kind, tol):
    """The parameter value in `[lower, upper]` where the test function of `kind` is zero."""

    def point_at(value):
        return _point(
            _with_parameter(model, parameter, value), y_guess, args, solver, max_steps, 0.0
        )

    def test(value, _):
        point = point_at(value)
        return point.hopf_test if kind == "hopf" else point.fold_test

    bisection = optx.Bisection(rtol=tol, atol=tol)
    solution = optx.root_find(
        test,
        bisection,
        0.5 * (lower + upper),
        options=dict(lower=lower, upper=upper),
        max_steps=max_steps,
        throw=False,
    )
    return solution.value, point_at(solution.value)


def _crossings(points, succeeded, eigenvalue_tol):
    """(kind, index) for each fold or Hopf crossing between points index and index + 1."""
    is_complex, _, _ = eigenvalue_kinds(points.eigenvalues, eigenvalue_tol)
    complex_unstable = np.sum(np.asarray(is_complex) & (points.eigenvalues.real > 0), axis=1)
    both = succeeded[:-1] & succeeded[1:]
    found = []
    for index in np.flatnonzero(both):
        if _changes_sign(points.fold_test[index : index + 2]):
            found.append(("fold", int(index)))
        if complex_unstable[index] != complex_unstable[index + 1] and _changes_sign(
            points.hopf_test[index : index + 2]
        ):
            found.append(("hopf", int(index)))
    return found


def _changes_sign(pair) -> bool:
    """From a nonzero value to one of the other sign, or to exactly zero (counted once)."""
    return bool(pair[0] != 0 and np.sign(pair[0]) != np.sign(pair[1]))


def _bifurcations(
    model,
    parameter,
    values,
    points,
    succeeded,
    *,
    args,
    solver,
    max_steps,
    eigenvalue_tol,
    refine,
    rtol,
    atol,
) -> list[Bifurcation]:
    found = []
    for kind, index in _crossings(points, succeeded, eigenvalue_tol):
        test = points.fold_test if kind == "fold" else points.hopf_test
        if refine and test[index + 1] != 0:
            lower, upper = sorted((values[index], values[index + 1]))
            value, point = _locate(
                model,
                parameter,
                jnp.asarray(lower),
                jnp.asarray(upper),
                jnp.asarray(points.state[index]),
                args,
                solver,
                max_steps,
                kind,
                max(rtol, atol),
            )
            state, eigenvalues = np.asarray(point.state), np.asarray(point.eigenvalues)
            value = float(value)
        elif test[index + 1] == 0:  # the crossing is on the grid
            value = float(values[index + 1])
            state, eigenvalues = points.state[index + 1], points.eigenvalues[index + 1]
        else:
            value = float(0.5 * (values[index] + values[index + 1]))
            state, eigenvalues = points.state[index], points.eigenvalues[index]
        found.append(Bifurcation(kind, value, state, index, eigenvalues))
    return found


def _horizons(eigenvalues, eigenvalue_tol) -> np.ndarray:
    """Per point: the longer of 50 periods and 25 e-folding times of its unstable pairs."""
    is_complex, positive, _ = eigenvalue_kinds(eigenvalues, eigenvalue_tol)
    unstable_pairs = np.asarray(is_complex & positive)
    growth = np.where(unstable_pairs, eigenvalues.real, np.inf).min(axis=1)
    frequency = np.where(unstable_pairs, np.abs(eigenvalues.imag), np.inf).min(axis=1)
    return np.maximum(50 * 2 * np.pi / frequency, 25 / growth)


def _envelopes(
    model, parameter, values, states, eigenvalues, *, args, time, num_times, eigenvalue_tol
):
    horizons = (
        _horizons(eigenvalues, eigenvalue_tol) if time is None else np.full(values.size, time)
    )
    # Start a small step away from each fixed point (it is unstable, so the step grows).
    starts = states * (1 + 1e-3) + 1e-3
    lowest, highest = _simulated_envelopes(
        model,
        parameter,
        jnp.asarray(values),
        jnp.asarray(starts),
        jnp.asarray(horizons),
        args,
        num_times,
    )
    return np.asarray(lowest), np.asarray(highest)


@eqx.filter_jit
def _simulated_envelopes(model, parameter, values, starts, horizons, args, num_times):
    """The smallest and largest state over the second half of each point's simulation."""
    # No gradients are taken: explicit solves can take the lean loop.
    integrator = "auto" if model.is_stiff else "lean"

    def envelope(value, start, horizon):
        trajectory = simulate(
            _with_parameter(model, parameter, value),
            start,
            jnp.linspace(0.0, horizon, num_times),
            args=args,
            throw=False,
            integrator=integrator,
        )
        late = jnp.where(trajectory.succeeded, trajectory.ys[num_times // 2 :], jnp.nan)
        return jnp.min(late, axis=0), jnp.max(late, axis=0)

    return jax.vmap(envelope)(values, starts, horizons)


def _checked_values(model: AbstractModel, parameter: str, values: ArrayLike) -> np.ndarray:
    if parameter not in model.parameter_names():
        raise ValueError(
            f"unknown parameter {parameter!r} for {type(model).__name__}; its parameters are "
            f"{list(model.parameter_names())}."
        )
    if np.ndim(getattr(model, parameter)) != 0:
        raise ValueError(f"continuation varies a scalar parameter; {parameter!r} is an array.")
    values = np.asarray(values, dtype=np.asarray(getattr(model, parameter)).dtype)
    if values.ndim != 1 or values.size < 2:
        raise ValueError(
            f"values must be a 1-D array of at least two parameter values; got shape "
            f"{values.shape}."
        )
    if not np.all(np.isfinite(values)):
        raise ValueError("values must be finite; drop NaN and inf.")
    steps = np.diff(values)
    if not (np.all(steps > 0) or np.all(steps < 0)):
        raise ValueError(
            "values must be strictly increasing or strictly decreasing: each solve starts "
            "from the previous fixed point."
        )
    bounds = model.parameter_bounds()[parameter]
    outside = ~bounds.contains(values)
    if np.any(outside):
        raise ValueError(
            f"{type(model).__name__}: {parameter!r} must lie in {bounds.describe()}; got "
            f"{values[int(np.argmax(outside))]:g}. Narrow the range of values."
        )
    return values
