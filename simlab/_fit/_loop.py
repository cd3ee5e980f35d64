"""The optimisation loop, shared by gradient descent (Optax) and least squares (Optimistix).

One jitted function advances the fit by up to a given number of steps. A traced fit
(under `jax.vmap`) runs it once to the end; a concrete fit runs it in chunks, so that the
host can show progress and write checkpoints between them, without recompiling.
"""

import abc
import json
import os
import pathlib
import tempfile
import zipfile
from typing import Any

import equinox as eqx
import jax
import jax.flatten_util
import jax.lax as lax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optax
import optimistix as optx
from jaxtyping import Array

from .._identity import abstract_time_and_state, function_identity, model_identity
from .._results import RESULTS
from ..io import atomic_write
from ..io._fingerprint import tree_digest
from ._problem import FAILED_LOSS, FitProblem

FORWARD_MODE_MAX_PARAMETERS = 16
VALUE_INFOS = (
    optx.FunctionInfo.Eval,
    optx.FunctionInfo.EvalGrad,
    optx.FunctionInfo.EvalGradHessian,
    optx.FunctionInfo.EvalGradHessianInv,
)


def num_scalars(tree) -> int:
    return sum(int(np.prod(jnp.shape(leaf))) for leaf in jtu.tree_leaves(tree))


class AbstractStepper(eqx.Module):
    """One optimiser seen as `init` and `step` on the unconstrained parameters `u`."""

    rtol: eqx.AbstractVar[float]
    atol: eqx.AbstractVar[float]

    @abc.abstractmethod
    def objective(self, problem: FitProblem):
        """The function the optimiser is given."""

    @abc.abstractmethod
    def init(self, objective, u) -> Any:
        """The optimiser's state at `u`."""

    @abc.abstractmethod
    def step(self, objective, u, state) -> tuple[Any, Any, Array, Array, RESULTS]:
        """`(new_u, new_state, loss at new_u, done, result)`."""

    def static_state(self, objective, u) -> Any:
        """The non-array part of the state, which the loop cannot carry (None: all arrays)."""
        return eqx.filter(self.init(objective, u), eqx.is_array, inverse=True)

    def settled(self, problem: FitProblem, u, new_u, loss, new_loss) -> Array:
        """Whether an accepted step from `u` to `new_u` settled the fit in natural units
        (beyond the optimiser's own test); never, unless a stepper says otherwise."""
        return jnp.array(False)


class GradientStepper(AbstractStepper):
    """Any `optax.GradientTransformation` on $\\tfrac12\\sum r_i^2$, with two safeguards.

    A trial point whose solve fails (or whose loss or gradient is not finite) is rejected
    and the step retried at half its length. The fit stops when the best loss has not
    improved by a relative `rtol` (plus `atol`) for `patience` steps in a row.
    """

    optimiser: optax.GradientTransformation
    rtol: float
    atol: float
    patience: int = 50

    def objective(self, problem):
        # Few parameters: forward mode (one tangent per parameter, no stored trajectory)
        # is cheaper than a reverse pass through the solver's checkpoints; networks with
        # many weights need reverse mode.
        forward = num_scalars(problem.initial_unconstrained()) <= FORWARD_MODE_MAX_PARAMETERS

        def loss_fn(u):
            loss, ok = problem.loss(u, "forward" if forward else "checkpoint")
            return loss, (loss, ok)

        if forward:
            gradient_fn = jax.jacfwd(loss_fn, has_aux=True)
        else:
            gradient_fn = jax.grad(loss_fn, has_aux=True)

        def value_and_grad(u):
            grad, (loss, ok) = gradient_fn(u)
            return (loss, ok), grad

        return value_and_grad

    def init(self, objective, u):
        (loss, _), grad = objective(u)
        return {
            "optimiser": self.optimiser.init(u),
            "grad": grad,
            "loss": loss,
            "best_loss": loss,
            "step_scale": jnp.ones((), loss.dtype),
            "stalled": jnp.array(0),
        }

    def step(self, objective, u, state):
        # Optax's Adam corrects its moments by `decay**count`, a float to the power of its
        # int32 step count, which strict dtype promotion refuses: its update runs standard.
        with jax.numpy_dtype_promotion("standard"):
            updates, optimiser_state = self.optimiser.update(state["grad"], state["optimiser"], u)
        trial = optax.apply_updates(u, jtu.tree_map(lambda x: state["step_scale"] * x, updates))
        (loss, solved), grad = objective(trial)
        finite = jnp.isfinite(loss) & jnp.all(
            jnp.array([jnp.all(jnp.isfinite(g)) for g in jtu.tree_leaves(grad)])
        )
        accept = solved & finite

        def keep(new, old):
            return jtu.tree_map(lambda a, b: jnp.where(accept, a, b), new, old)

        improved = accept & (loss < state["best_loss"] * (1 - self.rtol) - self.atol)
        new_state = {
            "optimiser": keep(optimiser_state, state["optimiser"]),
            "grad": keep(grad, state["grad"]),
            "loss": jnp.where(accept, loss, state["loss"]),
            "best_loss": jnp.where(improved, loss, state["best_loss"]),
            "step_scale": jnp.where(accept, 1.0, 0.5 * state["step_scale"]),
            "stalled": jnp.where(improved, 0, state["stalled"] + 1),
        }
        done = new_state["stalled"] >= self.patience
        return keep(trial, u), new_state, new_state["loss"], done, RESULTS.successful

    def static_state(self, objective, u) -> None:
        return None  # every entry of the state is an array


class OptimistixStepper(AbstractStepper):
    """Any Optimistix least-squares solver (Levenberg–Marquardt by default) on the
    residuals, or minimiser (BFGS by default) on the negative log-likelihood.

    Derivatives are taken in forward mode (`jac="fwd"` / `autodiff_mode="fwd"`,
    simulations with `diffrax.ForwardMode`): one Jacobian costs about one solve per fitted
    parameter, which beats reverse mode's one backward pass per residual when parameters
    are few and residuals many, as in curve fitting.
    """

    solver: optx.AbstractLeastSquaresSolver | optx.AbstractMinimiser
    rtol: float
    atol: float

    @property
    def _options(self) -> dict[str, str]:
        if isinstance(self.solver, optx.AbstractLeastSquaresSolver):
            return {"jac": "fwd"}
        return {"autodiff_mode": "fwd"}

    def objective(self, problem):
        if isinstance(self.solver, optx.AbstractLeastSquaresSolver):
            residuals = with_materialised_jacobian(lambda u: problem.residuals(u, "forward")[0])
            return lambda u, args: (residuals(u), None)
        loss = with_materialised_jacobian(lambda u: problem.loss(u, "forward")[0])
        return lambda u, args: (loss(u), None)

    def _call(self, objective, u):
        # Optimistix solvers expect a closure-converted function, as `optx.least_squares`
        # makes, so that their state holds its jaxpr rather than a Python closure.
        return eqx.filter_closure_convert(objective, u, None)

    def init(self, objective, u):
        fn = self._call(objective, u)
        f_struct, aux_struct = fn.out_struct
        return self.solver.init(fn, u, None, self._options, f_struct, aux_struct, frozenset())

    def step(self, objective, u, state):
        fn = self._call(objective, u)
        new_u, new_state, _ = self.solver.step(fn, u, None, self._options, state, frozenset())
        done, result = self.solver.terminate(fn, u, None, self._options, new_state, frozenset())
        loss = self._loss(objective, new_u, new_state)
        return new_u, new_state, loss, done, RESULTS.promote(result)

    def settled(self, problem, u, new_u, loss, new_loss):
        r"""An accepted step that changed every natural value $\theta = g(u)$ and the loss by
        less than `atol + rtol·|·|` ends the fit, as SciPy's `xtol`/`ftol` tests do.

        The optimiser's own test is on $u$. Where an optimum lies on a bound, $u$ runs off
        towards $\pm\infty$ and never settles, while $\theta$ and the loss stopped
        changing long before: without this test such a fit would run to `max_steps`.
        """
        before, after = natural_scalars(problem, u), natural_scalars(problem, new_u)
        moved = jnp.any(after != before)
        tolerance = self.atol + self.rtol * jnp.abs(after)
        small_step = jnp.all(jnp.abs(after - before) <= tolerance)
        small_change = jnp.abs(new_loss - loss) <= self.atol + self.rtol * jnp.abs(new_loss)
        return moved & small_step & small_change

    def _loss(self, objective, u, state):
        # Gauss–Newton-family states (Levenberg–Marquardt included) hold the residual at
        # the accepted point, quasi-Newton ones the value: reuse it rather than simulate
        # once more.
        f_info = getattr(state, "f_info", None)
        if isinstance(f_info, optx.FunctionInfo.ResidualJac):
            return 0.5 * jnp.sum(f_info.residual**2)
        if isinstance(f_info, VALUE_INFOS):
            return f_info.f
        value, _ = objective(u, None)
        if isinstance(self.solver, optx.AbstractLeastSquaresSolver):
            return 0.5 * jnp.sum(value**2)
        return value


def natural_scalars(problem: FitProblem, u) -> Array:
    """Every floating-point value of the model, initial states and noise model at `u`."""
    model, y0s = problem.build(u)
    tree = eqx.filter((model, y0s, problem.noise_at(u)), eqx.is_inexact_array)
    return jax.flatten_util.ravel_pytree(tree)[0]


def with_materialised_jacobian(fn):
    r"""`fn` (of a pytree `u`, returning a vector or a scalar) whose Jacobian-vector products
    reuse one Jacobian $J$ (a gradient, for a scalar), computed in full by `jax.jacfwd` (one
    solve carrying a tangent per scalar).

    Gauss–Newton-type solvers linearise the residuals once per step and then apply the
    linearisation several times (a QR of the damped system, a predicted reduction). Through
    a simulation's `while_loop`, each application of `jax.linearize`'s function replays the
    whole solve; with $J$ materialised here every application is a matrix product.
    Quasi-Newton minimisers take the gradient as `jax.jacfwd` of the linearised loss, which
    is forward mode through forward mode: the kernel integrator's forward sensitivities
    have no rule for that, and here they are asked once, by `jax.jacfwd`, as for $J$.
    """

    @jax.custom_jvp
    def wrapped(u):
        return fn(u)

    @wrapped.defjvp
    def jvp(primals, tangents):
        (u,), (du,) = primals, tangents
        flat, unravel = jax.flatten_util.ravel_pytree(u)

        def value_twice(x):
            value = fn(unravel(x))
            return value, value

        jacobian, value = jax.jacfwd(value_twice, has_aux=True)(flat)
        tangent = jax.flatten_util.ravel_pytree(du)[0]
        # Full float32 products: a TPU's default (one bfloat16 pass) slows the fit's steps.
        return value, jnp.matmul(jacobian, tangent, precision="highest")

    return wrapped


class Carry(eqx.Module):
    """Everything the loop carries between steps (and between chunks, and to a checkpoint)."""

    u: Any
    state: Any
    best_u: Any
    best_loss: Array
    step: Array
    loss_history: Array
    done: Array
    result: RESULTS


@eqx.filter_jit
def start(problem: FitProblem, stepper: AbstractStepper, max_steps: int) -> Carry:
    u = problem.initial_unconstrained()
    objective = stepper.objective(problem)
    state = stepper.init(objective, u)
    loss, _ = problem.loss(u, "forward")
    history = jnp.full((max_steps + 1,), jnp.nan, loss.dtype).at[0].set(loss)
    carry = Carry(
        u=u,
        state=eqx.filter(state, eqx.is_array),
        best_u=u,
        best_loss=loss,
        step=jnp.array(0),
        loss_history=history,
        done=jnp.array(False),
        result=RESULTS.successful,
    )
    # No weakly typed leaves (Python scalars in the optimiser's state, the step count): the
    # arrays read back from a checkpoint are strongly typed, and `advance` would otherwise
    # compile again for them.
    return jtu.tree_map(lambda leaf: lax.convert_element_type(leaf, leaf.dtype), carry)


@eqx.filter_jit
def advance(problem: FitProblem, stepper: AbstractStepper, carry: Carry, stop_step) -> Carry:
    """Runs steps until the optimiser stops, fails, or `stop_step` steps have been taken."""
    objective = stepper.objective(problem)
    # The state's non-array part (e.g. Optimistix's jaxprs) is rebuilt here, not carried.
    static_state = stepper.static_state(objective, carry.u)

    def keep_going(c: Carry):
        return ~c.done & (c.result == RESULTS.successful) & (c.step < stop_step)

    def one_step(c: Carry) -> Carry:
        state = c.state if static_state is None else eqx.combine(c.state, static_state)
        u, state, loss, done, result = stepper.step(objective, c.u, state)
        done = done | stepper.settled(problem, c.u, u, c.loss_history[c.step], loss)
        better = loss < c.best_loss
        step = c.step + 1
        return Carry(
            u=u,
            state=eqx.filter(state, eqx.is_array),
            best_u=jtu.tree_map(lambda a, b: jnp.where(better, a, b), u, c.best_u),
            best_loss=jnp.where(better, loss, c.best_loss),
            step=step,
            loss_history=c.loss_history.at[step].set(loss),
            done=done,
            result=result,
        )

    return jax.lax.while_loop(keep_going, one_step, carry)


def _failed_start_message(problem) -> str:
    if problem.transition is not None:  # no solve: the paths' own likelihood is zero
        return (
            f"the observed paths have zero likelihood under the {problem.transition} "
            f"transition density of {type(problem.model).__name__} at the starting "
            "parameters (an infinite loss): a noise parameter at zero, or an observed state "
            "the density excludes (e.g. a non-positive price); start from values that give "
            "every observed transition a positive density."
        )
    return (
        "the model cannot be simulated at the starting parameters and y0 (the solve "
        "fails); start from values that simulate, or relax simulate_options "
        "(max_steps, solver)."
    )


def run(problem, stepper, *, max_steps, traced, progress, checkpoint, checkpoint_every):
    """Runs the loop to the end; returns the final carry."""
    carry = None
    if checkpoint is not None:
        check_checkpoint_path(checkpoint)
        fingerprint = problem_fingerprint(problem, stepper, max_steps)
        expected = eqx.filter_eval_shape(start, problem, stepper, max_steps)
        carry = load_checkpoint(checkpoint, expected, fingerprint)
    if carry is None:
        carry = start(problem, stepper, max_steps)
        if not traced and float(carry.best_loss) >= FAILED_LOSS:
            raise ValueError(_failed_start_message(problem))
    if traced:
        return advance(problem, stepper, carry, jnp.asarray(max_steps))
    chunk = max(1, min(checkpoint_every, 25 if progress else max_steps))
    with _progress_bar(progress, max_steps) as bar:
        bar.update(int(carry.step))
        while True:
            before = int(carry.step)
            # An array, not an int: filter_jit would compile once per distinct int.
            stop_step = jnp.asarray(min(before + chunk, max_steps))
            carry = advance(problem, stepper, carry, stop_step)
            bar.update(int(carry.step) - before)
            bar.set_postfix(loss=f"{float(carry.best_loss):.6g}")
            if checkpoint is not None:
                save_checkpoint(checkpoint, carry, fingerprint)
            finished = bool(carry.done) or bool(carry.result != RESULTS.successful)
            if finished or int(carry.step) >= max_steps:
                return carry


def _progress_bar(progress: bool, total: int):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not progress, desc="fit", unit="step", leave=False)


def problem_fingerprint(problem: FitProblem, stepper: AbstractStepper, max_steps: int):
    """Digests of everything that determines a fit's path, one per part (JSON-able).

    A checkpoint is resumed only by the fit it was written for: same model (class, what its
    vector field computes, structure, starting and frozen values), fitted names, data,
    observation map (what it computes), solve settings, optimiser and `max_steps`.
    """
    experiment = problem.experiments[0]
    state = jax.ShapeDtypeStruct(experiment.y0.shape[1:], experiment.y0.dtype)
    t, y = abstract_time_and_state(experiment.ts, state)
    return {
        "model": f"{model_identity(problem.model, t, y)} {tree_digest(problem.model)}",
        "params": json.dumps([problem.array_paths, problem.module_paths, problem.fit_y0]),
        "data": tree_digest(problem.fitted_data()),
        "observe": function_identity(problem.observe, y),
        "simulate_options": json.dumps(problem.simulate_options.record(), default=str),
        "optimiser": tree_digest(stepper),
        "max_steps": str(max_steps),
    }


def check_checkpoint_path(path: str | os.PathLike) -> None:
    """Refuses, before any work, a checkpoint path that cannot be written."""
    path = pathlib.Path(path)
    if path.is_dir():
        raise ValueError(
            f"the checkpoint path {str(path)!r} is a folder; pass a file path such as "
            f"{str(path / 'fit.npz')!r}."
        )
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.probe-"):
            pass
    except OSError as error:
        raise ValueError(
            f"cannot write the checkpoint {str(path)!r} ({error.strerror or error}); pass "
            "checkpoint= a path in an existing, writable folder."
        ) from None


def save_checkpoint(path: str | os.PathLike, carry: Carry, fingerprint: dict[str, str]) -> None:
    """Writes the loop's arrays, and the fit's fingerprint, to `path` (`.npz`) whole or not
    at all."""
    path = pathlib.Path(path)
    leaves = [np.asarray(leaf) for leaf in jtu.tree_leaves(carry)]
    named = {FINGERPRINT_KEY: np.array(json.dumps(fingerprint))}

    def write(temporary: pathlib.Path) -> None:
        with temporary.open("wb") as file:  # a file, so that NumPy adds no `.npz` suffix
            np.savez(file, *leaves, **named)

    atomic_write(path, write)


FINGERPRINT_KEY = "simlab_fingerprint"


def load_checkpoint(
    path: str | os.PathLike, like: Carry, fingerprint: dict[str, str]
) -> Carry | None:
    """The carry saved at `path`, checked against the expected structure and the fit's
    fingerprint; None if absent. Anything else is refused with a `ValueError`."""
    path = pathlib.Path(path)
    if not path.exists():
        return None
    fix = "delete it or pass another checkpoint path"
    try:
        with np.load(path, allow_pickle=False) as stored:
            names = [f"arr_{i}" for i in range(sum(k.startswith("arr_") for k in stored.files))]
            leaves = [stored[name] for name in names]
            recorded = (
                json.loads(str(stored[FINGERPRINT_KEY])) if FINGERPRINT_KEY in stored else None
            )
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as error:
        # Never NumPy's own message: for arbitrary bytes it suggests `allow_pickle`.
        reason = "it is a folder" if path.is_dir() else type(error).__name__
        raise ValueError(
            f"the checkpoint {str(path)!r} cannot be read: it is empty, truncated or not a "
            f"simlab fit checkpoint ({reason}); {fix}."
        ) from None
    if not isinstance(recorded, dict):
        raise ValueError(
            f"the checkpoint {str(path)!r} records no fingerprint of its fit, so it cannot "
            f"be told apart from another fit's; {fix}."
        )
    differing = sorted(
        k for k in fingerprint.keys() | recorded.keys() if fingerprint.get(k) != recorded.get(k)
    )
    if differing:
        raise ValueError(
            f"the checkpoint {str(path)!r} does not match this fit: it was written for a "
            f"different problem (differs in: {', '.join(differing)}); {fix}."
        )
    expected, treedef = jtu.tree_flatten(like)
    shapes = [(leaf.shape, leaf.dtype) for leaf in leaves]
    wanted = [(tuple(e.shape), np.dtype(e.dtype)) for e in expected]
    if shapes != wanted:
        raise ValueError(
            f"the checkpoint {str(path)!r} does not match this fit (different parameters, data, "
            f"optimiser or max_steps); {fix}."
        )
    # device_put, not jnp.asarray: the latter compiles a conversion per new shape.
    return jtu.tree_unflatten(treedef, [jax.device_put(leaf) for leaf in leaves])
