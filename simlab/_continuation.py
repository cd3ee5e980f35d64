r"""`continuation`: a branch of fixed points across a parameter, followed round its folds by
pseudo-arclength continuation, with the folds and Hopf points on it.

The branch is a curve $x(s) = (y(s), p(s))$ of solutions of $f(y; p) = 0$, parametrised by
its length $s$, so it can turn back in $p$. Lengths are measured in scaled coordinates
$z = x / c$: the parameter in units of the widest spacing of the requested values, the
state in units of its size at the start (at least 1).
"""

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, ArrayLike

from ._misc import Integer, RealNumber, as_count, warn_at_caller
from ._results import RESULTS, status_name
from ._simulate import checked_y0, simulate
from ._steady_state import (
    STABILITY,
    STABILITY_LABELS,
    check_model,
    default_root_solver,
    described,
    eigenvalue_kinds,
    residual,
    root_defaults,
)
from .models._base import AbstractModel

# The longest step: two spacings of the requested values, so that on a branch sloping
# gently in the scaled coordinates the next requested value is always within reach.
MAX_STEP = 2.0
# A corrector that fails even for a step this short has met a point it cannot pass.
MIN_STEP = 1e-6
STEP_GROWTH = 1.5
# A step over which the tangent turns by more (about 26 degrees) is retried shorter: a
# longer one may cut a corner of the branch or land on another branch.
MIN_TANGENT_COSINE = 0.9
# A corrector that moves the point further than this fraction of the step has jumped to
# another branch (one turning as much as a step allows departs from its tangent by 0.23).
MAX_CORRECTION = 0.5
CORRECTOR_STEPS = 16

# Why the walk along the branch stopped.
RUNNING, LEFT_RANGE, START_FAILED, STUCK, FULL = range(5)


class Bifurcation(eqx.Module):
    """A fold or Hopf point located on a [`simlab.Branch`][].

    **Attributes:**

    - `kind`: `"fold"` (a real eigenvalue crosses zero: the branch turns back in the
      parameter, or meets another branch) or `"hopf"` (a complex pair crosses the
      imaginary axis).
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

    - `parameter`: the name of the continued parameter; `values`: its value at each point,
      `(m,)`, in order along the branch: every requested value the branch crosses (twice
      or more where it folds back), and the points between where it turns.
    - `states`: the fixed point at each value, `(m, n)`; `state_names`: their names.
    - `eigenvalues`: the Jacobian's eigenvalues there, `(m, n)` complex.
    - `stability`: [`simlab.STABILITY`][] codes, `(m,)`; `labels`: their names.
    - `result`: [`simlab.RESULTS`][] codes of each root solve, `(m,)`.
    - `bifurcations`: the folds and Hopf points found, in order along the branch.
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

    def plot(self, component: int | str = 0, **kwargs):
        """The figure of the branch, as `simlab run` draws it: one state component against
        the parameter, stable fixed points solid and unstable ones dashed, a limit cycle's
        envelope where the fixed point is oscillatory, folds and Hopf points marked.

        **Arguments:**

        - `component`: the state component to draw, by index or by name.
        - `kwargs`: passed to [`simlab.plot.bifurcation`][] (e.g. `annotate=False`).

        **Returns:** the matplotlib `Figure` (a notebook shows it inline).

        !!! example

            ```python
            branch = simlab.continuation(model, "mu", jnp.linspace(-1.0, 1.0, 41), y_guess)
            figure = branch.plot("x")
            ```
        """
        from .plot._bifurcation import bifurcation

        return bifurcation(self, component, **kwargs).figure


class ContinuationWarning(UserWarning):
    """A branch stopped before it left the range of the requested values."""


def continuation(
    model: AbstractModel,
    parameter: str,
    values: ArrayLike,
    y_guess: ArrayLike,
    *,
    args: Any = None,
    solver: optx.AbstractRootFinder | None = None,
    rtol: RealNumber | None = None,
    atol: RealNumber | None = None,
    max_steps: Integer = 256,
    eigenvalue_tol: float | None = None,
    refine: bool = True,
    oscillations: bool = True,
    oscillation_time: float | None = None,
    num_oscillation_times: int = 4001,
    max_points: Integer | None = None,
) -> Branch:
    r"""Follows a branch of fixed points of `model` as `parameter` runs over `values`,
    round the folds where it turns back.

    Pseudo-arclength continuation (Keller's method, as in AUTO and BifurcationKit): the
    first fixed point is found by [`simlab.steady_state`][] at `values[0]` from `y_guess`;
    each next point is predicted along the branch's tangent $t$ and corrected by Newton's
    method on $f(y; p) = 0$ together with $t \cdot (x - x_k) = \Delta s$, which stays
    well posed where $\partial f/\partial y$ is singular, so the branch is followed
    through a fold onto its unstable part. Where a requested value lies within the next
    step, the step lands on it exactly (a root solve at that value), so a branch that
    never turns back is returned at exactly `values`; where that solve fails (a requested
    value on a fold, where it is singular), the step is taken by arclength instead and goes
    round the fold. A step whose tangent turns too much
    or whose corrector fails is retried shorter; the walk ends when the branch leaves the
    range of `values`. It runs as one compiled `jax.lax.while_loop`.

    Between successive points the eigenvalues of the Jacobian are compared:

    - a **fold** where a real eigenvalue crosses zero: the sign of $\det J = \prod_i
      \lambda_i$ changes (where the branch turns back, or meets another branch);
    - a **Hopf point** where a complex pair crosses the imaginary axis: the number of
      complex eigenvalues with positive real part changes, and so does the sign of the
      test function $\prod_{i<j}(\lambda_i + \lambda_j)$ (the determinant of the
      bialternate product $2J \odot I$, which vanishes when $\lambda_i = -\lambda_j$).

    With `refine=True` each crossing is located by bisection (`optx.Bisection`) on its test
    function along the chord between the two points, each evaluation a corrector solve,
    to the solve's tolerance.

    Where the fixed point is `oscillatory` and `oscillations=True`, the model is simulated
    ([`simlab.simulate`][], vmapped over the points) from a point next to it, and the
    smallest and largest state over the second half of the run give the oscillation's
    envelope (`NaN` where that simulation fails).

    **Arguments:**

    - `model`: a [`simlab.models.AbstractModel`][] holding the other parameters' values.
    - `parameter`: the name of the parameter to vary.
    - `values`: the requested values, a strictly monotonic 1-D array: the range the branch
      is followed over, the points it is returned at, and (by their widest spacing) the
      scale of the steps in the parameter: finely spaced values resolve the branch finely.
    - `y_guess`: the starting guess of the first root solve.
    - `args`, `solver`, `rtol`, `atol`, `max_steps`, `eigenvalue_tol`: as in
      [`simlab.steady_state`][] (their defaults by the precision of `y_guess`); the solver
      also corrects each step.
    - `refine`: locate folds and Hopf points by bisection.
    - `oscillations`: simulate the oscillatory points for their envelope.
    - `oscillation_time`: the length of those simulations; `None` takes, for each point,
      the longer of 50 periods $2\pi/|\operatorname{Im}\lambda|$ and 25 e-folding times
      $1/\operatorname{Re}\lambda$ of its unstable pair.
    - `num_oscillation_times`: save times of those simulations (enough to resolve a period).
    - `max_points`: the most points the branch may hold (default `4 * len(values) + 100`).

    **Returns:** a [`simlab.Branch`][]. A branch that stops early (its first solve failed,
    a corrector failed at the shortest step, or `max_points` ran out) warns.

    !!! example

        ```python
        model = simlab.models.Brusselator(a=1.0, b=1.5)
        branch = simlab.continuation(
            model, "b", jnp.linspace(1.0, 3.0, 81), jnp.array([1.0, 1.5])
        )
        branch.bifurcations[0].value  # 2.0 = 1 + a**2, a Hopf point
        ```
    """
    check_model(model)
    values = _checked_values(model, parameter, values)
    y_guess = checked_y0(model, y_guess)
    max_steps = as_count("max_steps", max_steps)
    max_points = _checked_max_points(max_points, values.size)
    rtol, atol, eigenvalue_tol = root_defaults(y_guess.dtype, rtol, atol, eigenvalue_tol)
    curve = _Curve(
        model=model,
        parameter=parameter,
        args=args,
        shape=tuple(y_guess.shape),
        solver=default_root_solver(rtol, atol) if solver is None else solver,
        max_steps=max_steps,
        eigenvalue_tol=eigenvalue_tol,
    )
    spacing = jnp.asarray(np.max(np.abs(np.diff(values))))
    walk = jax.tree.map(np.asarray, _walk(curve, jnp.asarray(values), spacing, y_guess, max_points))
    points = jax.tree.map(lambda column: column[: int(walk.count)], walk.points)
    _warn_if_stopped(walk, points, parameter, values, max_points)
    bifurcations = _bifurcations(
        dataclasses.replace(curve, scale=jnp.asarray(walk.scale)),
        points,
        refine=refine,
        tol=max(rtol, atol),
    )
    oscillatory = points.stability == STABILITY.oscillatory._value
    envelope_min = np.full(points.state.shape, np.nan)
    envelope_max = np.full(points.state.shape, np.nan)
    if oscillations and np.any(oscillatory):
        lowest, highest = _envelopes(
            model,
            parameter,
            points.value[oscillatory],
            points.state[oscillatory],
            points.eigenvalues[oscillatory],
            args=args,
            time=oscillation_time,
            num_times=num_oscillation_times,
            eigenvalue_tol=eigenvalue_tol,
        )
        envelope_min[oscillatory], envelope_max[oscillatory] = lowest, highest
    return Branch(
        parameter=parameter,
        values=points.value,
        states=points.state,
        state_names=tuple(model.state_names),
        eigenvalues=points.eigenvalues,
        stability=points.stability,
        result=points.result,
        bifurcations=tuple(bifurcations),
        oscillation_min=envelope_min,
        oscillation_max=envelope_max,
    )


def _with_parameter(model, parameter: str, value):
    current = getattr(model, parameter)
    return eqx.tree_at(lambda m: getattr(m, parameter), model, value.astype(current.dtype))


class _Curve(eqx.Module):
    """The solution curve $f(y; p) = 0$ in the coordinates $x = (y, p)$, `y` flattened, and
    the solves that find points on it. Distances along it are measured in $z = x / c$,
    $c$ the `scale`."""

    model: Any
    parameter: str = eqx.field(static=True)
    args: Any
    shape: tuple[int, ...] = eqx.field(static=True)
    solver: optx.AbstractRootFinder
    max_steps: int = eqx.field(static=True)
    eigenvalue_tol: float = eqx.field(static=True)
    scale: Array | None = None

    def field(self, x: Array) -> Array:
        """$f(y; p)$, flattened."""
        model = _with_parameter(self.model, self.parameter, x[-1])
        return residual(x[:-1].reshape(self.shape), (model, self.args)).ravel()

    def solve_at(self, value: Array, guess: Array):
        """The fixed point at parameter `value` exactly, by a root solve from `guess`."""
        solution = optx.root_find(
            residual,
            self.solver,
            guess.reshape(self.shape),
            args=(_with_parameter(self.model, self.parameter, value), self.args),
            max_steps=self.max_steps,
            throw=False,
        )
        x = jnp.append(solution.value.ravel(), value)
        return x, solution.result, solution.stats["num_steps"]

    def corrected(self, origin: Array, direction: Array, distance, guess: Array, max_steps: int):
        r"""The point on the curve a scaled `distance` from `origin` along the unit
        `direction`: the root of $f(x) = 0$, $\text{direction} \cdot (z - z_0) = $
        `distance`, from `guess`. Well posed where $\partial f/\partial y$ is singular."""

        def augmented(candidate, _):
            along = jnp.dot(direction, (candidate - origin) / self.scale) - distance
            return jnp.append(self.field(candidate), along)

        solution = optx.root_find(augmented, self.solver, guess, max_steps=max_steps, throw=False)
        return solution.value, solution.result, solution.stats["num_steps"]

    def point(self, x: Array, result, num_steps):
        r"""The point `x`, found by a solve that ended with `result`, and $\partial f/\partial x$
        there."""
        jacobian = jax.jacfwd(self.field)(x)
        steady = described(x[:-1], jacobian[:, :-1], result, num_steps, self.eigenvalue_tol)
        point = _Point(
            value=x[-1],
            state=x[:-1].reshape(self.shape),
            eigenvalues=steady.eigenvalues,
            result=steady.result._value,
            stability=steady.stability._value,
            fold_test=fold_test(steady.eigenvalues),
            hopf_test=hopf_test(steady.eigenvalues),
        )
        return point, jacobian

    def tangent(self, jacobian: Array, previous: Array) -> Array:
        r"""The unit tangent in scaled coordinates, oriented along `previous`: the solution
        of $[\partial f/\partial z;\ t_\text{prev}^\top]\, t = (0, 1)$. In the least-squares
        sense, so that where two branches cross it keeps to the one it came along."""
        bordered = jnp.concatenate([jacobian * self.scale[None, :], previous[None, :]])
        tangent = jnp.linalg.lstsq(bordered, jnp.zeros_like(previous).at[-1].set(1.0))[0]
        return tangent / jnp.linalg.norm(tangent)


class _Point(eqx.Module):
    value: Array
    state: Array
    eigenvalues: Array
    result: Array
    stability: Array
    fold_test: Array
    hopf_test: Array


class _Walk(eqx.Module):
    points: _Point  # one row per point; the first `count` are the branch
    count: Array
    ending: Array  # RUNNING, LEFT_RANGE, START_FAILED, STUCK or FULL
    x: Array  # the last point accepted
    tangent: Array
    step: Array
    scale: Array
    may_land: Array  # whether the next step may land on a requested value


def fold_test(eigenvalues: Array) -> Array:
    r"""$\det J = \prod_i \lambda_i$: changes sign where a real eigenvalue crosses zero."""
    return jnp.real(jnp.prod(eigenvalues))


def hopf_test(eigenvalues: Array) -> Array:
    r"""$\prod_{i<j}(\lambda_i + \lambda_j)$, real and continuous in the Jacobian's entries:
    changes sign where a complex pair crosses the imaginary axis."""
    rows, columns = np.triu_indices(eigenvalues.shape[-1], k=1)
    return jnp.real(jnp.prod(eigenvalues[rows] + eigenvalues[columns]))


@eqx.filter_jit
def _walk(curve: _Curve, values, spacing, y_guess, max_points: int) -> _Walk:
    """Walks along the branch from `values[0]` until it leaves the range of `values`."""
    x, result, num_steps = curve.solve_at(values[0], y_guess)
    first, jacobian = curve.point(x, result, num_steps)
    # Scales: the parameter's spacing, and the size of the first fixed point (at least 1).
    size = jnp.maximum(1.0, jnp.max(jnp.abs(x[:-1])))
    curve = dataclasses.replace(
        curve, scale=jnp.append(jnp.full(x.size - 1, size), spacing).astype(x.dtype)
    )
    points = jax.tree.map(lambda v: jnp.zeros((max_points, *v.shape), v.dtype).at[0].set(v), first)
    started = first.result == RESULTS.successful._value
    walk = _Walk(
        points=points,
        count=jnp.array(1),
        ending=jnp.where(started, RUNNING, START_FAILED).astype(jnp.int32),
        x=x,
        tangent=curve.tangent(jacobian, jnp.zeros_like(x).at[-1].set(values[1] - values[0])),
        step=jnp.array(MAX_STEP, x.dtype),
        scale=curve.scale,
        may_land=jnp.array(True),
    )
    ordered = jnp.sort(values)

    def advance(walk: _Walk) -> _Walk:
        new_x, point, tangent, accepted, landing = _step(
            curve, ordered, walk.x, walk.tangent, walk.step, walk.may_land
        )
        inside = (ordered[0] <= new_x[-1]) & (new_x[-1] <= ordered[-1])
        store = accepted & inside
        count = walk.count
        points = jax.tree.map(
            lambda column, new: column.at[count].set(jnp.where(store, new, column[count])),
            walk.points,
            point,
        )
        count = count + store.astype(count.dtype)
        # A failed landing (the requested value at a fold, where the root solve at that
        # value is singular) is retried as a full arclength step, which goes round it.
        retry_arclength = ~accepted & landing
        shorter = jnp.where(retry_arclength, walk.step, walk.step / 2)
        ending = jnp.where(accepted & ~inside, LEFT_RANGE, RUNNING)
        ending = jnp.where(~accepted & (shorter < MIN_STEP), STUCK, ending)
        ending = jnp.where(count == max_points, FULL, ending).astype(jnp.int32)
        return _Walk(
            points=points,
            count=count,
            ending=ending,
            x=jnp.where(accepted, new_x, walk.x),
            tangent=jnp.where(accepted, tangent, walk.tangent),
            step=jnp.where(accepted, jnp.minimum(MAX_STEP, STEP_GROWTH * walk.step), shorter),
            scale=walk.scale,
            may_land=accepted,
        )

    return jax.lax.while_loop(lambda walk: walk.ending == RUNNING, advance, walk)


def _step(curve: _Curve, ordered: Array, x: Array, tangent: Array, step: Array, may_land):
    """One predictor-corrector step from `x`: onto the next requested value when it lies
    within `step` along the tangent and `may_land` (a root solve at that value), else a
    full `step` (the arclength corrector). Returns the new point, its record and tangent,
    whether the step is accepted (solved, and neither turning too much nor corrected too
    far) and whether it tried to land."""
    target, reach = _next_value(ordered, x, tangent, curve.scale)
    land = may_land & (reach <= step)
    length = jnp.where(land, reach, step)
    predicted = x + length * curve.scale * tangent
    new_x, result, num_steps = jax.lax.cond(
        land,
        lambda: curve.solve_at(target, predicted[:-1]),
        lambda: curve.corrected(x, tangent, step, predicted, CORRECTOR_STEPS),
    )
    point, jacobian = curve.point(new_x, result, num_steps)
    new_tangent = curve.tangent(jacobian, tangent)
    accepted = (
        (point.result == RESULTS.successful._value)
        & (jnp.dot(new_tangent, tangent) >= MIN_TANGENT_COSINE)
        & (jnp.linalg.norm((new_x - predicted) / curve.scale) <= MAX_CORRECTION * length)
    )
    return new_x, point, new_tangent, accepted, land


def _next_value(ordered: Array, x: Array, tangent: Array, scale: Array):
    """The next requested value in the direction the branch travels in the parameter, and
    the scaled step along the tangent that reaches it (`inf` when there is none)."""
    index = jnp.where(
        tangent[-1] > 0,
        jnp.searchsorted(ordered, x[-1], side="right"),
        jnp.searchsorted(ordered, x[-1], side="left") - 1,
    )
    target = ordered[jnp.clip(index, 0, ordered.size - 1)]
    reach = (target - x[-1]) / (scale[-1] * tangent[-1])
    ahead = (index >= 0) & (index < ordered.size) & (reach > 0)
    return target, jnp.where(ahead, reach, jnp.inf)


def _warn_if_stopped(walk: _Walk, points: _Point, parameter: str, values, max_points) -> None:
    ending, last = int(walk.ending), f"{parameter} = {float(points.value[-1]):g}"
    if ending == START_FAILED:
        message = (
            f"the first fixed point, at {parameter} = {values[0]:g}, was not found (status "
            f"{status_name(int(points.result[0]))}); the branch is that one failed point. Pass "
            "a y_guess nearer a fixed point."
        )
    elif ending == STUCK:
        message = (
            f"the branch stops at {last}: the corrector fails there even for the shortest "
            "step (the branch may meet another, or the model may not be finite beyond). The "
            "points up to there are returned."
        )
    elif ending == FULL:
        message = (
            f"the branch stops at {last} after max_points = {max_points} points, before "
            "leaving the range of values; pass a larger max_points."
        )
    else:
        return
    warn_at_caller(message, ContinuationWarning)


def _crossings(points: _Point, succeeded, eigenvalue_tol):
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


def _bifurcations(curve: _Curve, points: _Point, *, refine: bool, tol: float):
    """The folds and Hopf points between successive points, located when `refine`."""
    succeeded = points.result == RESULTS.successful._value
    found = []
    for kind, index in _crossings(points, succeeded, curve.eigenvalue_tol):
        test = points.fold_test if kind == "fold" else points.hopf_test
        if refine and test[index + 1] != 0:
            start, end = (
                jnp.append(points.state[i].ravel(), points.value[i]) for i in (index, index + 1)
            )
            point = _locate(curve, start, end, kind, bool(test[index] > 0), tol)
            value, state = float(point.value), np.asarray(point.state)
            eigenvalues = np.asarray(point.eigenvalues)
        elif test[index + 1] == 0:  # the crossing is on a point
            value = float(points.value[index + 1])
            state, eigenvalues = points.state[index + 1], points.eigenvalues[index + 1]
        else:
            value = float(0.5 * (points.value[index] + points.value[index + 1]))
            state, eigenvalues = points.state[index], points.eigenvalues[index]
        found.append(Bifurcation(kind, value, state, index, eigenvalues))
    return found


@eqx.filter_jit
def _locate(curve: _Curve, start: Array, end: Array, kind: str, falls: bool, tol: float):
    """The point between `start` and `end` where the test function of `kind` is zero,
    by bisection along their chord: each trial is the curve's point a distance `sigma`
    along the chord. `falls`: whether the test function goes from positive to negative
    (as its values at the two points say; recomputed at an end that is itself nearly a
    root, it could have either sign)."""
    chord = (end - start) / curve.scale
    length = jnp.linalg.norm(chord)
    direction = chord / length

    def point_at(sigma):
        guess = start + sigma * curve.scale * direction
        return curve.point(*curve.corrected(start, direction, sigma, guess, curve.max_steps))[0]

    def test(sigma, _):
        point = point_at(sigma)
        return point.hopf_test if kind == "hopf" else point.fold_test

    solution = optx.root_find(
        test,
        optx.Bisection(rtol=tol, atol=tol, flip=falls),
        0.5 * length,
        options=dict(lower=jnp.zeros_like(length), upper=length),
        max_steps=curve.max_steps,
        throw=False,
    )
    return point_at(solution.value)


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


def _checked_max_points(max_points, num_values: int) -> int:
    if max_points is None:
        return 4 * num_values + 100
    return as_count("max_points", max_points, minimum=2)


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
            "values must be strictly increasing or strictly decreasing: they give the range "
            "the branch is followed over and the points it is returned at."
        )
    bounds = model.parameter_bounds()[parameter]
    outside = ~bounds.contains(values)
    if np.any(outside):
        raise ValueError(
            f"{type(model).__name__}: {parameter!r} must lie in {bounds.describe()}; got "
            f"{values[int(np.argmax(outside))]:g}. Narrow the range of values."
        )
    return values
