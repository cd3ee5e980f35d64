r"""The likelihood of observed paths of a stochastic model, from its transition density.

A path observed at times $t_0 < \dots < t_n$ has, conditional on its first state,
$\log L = \sum_k \log p(y_{k+1} \mid y_k)$ (the process is Markov). The density $p$ is the
model's own `transition_log_density` where it has one (exact), or the Euler–Maruyama
Gaussian $N(y_k + f(t_k, y_k)\Delta_k,\; G G^\top \Delta_k)$, $G$ the diffusion at $y_k$:
exact as the intervals shrink, biased by $O(\Delta)$ in the drift otherwise.
"""

from typing import Any

import jax
import jax.numpy as jnp
from jax.scipy.stats import multivariate_normal, norm
from jaxtyping import Array

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
