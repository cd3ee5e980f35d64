"""`simulate`: validate the inputs, select a solver and an integrator, solve, check, wrap.

Decisions (solver, integrator, fixed step) follow from the model's declarations, shapes,
dtypes and the `SolveOptions`; the integrators of `simlab.integrate.INTEGRATORS` each
solve one `simlab.integrate.Problem` into a `simlab.integrate.Solution`, which `simulate`
checks (non-finite states, failures the inputs already show) and wraps as a `Trajectory`.
"""

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Real

from . import _misc
from ._misc import Integer, is_concrete, nan_where, warn_at_caller
from ._options import DEFAULT_MAX_STEPS, SolveOptions, merged_options, tolerances
from ._results import RESULTS, SimulationError, Trajectory, quoted_status
from .integrate._closures import with_closed_over_tracers_held
from .integrate._events import Event, check_event
from .integrate._interface import AbstractIntegrator, Problem, Solution
from .integrate._loops import fixed_steps_per_interval
from .integrate._mass import refuse_mass_matrix
from .integrate._registry import select_integrator
from .integrate._sde import checked_stochastic_inputs
from .integrate._selection import default_solver
from .integrate._solvers import (
    has_error_estimate,
    is_implicit,
    is_stiff_solver,
    is_stochastic_solver,
    resolve_solver,
    solver_name,
)
from .models._base import AbstractModel

# How the lean loop differentiates for each adjoint it runs (see `lean_solve`).
LEAN_DERIVATIVES = {None: "auto", "forward": "forward", "checkpoint": "reverse"}
LEAN_ADJOINTS = tuple(LEAN_DERIVATIVES)
STABLE_STEP_SAFETY = 0.9  # a step at the exact limit leaves the fastest mode undamped
# What JAX raises for forward mode through a custom_vjp (reverse-mode-only) function.
FORWARD_MODE_REFUSAL = "can't apply forward-mode autodiff (jvp) to a custom_vjp function"
# What JAX raises for a loop whose carry gains varying mesh axes inside `jax.shard_map`.
VARYING_AXES_REFUSAL = "the manual axis types do not match"
EVENT_ROOT_TOLERANCE = 1e-12  # on the event time, relative and absolute (Newton on Diffrax)
STOCHASTIC_BLOW_UP_REMEDY = (
    " For a stochastic model at fixed steps: pass a smaller dt0, or solver='spark' with "
    "adaptive=True, whose steps shrink where the drift is steep or the noise large."
)


def simulate(
    model: Callable[[Any, Array, Any], Array],
    y0: ArrayLike | Sequence[float],
    ts: ArrayLike | Sequence[float],
    *,
    options: SolveOptions | None = None,
    solver: Any = None,
    rtol: Real[ArrayLike, ""] | None = None,
    atol: Real[ArrayLike, ""] | None = None,
    dt0: Real[ArrayLike, ""] | None = None,
    adaptive: bool = True,
    max_steps: Integer = DEFAULT_MAX_STEPS,
    adjoint: str | dfx.AbstractAdjoint | None = None,
    throw: bool = True,
    args: Any = None,
    integrator: str = "auto",
    event: Event | None = None,
    key: Any = None,
    unstable_step: str = "raise",
) -> Trajectory:
    r"""Solves the initial value problem $\dot y = f(t, y)$, $y(t_0) = y_0$, saving at `ts`.

    **Arguments:**

    - `model`: a [`simlab.models.AbstractModel`][] or any callable `f(t, y, args)`. A
      function may close over the values that `jax.grad` or `jax.vmap` transforms (a
      field defined inside the loss, say): they are differentiated and batched as if
      passed in `args`.
    - `y0`: the initial state at `ts[0]`, of shape `model.state_shape`. Its dtype is the
      precision of the whole solve: the model's floating-point parameters (and other array
      leaves) and `ts` are cast to it, so a float32 `y0` with float64 parameters (as
      `jax_enable_x64` makes them) solves in float32, and a float64 `y0` with float32
      parameters in float64; `.ys` and `.ts` come back in that dtype. Values `simulate`
      cannot cast (in `args`, or closed over by a plain function) must already be in it:
      a vector field that returns another dtype is refused with a `ValueError` naming both.
    - `ts`: strictly increasing save times; the solve runs from `ts[0]` to `ts[-1]`.
    - `options`: all the solve settings below as one [`simlab.SolveOptions`][]; pass
      either `options` or the individual keywords.
    - `solver`: a name in `simlab.SOLVERS`, or a solver object that a registered
      integrator runs (Diffrax solvers, `simlab.integrate.Rodas5P`, `ETDRK4`, ...). `None`
      picks `Tsit5`, unless the span would take Tsit5 more than
      `simlab.integrate.EXPLICIT_STEP_LIMIT` steps for stability alone (from
      `model.max_stable_step`: grid models whose diffusion limits the step, Van der Pol)
      or, where that count is unknown, the model declares itself stiff (`stiff = True`);
      then the Rosenbrock method `Rodas5P` (dense Jacobian, one LU per step), or
      above 256 state components `Kvaerno5` with matrix-free Newton–GMRES, and
      `Trajectory.solver_choice` says why. The estimate needs the parameters and `ts` as
      values: a model built inside `jit` or batched by `vmap` is judged by its declaration
      alone (build it outside, or name the solver); `sweep` and `fit` pin the choice made
      for their starting model.
    - `rtol`, `atol`: tolerances of the adaptive step-size controller; `None` follows the
      precision of the state (`1e-6`, `1e-9` in float64; `1e-4`, `1e-7` in float32, where
      tighter tolerances chase roundoff: an `rtol` below 100 machine epsilons warns).
    - `dt0`: the initial step (`None`: chosen automatically). With `adaptive=False` it is
      the fixed step; grid models then check it against their stability limit
      (`model.max_stable_step`, computed from the parameters, traced or not): a larger
      `dt0` fails with the status `RESULTS.unstable_step` (raised at top level, returned
      as `.result` with `throw=False` or under `vmap`), and `dt0=None` picks a stable step.
      `unstable_step="warn"` forces such a `dt0`: it runs, with a warning naming the limit.
    - `adaptive`: adapt the step to meet `rtol`/`atol` (`True`) or take fixed steps.
    - `max_steps`: the most steps the solver may take before reporting failure.
    - `adjoint`: how to differentiate the solve. `None` (the default) is for reverse mode
      (`jax.grad`) and chooses: on the lean loop, when at most 16 scalars are
      differentiated (parameters and `y0`, counted statically from what `jax.grad`
      perturbs), their sensitivities are carried along in the step (forward
      sensitivities, which reverse mode contracts); with more, reverse mode through the
      loop (every step stored where it fits in memory, checkpoints otherwise). Elsewhere
      `None` is Diffrax's checkpointed reverse mode. `"forward"` is for forward mode
      (`jax.jvp`, `jax.jacfwd`; by sensitivities on the lean loop): forward mode through
      a solve that differentiates in reverse mode only raises a ValueError that says so.
      `"checkpoint"` asks for reverse mode through the loop whatever the count;
      `"reversible"`, for the symmetric symplectic solvers (`"verlet"`, `"forest_ruth"`,
      `"yoshida6"`), rebuilds each state on the backward pass by a step backwards instead
      of storing it (memory independent of the number of steps; reverse mode only); also
      `"direct"`, `"backsolve"`, or a Diffrax adjoint.
    - `throw`: raise on a failed solve: a `simlab.SimulationError` that starts with the
      status message, at top level and under `jax.vmap` or `jax.grad` outside `jit`. Inside
      your own `jax.jit` only the compiled code knows the status, and JAX raises its
      `JaxRuntimeError` ("INTERNAL: CpuCallback error ..."), which quotes the status
      message after its traceback. Under `jax.vmap` pass `throw=False` and read `.result`
      per member instead: a failed member then never affects the others. On a GPU or TPU,
      whose compiled programs cannot raise, only the top-level call raises (once the solve
      has returned): under `jit`, `vmap` or `grad` a failed solve's `.ys` are NaN, per
      member, and `.result` says why.
    - `args`: passed through to `model(t, y, args)`.
    - `integrator`: `"auto"` (default) solves explicit Runge–Kutta methods (fixed or
      adaptive steps) with simlab's lean loop, 7–20x faster than Diffrax under `jax.vmap`
      on CPU, `"rodas5p"` and `"radau5"` with simlab's stiff integrator, `"etdrk4"`
      (split models on periodic grids, fixed steps) in Fourier space, `"kencarp3/4/5"`
      on split models as IMEX (linear part implicit, matrix-free), and everything else
      with `diffrax.diffeqsolve`; a name in `simlab.integrate.integrator_names()` forces
      one. The lean loop lands steps on every save time and takes `adjoint=None`,
      `"forward"` or `"checkpoint"`. `"kernel"` runs a `jax.vmap` batch of explicit
      Runge–Kutta solves as one Pallas kernel, adaptive (each member with the lean
      loop's own steps) or at fixed steps (concrete `ts` and `dt0`); derivatives are the
      lean loop's, or with `adjoint="forward"` and fixed steps forward mode in the
      kernel; `"auto"` takes it on a TPU where the vector field's primitives compile
      there. See the performance page and `simlab.integrate`.

    - `event`: a [`simlab.Event`][]: the first time its condition crosses zero is found by
      root finding on the solution and returned as `.event_time` (differentiable), the
      state there as `.event_state`; a terminating event stops the solve there (the save
      times after it hold `NaN`). Events run on the lean loop, on Diffrax and on the stiff
      solvers `"rodas5p"` and `"radau5"` (on their dense output; differential-algebraic
      models included). See the events page.
    - `key`: for a stochastic model ([`simlab.models.AbstractSDEModel`][]), the JAX key
      its Brownian increments are drawn from (`jax.random.key(seed)`): the same key, `ts`
      and `dt0` give the same path (`simlab.integrate.brownian_path` returns it). Required
      for stochastic models, refused for deterministic ones. Stochastic models take fixed
      steps (`adaptive=False`, `dt0=...`) with `"sra1"` (additive noise, strong order
      1.5), `"milstein"` (diagonal or scalar noise, order 1) or `"euler_maruyama"` (any
      noise, order 1/2); `solver=None` picks the first the noise allows, and `"baoab"` for
      a Langevin thermostat ([`simlab.models.Langevin`][]). Adaptive steps are asked for
      with `solver="spark"` (`adaptive=True`, `rtol`, `atol`): Diffrax's SPaRK on a
      virtual Brownian tree built from the key (`brownian_path(key, ts)` returns it at
      `ts`), many times slower a step. See the SDE page.

    Hamiltonian models ([`simlab.models.AbstractHamiltonianModel`][]) run on any ODE solver,
    and with fixed steps on the symplectic splitting methods `"verlet"`,
    `"symplectic_euler"`, `"forest_ruth"`, `"mclachlan4"` and `"yoshida6"`, whose energy
    error stays bounded; a `dt0` above the method's stability limit at `y0` is refused,
    `dt0=None` takes a step chosen for the energy error, and a solve whose energy changes
    by more than `simlab.integrate.ENERGY_TOLERANCE` fails with `RESULTS.energy_drift`. See
    the Hamiltonian page.

    **Returns:** a [`simlab.Trajectory`][] with `.ts`, `.ys`, `.result`, `.stats`, the
    `solver` and `integrator` that ran (`"lean"`, `"stiff"`, `"exponential"` for ETDRK4,
    `"imex"` for KenCarp on a split model, `"symplectic"` for the splitting methods, or
    `"diffrax"`), and `.event_time`, `.event_state` with an event.

    !!! example

        ```python
        import jax
        import jax.numpy as jnp
        import simlab

        model = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)
        ts = jnp.linspace(0.0, 1.0, 11)
        trajectory = simlab.simulate(model, jnp.array([1.0, 1.0, 1.0]), ts)
        trajectory.ys.shape  # (11, 3)
        ```
    """
    keywords = dict(
        solver=solver,
        rtol=rtol,
        atol=atol,
        dt0=dt0,
        adaptive=adaptive,
        max_steps=max_steps,
        adjoint=adjoint,
        integrator=integrator,
        unstable_step=unstable_step,
    )
    options = merged_options(options, keywords)
    given_ts, ts = ts, checked_ts(ts)
    y0 = checked_y0(model, y0)
    model, ts = in_state_precision(model, ts, y0)
    field, returned = with_closed_over_tracers_held(model, ts[0], y0, args)
    _check_vector_field(model, returned, y0)
    check_event(event, ts[0], y0, args)
    rtol, atol = tolerances(options, y0.dtype)
    chosen, choice = _solver(model, y0, ts, options, rtol, atol)
    key = checked_stochastic_inputs(model, chosen, y0, key, args, adaptive=options.adaptive)
    if not is_stiff_solver(chosen):
        refuse_mass_matrix(model, f"the solver {solver_name(chosen)!r}")
    if options.adaptive and not has_error_estimate(chosen):
        raise ValueError(
            f"{type(chosen).__name__} has no error estimate for adaptive steps; pass "
            "adaptive=False with dt0=..., or an adaptive solver such as solver='tsit5'."
        )
    step = None if options.adaptive else _fixed_step(model, chosen, y0, ts, options)
    dt0 = options.dt0 if step is None else step.dt0
    inputs = _input_status(model, ts, y0, step, options.dt0, rtol, atol)
    if throw:
        _raise_for_inputs(inputs, step, model, chosen)
    # As arrays these are traced by the compiled solve, so new values never recompile it.
    problem = Problem(
        # A plain function that closes over traced values (a field defined inside the
        # function `jax.grad` or `jax.vmap` transforms) comes as a module that holds them,
        # for the solve's derivative and batching rules; modules hold theirs as leaves.
        model=model if isinstance(model, eqx.Module) else field,
        ts=ts,
        y0=y0,
        args=args,
        solver=chosen,
        adaptive=options.adaptive,
        dt0=None if dt0 is None else jnp.asarray(dt0),
        rtol=jnp.asarray(rtol),
        atol=jnp.asarray(atol),
        max_steps=options.max_steps,
        adjoint=options.adjoint,
        event=event,
        key=key,
        known_steps_per_interval=_known_steps_per_interval(given_ts, ts.dtype, options),
    )
    integrator = select_integrator(
        chosen,
        requested=options.integrator,
        adaptive=options.adaptive,
        adjoint=options.adjoint,
        event=event,
        model=model,
        problem=problem,
    )
    solution = _solve(integrator, problem)
    found = solution.event
    # Save times after a terminating event are never reached: their NaN is no failure.
    unreached = ts > found.time if event is not None and event.terminate else None
    result, nonfinite_time = _checked_result(solution, inputs, ts, unreached)
    ys = solution.ys
    if throw:
        residual = solution.stats.get("initial_residual")
        blow_up = _blow_up_detail(model, chosen, ts, ys, step, result)
        ys = _raise_on_failure(ys, result, nonfinite_time, _failure_hint(chosen), residual, blow_up)
    return Trajectory(
        ts=ts,
        ys=ys,
        result=result,
        stats=solution.stats,
        state_names=getattr(model, "state_names", None),
        solver=solver_name(chosen),
        integrator=integrator.name,
        solver_choice=choice,
        event_time=None if found is None else found.time,
        event_state=None if found is None else found.state,
        nonfinite_time=nonfinite_time,
    )


def _solve(integrator: AbstractIntegrator, problem: Problem) -> Solution:
    """`integrator.solve(problem)`, where JAX's refusal of forward mode through a solve that
    differentiates in reverse mode only says which adjoint to pass instead, and its refusal
    of the solve's loops inside a `jax.shard_map` that checks varying axes says how to run
    it there."""
    try:
        return integrator.solve(problem)
    except TypeError as error:
        if VARYING_AXES_REFUSAL in str(error):
            raise ValueError(
                "simulate cannot run inside a jax.shard_map that checks varying mesh axes: "
                "its loops carry values that vary over the mesh together with ones that do "
                "not. Pass check_vma=False to jax.shard_map (simulate itself uses no collectives), "
                "or use simlab.parallel.shard_map_over_members."
            ) from error
        if FORWARD_MODE_REFUSAL not in str(error):
            raise
        # Integrators without a forward adjoint differentiate forward through their loop.
        takes_forward = integrator.adjoints is None or "forward" in integrator.adjoints
        forward = "forward" if takes_forward else None
        raise ValueError(
            f"jax.jvp and jax.jacfwd (forward mode) cannot differentiate this solve: with "
            f"adjoint={problem.adjoint!r} the {integrator.name} integrator differentiates in "
            f"reverse mode only (jax.grad). For forward mode pass adjoint={forward!r} (to "
            "simulate, or in the simlab.SolveOptions of a sweep or fit)."
        ) from error


def _solver(model, y0, ts, options: SolveOptions, rtol, atol) -> tuple[Any, str | None]:
    """The solver object, and why it was chosen where `simulate` chose a stiff one."""
    if options.solver is None:
        return default_solver(model, y0, ts, rtol=rtol, atol=atol)
    return resolve_solver(
        options.solver, stiff=False, state_size=y0.size, rtol=rtol, atol=atol
    ), None


def with_default_solver(
    model: Any, y0: Array | np.ndarray, ts: Array | np.ndarray, options: SolveOptions
) -> SolveOptions:
    """`options`, with `solver=None` pinned to the stiff solver `simulate` would pick for
    `model`, `y0` and `ts` where its stiffness estimate picks one (see `simulate`'s
    `solver`). Entry points that batch or differentiate the model (sweeps, fits) call it
    while the parameters are values, so their members solve as a direct call would."""
    if options.solver is not None:
        return options
    model, ts = in_state_precision(model, ts, y0)
    rtol, atol = tolerances(options, y0.dtype)
    solver, choice = default_solver(model, y0, ts, rtol=rtol, atol=atol)
    return options if choice is None else options.replace(solver=solver)


def _known_steps_per_interval(given_ts: Any, dtype: Any, options: SolveOptions) -> int | None:
    """The equal number of fixed steps per save interval where `ts` and `dt0` were given as
    concrete values: counted here, before they become arrays that a surrounding `jit`
    traces, so the solve runs a loop of static length (a `scan`, cheap in reverse mode)."""
    if options.adaptive or options.dt0 is None:
        return None
    if not all(is_concrete(value) for value in jax.tree.leaves((given_ts, options.dt0))):
        return None
    counts = fixed_steps_per_interval(np.asarray(given_ts, dtype), np.asarray(options.dt0, dtype))
    return counts if isinstance(counts, int) else None


def checked_ts(
    ts: ArrayLike | Sequence[float], *, keep_on_host: bool = False
) -> Array | np.ndarray:
    """`ts` as an array of at least two floating-point save times, strictly increasing
    where the values are known (traced values are checked inside the solve).

    With `keep_on_host`, host data stays a NumPy array (see `as_array`)."""
    given = ts
    ts = as_array(ts, keep_on_host=keep_on_host)
    if ts.ndim != 1 or ts.shape[0] < 2:
        raise ValueError(
            f"ts must be a 1-D array of at least two save times (start and end); got shape "
            f"{ts.shape}. Example: ts=jnp.linspace(0.0, 10.0, 101)."
        )
    if not jnp.issubdtype(ts.dtype, jnp.floating):
        raise ValueError(
            f"ts must hold floating-point times; got dtype {ts.dtype}. "
            "Pass e.g. jnp.asarray(ts, dtype=float)."
        )
    if is_concrete(ts):
        values = _host_values(given, ts.dtype)
        # Array methods rather than np.all/np.diff: their wrappers cost µs on every call.
        if not np.isfinite(values).all():
            raise ValueError("ts must be finite; it holds NaN or inf.")
        steps = values[1:] - values[:-1]
        if (steps <= 0).any():
            i = int(np.argmax(steps <= 0)) + 1
            raise ValueError(
                f"ts must be strictly increasing; got ts[{i}] = {values[i]:g} <= "
                f"ts[{i - 1}] = {values[i - 1]:g}. Sort the times and drop duplicates."
            )
    return ts


def as_array(
    value: ArrayLike | Sequence[float], *, keep_on_host: bool = False
) -> Array | np.ndarray:
    """`value` as a JAX array; with `keep_on_host`, host data (a NumPy array, a list or a
    tuple) as a NumPy array of the dtype JAX would give it instead.

    A caller that only hands the array to a compiled function keeps it on the host: the
    compiled call places it on the way in, where a transfer of its own (the first JAX
    operation after a long computation) costs about 0.2 ms on a CPU.
    """
    if keep_on_host and isinstance(value, np.ndarray | list | tuple):
        array = np.asarray(value)
        return array.astype(jax.dtypes.canonicalize_dtype(array.dtype), copy=False)
    return jnp.asarray(value)


def _host_values(given: Any, dtype: np.dtype) -> np.ndarray:
    """The values of `given` (concrete) as NumPy's array of `dtype`: host data is read where
    it is, without the wait of reading it back from the device."""
    return np.asarray(given, dtype=dtype)


def checked_y0(
    model: Any, y0: ArrayLike | Sequence[float], *, keep_on_host: bool = False
) -> Array | np.ndarray:
    """`y0` as a floating-point array of the model's state shape, finite where known.

    With `keep_on_host`, host data stays a NumPy array (see `as_array`)."""
    given = y0
    y0 = as_array(y0, keep_on_host=keep_on_host)
    if not jnp.issubdtype(y0.dtype, jnp.inexact):
        raise ValueError(
            f"y0 must be floating point; got dtype {y0.dtype}. "
            "Pass e.g. jnp.asarray(y0, dtype=float)."
        )
    if y0.size == 0:
        raise ValueError(f"y0 is empty (shape {y0.shape}); the state needs at least one component.")
    if isinstance(model, AbstractModel) and y0.shape != model.state_shape:
        raise ValueError(
            f"y0 has shape {y0.shape}, but {type(model).__name__} has state shape "
            f"{model.state_shape} with components {_component_names(model)}."
        )
    # An array spread over several processes cannot be read whole on one: skip the value check.
    readable = is_concrete(y0) and getattr(y0, "is_fully_addressable", True)
    if readable and not np.isfinite(_host_values(given, y0.dtype)).all():
        shown = y0 if y0.size < 8 else "an array"
        raise ValueError(f"y0 must be finite; got {shown} with NaN or inf.")
    return y0


def in_state_precision(model: Any, ts: Any, y0: Any) -> tuple[Any, Any]:
    """`model`'s floating-point and complex array leaves and `ts` cast to the precision of
    `y0`, whose dtype states the precision of the whole solve.

    A float32 `y0` with float64 parameters (the default under `jax_enable_x64`) would
    otherwise mix precisions inside the step, which the integrators' loops refuse; a
    float64 `y0` with float32 parameters is solved in float64. Unchanged where every leaf
    already matches, so no model is rebuilt on the common path."""
    real = jnp.finfo(y0.dtype).dtype  # float32 for a complex64 state
    ts = ts if ts.dtype == real else ts.astype(real)
    if all(_in_precision(leaf, real) for leaf in jax.tree.leaves(model)):
        return model, ts
    return jax.tree.map(lambda leaf: _cast_to_precision(leaf, real), model), ts


def _in_precision(leaf: Any, real: np.dtype) -> bool:
    return not eqx.is_inexact_array(leaf) or _precision_dtype(leaf.dtype, real) == leaf.dtype


def _cast_to_precision(leaf: Any, real: np.dtype) -> Any:
    return leaf.astype(_precision_dtype(leaf.dtype, real)) if eqx.is_inexact_array(leaf) else leaf


def _precision_dtype(dtype: np.dtype, real: np.dtype) -> np.dtype:
    """`real`, or for a complex `dtype` (a Fourier multiplier) the complex dtype whose parts
    are `real` (half precision has none: complex64)."""
    if not jnp.issubdtype(dtype, jnp.complexfloating):
        return real
    return np.dtype(jnp.complex128 if real.itemsize == 8 else jnp.complex64)


def _component_names(model: AbstractModel) -> str:
    names = getattr(model, "state_names", ())
    return str(list(names)) if len(names) < 8 else f"({len(names)} components)"


def _check_vector_field(model, returned, y0) -> None:
    """The vector field must return the state's shape (a broadcast would pass silently) and
    dtype (the solve runs in the state's: values that `simulate` cannot cast, those in
    `args` or closed over by a function, must already be in it)."""
    shape = getattr(returned, "shape", None)
    if shape != y0.shape:
        raise ValueError(
            f"the vector field returns shape {shape} for a state of shape {y0.shape}; "
            f"{type(model).__name__}(t, y, args) must return dy/dt with the shape of y."
        )
    if returned.dtype != y0.dtype:
        raise ValueError(
            f"the vector field returns dtype {returned.dtype} for a state of dtype {y0.dtype}; "
            f"the solve runs in the dtype of y0. Cast the arrays the vector field reads from "
            f"args or closes over to {y0.dtype} (e.g. jnp.asarray(k, y0.dtype)), or pass y0 as "
            f"{returned.dtype} to solve in that precision."
        )


class _FixedStep(NamedTuple):
    """A fixed step and what it means for the solve (arrays, traced under `jit`/`vmap`)."""

    dt0: Array  # the step
    limit: Array | None  # the largest stable step; None where no limit is known
    num_steps: Array  # steps of dt0 from ts[0] to ts[-1]
    status: RESULTS  # successful, unstable_step or max_steps_reached


def _fixed_step(model: Any, solver: Any, y0: Array, ts: Array, options: SolveOptions) -> _FixedStep:
    """The fixed step, decided by one `jnp` computation directly and under `jit`/`vmap`.

    A given `dt0` above the stability limit of a grid model (`model.max_stable_step`), or
    needing more than `max_steps` steps, gives the status `unstable_step` or
    `max_steps_reached`, which `simulate` raises at top level and returns under `jit` and
    `vmap`. With `dt0=None` the step is `_default_step`, computed from the (possibly
    traced) parameters: the number of steps per save interval is then static
    at top level and found at run time under `jit`/`vmap` (bounded by `max_steps`). Where no
    step is stable (limit zero) it takes one step per save interval, with `unstable_step`.
    """
    limit = model.max_stable_step(solver, y0) if isinstance(model, AbstractModel) else None
    if limit is None and options.dt0 is None:
        raise ValueError("adaptive=False takes fixed steps and needs a step: pass dt0=...")
    span = ts[-1] - ts[0]
    if limit is not None:
        limit = limit.astype(ts.dtype)
    if options.dt0 is None:
        stable = jnp.minimum(_default_step(model, solver, y0, limit), span)
        dt0 = jnp.where(limit > 0, stable, span)
    else:
        dt0 = jnp.asarray(options.dt0, ts.dtype)
        _check_span(dt0, ts)
    # Every save interval takes at least one step: save times closer than dt0 add steps.
    per_interval = jnp.asarray(fixed_steps_per_interval(ts, dt0))
    num_steps = jnp.sum(jnp.broadcast_to(per_interval, (ts.shape[0] - 1,)))
    status = RESULTS.where(
        num_steps > options.max_steps, RESULTS.max_steps_reached, RESULTS.successful
    )
    if limit is not None and options.unstable_step == "raise":
        status = RESULTS.where(dt0 > limit, RESULTS.unstable_step, status)
    elif limit is not None and is_concrete(limit) and is_concrete(dt0) and dt0 > limit:
        warn_at_caller(
            f"dt0={float(dt0):g} is above the largest stable step {float(limit):.6g} of "
            f"{type(solver).__name__} for {type(model).__name__} ({model.step_limit}); it runs "
            "as unstable_step='warn' asks, and may blow up."
        )
    return _FixedStep(dt0=dt0, limit=limit, num_steps=num_steps, status=status)


def _default_step(model: AbstractModel, solver: Any, y0: Array, limit: Array) -> Array:
    """`STABLE_STEP_SAFETY` times the stable step `limit`, or the model's `accurate_step`
    where that is shorter."""
    stable = jnp.asarray(STABLE_STEP_SAFETY, limit.dtype) * limit
    accurate = model.accurate_step(solver, y0)
    return stable if accurate is None else jnp.minimum(stable, accurate.astype(limit.dtype))


def _check_span(dt0: Array, ts: Array) -> None:
    """A step longer than the whole span is refused where both are known."""
    if not (is_concrete(dt0) and is_concrete(ts)):
        return
    times = np.asarray(ts)  # numpy: jnp indexing would be staged under jit
    span = float(times[-1] - times[0])
    if float(dt0) > span:
        raise ValueError(
            f"the fixed step dt0={float(dt0):g} is longer than the whole span ts[-1] - ts[0] = "
            f"{span:g}; pass a smaller dt0."
        )


def _step_detail(status: RESULTS, step: _FixedStep | None, model: Any, solver: Any) -> str:
    """The numbers behind a fixed step's failure, for the error raised at top level."""
    if step is None:
        return ""
    labels = f"{type(solver).__name__} for {type(model).__name__}"
    if status == RESULTS.unstable_step:
        limit = float(step.limit)
        if limit == 0.0:
            return (
                f" Here no fixed step is stable for {type(model).__name__} with "
                f"{type(solver).__name__} (its eigenvalues lie outside the solver's stability "
                f"region at any step): {_unstable_step_remedy(solver)}."
            )
        return (
            f" Here dt0={float(step.dt0):g} is above the largest stable step {limit:.6g} of "
            f"{labels} ({model.step_limit}); pass dt0<={limit:.6g}, or unstable_step='warn' to "
            "force it."
        )
    if status == RESULTS.max_steps_reached:
        return (
            f" {int(step.num_steps)} fixed steps of dt0={float(step.dt0):g} are needed to "
            "reach ts[-1], more than max_steps; raise max_steps or dt0."
        )
    return ""


def _unstable_step_remedy(solver: Any) -> str:
    """What to pass instead of a method that no fixed step makes stable."""
    if is_stochastic_solver(solver):
        return (
            "pass solver='spark' with adaptive=True, whose step control keeps the growth "
            "within rtol (simlab has no implicit method for stochastic models)"
        )
    return (
        "use a higher-order explicit solver such as solver='tsit5', an implicit solver, or "
        "adaptive=True"
    )


def _input_status(
    model: Any, ts: Array, y0: Array, step: _FixedStep | None, dt0: Any, rtol: Any, atol: Any
) -> RESULTS:
    """What the inputs show before any step is taken, in rising priority: a fixed step that
    is unstable or too small for `max_steps`; a given `dt0`, `rtol` or `atol` out of range,
    a `y0` the model is not defined at (`initial_state_valid`), a non-finite `y0`, save
    times that are not increasing and finite (the checks that raise on known values, made
    again on traced ones); parameters outside their declared ranges.
    Arrays: checked inside the compiled code."""
    status = RESULTS.successful if step is None else step.status
    checks = [
        (_valid_step(dt0, ts, fixed=step is not None), RESULTS.invalid_step),
        (_valid_tolerances(rtol, atol), RESULTS.invalid_tolerance),
        (_valid_initial_state(model, y0), RESULTS.invalid_initial_state),
        (jnp.all(jnp.isfinite(y0)), RESULTS.nonfinite_initial_state),
        (jnp.all(jnp.isfinite(ts)) & jnp.all(jnp.diff(ts) > 0), RESULTS.invalid_times),
    ]
    if isinstance(model, AbstractModel):
        checks.append((model.parameters_in_range(), RESULTS.parameter_out_of_range))
    for valid, failure in checks:
        status = RESULTS.where(valid, status, failure)
    return status


def _valid_step(dt0: Any, ts: Array, *, fixed: bool) -> Array:
    """A given `dt0` is positive and finite, and as a fixed step no longer than the span
    (`SolveOptions` and `_check_span` raise on known values)."""
    if dt0 is None:
        return jnp.asarray(True)
    dt0 = jnp.asarray(dt0)
    valid = (dt0 > 0) & jnp.isfinite(dt0)
    return valid & (dt0 <= ts[-1] - ts[0]) if fixed else valid


def _valid_initial_state(model: Any, y0: Array) -> Array:
    """The model's `initial_state_valid(y0)` (which raises a ValueError naming the problem
    where `y0` is known)."""
    return model.initial_state_valid(y0) if isinstance(model, AbstractModel) else jnp.asarray(True)


def _valid_tolerances(rtol: Any, atol: Any) -> Array:
    """`0 < rtol < 0.5` and `0 < atol < inf` (`SolveOptions` raises on known values)."""
    rtol, atol = jnp.asarray(rtol), jnp.asarray(atol)
    return (rtol > 0) & (rtol < 0.5) & (atol > 0) & jnp.isfinite(atol)


def _raise_for_inputs(inputs: RESULTS, step: _FixedStep | None, model: Any, solver: Any) -> None:
    """At top level, raises the failure that the inputs already show, before solving, with
    its numbers; under `jit`/`vmap` the same status reaches the solve's `.result`."""
    if _is_known(inputs) and inputs != RESULTS.successful:
        raise SimulationError(RESULTS[inputs] + _step_detail(inputs, step, model, solver))


def _checked_result(
    solution: Solution, inputs: RESULTS, ts: Array, unreached: Array | None = None
) -> tuple[RESULTS, Array]:
    """The solve's status, with what only the run-time values can show: non-finite states
    (at the save times reached: `unreached` marks those after a terminating event), and
    the failures the inputs show (`_input_status`), which take precedence; and, for a
    non-finite state, the time of the first non-finite value (`NaN` otherwise): where the
    integrator got stuck at NaN or inf, or else the first save time that holds one."""
    ys = solution.ys
    finite = jnp.all(jnp.isfinite(ys), axis=tuple(range(1, ys.ndim)))
    if unreached is not None:
        finite = finite | unreached
    result = RESULTS.where(
        (solution.status == RESULTS.successful) & ~jnp.all(finite),
        RESULTS.nonfinite_state,
        solution.status,
    )
    result = RESULTS.where(inputs == RESULTS.successful, result, inputs)
    first_nonfinite = jnp.min(jnp.where(finite, jnp.inf, ts))
    if solution.nonfinite_time is not None:
        first_nonfinite = jnp.fmin(solution.nonfinite_time, first_nonfinite)
    return result, jnp.where(result == RESULTS.nonfinite_state, first_nonfinite, jnp.nan)


def _is_known(result: RESULTS) -> bool:
    """Whether a status is a concrete value (at top level), not traced."""
    return all(is_concrete(leaf) for leaf in jax.tree.leaves(result))


def _failure_hint(solver: Any) -> str:
    if is_implicit(solver) or is_stochastic_solver(solver):  # no stiff solver takes noise
        return ""
    return (
        f" The explicit solver {solver_name(solver)!r} was used: if the model is stiff (fast "
        "decaying modes force tiny steps), pass solver='rodas5p' or solver='radau5'."
    )


def _blow_up_detail(
    model: Any, solver: Any, ts: Array, ys: Array, step: _FixedStep | None, result: RESULTS
) -> str:
    """The model's account of the last saved state before a blow-up at fixed steps (a
    flow's Courant number there), where it gives one, and for a stochastic model what
    applies to it (the status suggests implicit solvers, which take no noise); known at top
    level only."""
    if step is None or not _is_known(result) or result != RESULTS.nonfinite_state:
        return ""
    remedy = STOCHASTIC_BLOW_UP_REMEDY if is_stochastic_solver(solver) else ""
    if not isinstance(model, AbstractModel):
        return remedy
    states = np.asarray(ys)
    finite = np.all(np.isfinite(states.reshape(len(states), -1)), axis=1)
    last = int(np.argmin(finite)) - 1  # y0 is finite: the save before the first NaN or inf
    detail = model.describe_blow_up(solver, jnp.asarray(states[last]), step.dt0)
    at_last_save = f" At t = {float(ts[last]):.6g}, the last save before it, {detail}"
    return (at_last_save if detail else "") + remedy


def _raise_on_failure(
    ys: Array,
    result: RESULTS,
    nonfinite_time: Array,
    hint: str,
    residual: Array | None = None,
    blow_up: str = "",
) -> Array:
    """Raises `SimulationError` for a failed solve. At top level the status is read after
    the compiled call returns, so no executable holds a host callback (and JAX's persistent
    compilation cache can keep it); inside `jit`/`vmap`/`grad` Equinox's `error_if` does it.
    Under transformations that run at once (`jax.vmap` outside `jit`), its error comes back
    here, and is raised again as a `SimulationError` that starts with the status message.
    Where checks cannot raise inside the program (GPU, TPU), the status and NaN states
    report a failure there instead (see `checks_raise_in_program`)."""
    if _is_known(result):
        if result != RESULTS.successful:
            message = _failure_message(result, hint, nonfinite_time, residual)
            raise SimulationError(message + blow_up)
        return ys
    failed = result != RESULTS.successful
    if not _misc.checks_raise_in_program():
        return nan_where(failed, ys)
    try:
        return result.error_if(ys, failed)
    except eqx.EquinoxRuntimeError as error:
        status = quoted_status(str(error))
        if status is None:
            raise
        raise SimulationError(_failure_message(status, hint)) from None


def _failure_message(
    result: RESULTS,
    hint: str,
    nonfinite_time: Array | None = None,
    residual: Array | None = None,
) -> str:
    """The status message of a failure, with the numbers behind it where they are known."""
    if result == RESULTS.nonfinite_state and nonfinite_time is not None:
        time = float(nonfinite_time)
        return f"{RESULTS[result]} Here the first NaN or inf came at t = {time:.10g}."
    if result == RESULTS.inconsistent_initial_state and residual is not None:
        return (
            f"{RESULTS[result]} Here the largest residual of the algebraic equations at y0 is "
            f"{float(residual):.3g}."
        )
    return RESULTS[result] + (hint if _ran_out_of_steps(result) else "")


def _ran_out_of_steps(result: RESULTS) -> bool:
    return bool(result == RESULTS.max_steps_reached)
