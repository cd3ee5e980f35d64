r"""`expectation`: Monte Carlo means over the paths of a stochastic model, differentiable.

With the key fixed, the estimate is a smooth function of the parameters and `y0`: every
evaluation sees the same Brownian paths (common random numbers), so its derivative is the
pathwise (reparameterised) derivative $\frac1n \sum_p \partial_\theta f(X^{(p)})$, an
unbiased estimate of $\partial_\theta E[f(X)]$ wherever $f$ and the solver's map from the
increments to the path are differentiable in $\theta$.
"""

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Real

from ._memory import check_fits
from ._misc import Integer, as_count
from ._options import DEFAULT_MAX_STEPS, merged_options
from ._results import Trajectory
from ._simulate import simulate
from .integrate._brownian import checked_key
from .integrate._sde import check_additive, is_stochastic


class Estimate(NamedTuple):
    """A Monte Carlo estimate: `mean` and its `standard_error` (the sample standard
    deviation over the paths divided by the square root of their number), each with the
    structure the observable returns."""

    mean: Any
    standard_error: Any


def expectation(
    model: Any,
    y0: ArrayLike | Sequence[float],
    ts: ArrayLike | Sequence[float],
    observable: Callable[[Trajectory], Any],
    *,
    paths: Integer,
    key: Any,
    batch_size: Integer | None = None,
    solver: Any = None,
    dt0: Real[ArrayLike, ""] | None = None,
    adaptive: bool = False,
    rtol: Real[ArrayLike, ""] | None = None,
    atol: Real[ArrayLike, ""] | None = None,
    max_steps: Integer = DEFAULT_MAX_STEPS,
    adjoint: str | None = None,
    args: Any = None,
) -> Estimate:
    r"""Estimates $E[f(X)]$ for a stochastic model from `paths` paths, differentiably.

    Path `p` draws its Brownian increments from `jax.random.fold_in(key, p)`: the paths
    that `sweep(..., paths=..., key=key)` runs at every parameter point. Keeping `key`
    fixed while the parameters change gives common random numbers, so `jax.grad` (reverse
    mode) and `jax.jvp` or `jax.jacfwd` (forward mode, with `adjoint="forward"`) of the
    estimate are pathwise derivatives: unbiased estimates of the derivative of the
    expectation, with no sampling noise from one parameter value to the next.

    **Arguments:**

    - `model`: a stochastic model ([`simlab.models.AbstractSDEModel`][]).
    - `y0`, `ts`: the initial state and the save times, as for [`simlab.simulate`][].
    - `observable`: $f$, from a [`simlab.Trajectory`][] to an array or a pytree of
      arrays (e.g. `lambda path: path.ys[-1, 0]`); a failed path makes it `NaN`.
    - `paths`: the number of paths.
    - `key`: a JAX key, `jax.random.key(seed)`.
    - `batch_size`: how many paths run together (`jax.lax.map`); `None` runs all of them
      as one `vmap`. Smaller batches use less memory.
    - `solver`, `dt0`, `adaptive`, `rtol`, `atol`, `max_steps`, `args`: as for
      `simulate`, but with fixed steps of `dt0` by default; `solver="spark"` with
      `adaptive=True` takes adaptive steps on each path's virtual Brownian tree.
    - `adjoint`: `None` for reverse mode (`jax.grad`), `"forward"` for forward mode.

    **Returns:** an `Estimate` with the `mean` and its `standard_error`.

    !!! example

        ```python
        import jax
        import jax.numpy as jnp
        import simlab


        def mean_at_one(mu):
            model = simlab.models.GeometricBrownianMotion(mu=mu, sigma=0.5)
            return simlab.expectation(
                model, jnp.array([1.0]), jnp.array([0.0, 1.0]),
                lambda path: path.ys[-1, 0],
                paths=256, key=jax.random.key(0), dt0=0.01,
            ).mean


        jax.grad(mean_at_one)(0.5)  # about d/dmu e^mu = e^0.5
        ```
    """
    if not is_stochastic(model):
        raise ValueError(
            f"expectation averages over the paths of a stochastic model; "
            f"{type(model).__name__} is deterministic: simulate it once instead."
        )
    check_additive(model, jnp.asarray(y0, float), args, jnp.asarray(ts)[0])
    key = checked_key(key)
    paths = as_count("paths", paths)
    if batch_size is not None:
        batch_size = as_count("batch_size", batch_size)
    _check_paths_fit(paths, batch_size, jnp.asarray(y0, float))
    options = merged_options(
        None,
        dict(
            solver=solver,
            dt0=dt0,
            adaptive=adaptive,
            rtol=rtol,
            atol=atol,
            max_steps=max_steps,
            adjoint=adjoint,
        ),
    )

    def one_path(path):
        trajectory = simulate(
            model,
            y0,
            ts,
            key=jax.random.fold_in(key, path),
            options=options,
            throw=False,
            args=args,
        )
        failed = ~trajectory.succeeded
        return jax.tree.map(lambda value: jnp.where(failed, jnp.nan, value), observable(trajectory))

    values = jax.lax.map(one_path, jnp.arange(paths), batch_size=batch_size or paths)
    return Estimate(
        mean=jax.tree.map(lambda value: jnp.mean(value, axis=0), values),
        standard_error=jax.tree.map(_standard_error, values),
    )


def _check_paths_fit(paths: int, batch_size: int | None, y0: Array) -> None:
    """Refuses paths whose values, or whose states in one batch, cannot fit on the device:
    each path keeps at least one value, and each path of a batch at least its state."""
    itemsize = y0.dtype.itemsize
    check_fits(f"{paths:.3g} paths", paths * itemsize, "use fewer paths", device=True)
    batch = paths if batch_size is None else batch_size
    check_fits(
        f"{batch:.3g} paths at once",
        batch * y0.size * itemsize,
        "pass batch_size=... (how many paths run together; e.g. 1024) to run them in batches",
        device=True,
    )


def _standard_error(values: Array) -> Array:
    return jnp.std(values, axis=0, ddof=1) / jnp.sqrt(values.shape[0])
