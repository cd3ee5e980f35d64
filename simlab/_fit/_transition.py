r"""The likelihood of observed paths of a stochastic model, from its transition density.

A path observed at times $t_0 < \dots < t_n$ has, conditional on its first state,
$\log L = \sum_k \log p(y_{k+1} \mid y_k)$ (the process is Markov). The density $p$ is the
model's own `transition_log_density` where it has one (exact), or the Euler–Maruyama
Gaussian $N(y_k + f(t_k, y_k)\Delta_k,\; G G^\top \Delta_k)$, $G$ the diffusion at $y_k$:
exact as the intervals shrink, biased by $O(\Delta)$ in the drift otherwise.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.stats import multivariate_normal, norm
from jaxtyping import Array

from .._misc import is_concrete

TRANSITIONS = ("exact", "euler_maruyama")


def has_exact_density(model: Any) -> bool:
    return callable(getattr(model, "transition_log_density", None))


def checked_transition(model: Any, transition: str | None, state_size: int) -> str:
    """The density to use: `transition`, or `"exact"` where the model has one."""
    name = type(model).__name__
    if transition is None:
        transition = "exact" if has_exact_density(model) else "euler_maruyama"
    if transition not in TRANSITIONS:
        raise ValueError(f"transition must be one of {TRANSITIONS}; got {transition!r}.")
    if transition == "exact" and not has_exact_density(model):
        raise ValueError(
            f"transition='exact' needs the model's transition_log_density; {name} has none: "
            "use transition='euler_maruyama'."
        )
    if transition == "euler_maruyama" and model.noise == "scalar" and state_size > 1:
        raise ValueError(
            f"{name} has scalar noise on {state_size} components: its Euler–Maruyama "
            "transition density is degenerate (one Brownian motion moves all components). "
            "Give the model a transition_log_density."
        )
    return transition


def check_noise_everywhere(model: Any, ts: Any, observations: Any) -> None:
    """Refuses the Euler–Maruyama density where the model's noise misses a component (or,
    for general noise, a direction: $G G^\top$ singular) at an observed state. That density
    is then a point mass: every observed path off the drift has zero likelihood, an
    infinite loss. The error names the parameters at zero that the diffusion depends on."""
    data_sets = [(ts, observations)]
    if isinstance(ts, list | tuple) and any(np.ndim(t) > 0 for t in ts):
        data_sets = list(zip(ts, observations, strict=True))
    for times, data in data_sets:
        if not (is_concrete(times) and is_concrete(data)):
            continue
        data = np.asarray(data, float)
        paths_and_times = data.shape[: data.ndim - len(model.state_shape)]  # (T,), (batch, T)
        times = np.broadcast_to(np.asarray(times, float), paths_and_times).ravel()
        states = data.reshape(-1, *model.state_shape)
        where = _first_degenerate(model, times, states)
        if where is not None:
            raise ValueError(_degenerate_message(model, times[where], states[where]))


def _first_degenerate(model, times, states) -> int | None:
    """The index of the first state where the noise misses a direction, or None."""
    g = np.asarray(jax.vmap(lambda t, y: model.diffusion(t, y, None))(times, states))
    if model.noise == "general":
        rank = np.linalg.matrix_rank(g.reshape(g.shape[0], states[0].size, -1))
        degenerate = rank < states[0].size
    else:
        degenerate = np.any(g.reshape(g.shape[0], -1) == 0, axis=1)
    hits = np.flatnonzero(degenerate)
    return int(hits[0]) if hits.size else None


def _degenerate_message(model, t, y) -> str:
    name = type(model).__name__
    g = np.asarray(model.diffusion(t, jnp.asarray(y), None))
    if model.noise == "general":
        what = "its noise covariance G G^T is singular (some direction gets no noise)"
    else:
        names = getattr(model, "state_names", None) or [str(i) for i in range(y.size)]
        silent = [names[i] for i in np.flatnonzero(g.ravel() == 0)]
        what = f"its diffusion vanishes in {silent}"
    zero = [p for p in _parameters_of_the_noise(model, t, y) if float(getattr(model, p)) == 0]
    fix = (
        f"Noise parameters at zero: {zero}; start them above zero (fit them, or fix them at "
        "a positive value)."
        if zero
        else "Give the model a transition_log_density (an exact density need not be "
        "degenerate), or observe a state where the noise reaches every component."
    )
    return (
        f"the Euler–Maruyama transition density of {name} is degenerate: {what} at "
        f"t = {float(t):g}, state {np.asarray(y).tolist()}, so every observed path off the "
        f"drift has zero likelihood (an infinite loss). {fix}"
    )


def _parameters_of_the_noise(model, t, y) -> list[str]:
    """The scalar parameters that the diffusion at `(t, y)` changes with."""
    names = [
        p for p in getattr(model, "parameter_names", list)() if np.ndim(getattr(model, p)) == 0
    ]
    base = np.asarray(model.diffusion(t, jnp.asarray(y), None))
    changed = []
    for p in names:
        moved = eqx.tree_at(lambda m, p=p: getattr(m, p), model, jnp.asarray(getattr(model, p)) + 1)
        if not np.array_equal(np.asarray(moved.diffusion(t, jnp.asarray(y), None)), base):
            changed.append(p)
    return changed


def euler_maruyama_log_density(model, t, y, t_next, y_next, args) -> Array:
    r"""$\log N(y' ; y + f \Delta, G G^\top \Delta)$ for one step of length $\Delta$."""
    dt = t_next - t
    mean = y + dt * model.drift(t, y, args)
    g = model.diffusion(t, y, args)
    if model.noise == "general":
        covariance = dt * g @ g.T
        return multivariate_normal.logpdf(y_next.ravel(), mean.ravel(), covariance)
    return jnp.sum(norm.logpdf(y_next, mean, jnp.abs(g) * jnp.sqrt(dt)))


def path_log_likelihood(model, transition: str, ts: Array, path: Array, args=None) -> Array:
    """$\\sum_k \\log p(y_{k+1} \\mid y_k)$ along one observed `path` of shape `(len(ts), ...)`."""
    density = (
        model.transition_log_density
        if transition == "exact"
        else lambda *step: euler_maruyama_log_density(model, *step)
    )
    steps = jax.vmap(lambda t, y, t_next, y_next: density(t, y, t_next, y_next, args))
    return jnp.sum(steps(ts[:-1], path[:-1], ts[1:], path[1:]))


def first_states(observations: Any) -> Any:
    """The first observed state of each path (of each data set, for a list): the state the
    likelihood conditions on, serving as `y0`."""
    if isinstance(observations, list | tuple):
        return [first_states(data) for data in observations]
    data = jnp.asarray(observations)
    return data[..., 0, :] if data.ndim >= 2 else data[:1]
