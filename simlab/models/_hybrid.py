"""Hybrid models (universal differential equations): known physics plus a learned correction."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PRNGKeyArray

from ._base import AbstractModel


class HybridModel(AbstractModel):
    r"""Known physics plus a neural-network correction to its vector field.

    $$
    \dot y = f_\text{physics}(t, y; \theta) + c \odot \mathrm{MLP}_w(y / s),
    $$

    a *universal differential equation*: where the physics is incomplete, the network
    $\mathrm{MLP}_w$ learns the missing term from data. $s$ (`state_scale`) brings the
    state to order one before the network sees it, and $c$ (`correction_scale`) sets the
    size of the network's output in the units of $\dot y$. The network's last layer starts
    at zero, so an untrained hybrid model is exactly its physics.
    A physics with a mass matrix (a differential-algebraic model) keeps it:
    $M \dot y$ on the left, solved by `rodas5p` or `radau5`.

    Fit the physical parameters (named by path, e.g. `"physics.alpha"`) and the network
    (`"correction"`) jointly with `simlab.fit(..., method="gradient")`.

    **Arguments:**

    - `physics`: the known part, any [`simlab.models.AbstractModel`][] with a 1-D state.
    - `key`: a `jax.random` key for the network's initial weights.
    - `width`, `depth`: hidden-layer width and number of hidden layers of the MLP.
    - `state_scale`, `correction_scale`: scalars or one value per state component.
    - `activation`: the hidden layers' activation (smooth, so the dynamics stay smooth).

    !!! example

        ```python
        import jax.random as jr
        import simlab

        physics = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02)
        model = simlab.models.HybridModel(physics, key=jr.key(0), state_scale=50.0)
        result = simlab.fit(model, ts, observations, y0=y0, method="gradient",
                            params=["physics.alpha", "physics.gamma", "correction"])
        ```
    """

    physics: AbstractModel
    correction: eqx.nn.MLP
    state_scale: tuple[float, ...] = eqx.field(static=True)
    correction_scale: tuple[float, ...] = eqx.field(static=True)

    def __init__(
        self,
        physics: AbstractModel,
        *,
        key: PRNGKeyArray,
        width: int = 16,
        depth: int = 2,
        state_scale: float | tuple[float, ...] = 1.0,
        correction_scale: float | tuple[float, ...] = 1.0,
        activation: Callable = jax.nn.tanh,
    ):
        if not isinstance(physics, AbstractModel) or len(physics.state_shape) != 1:
            raise TypeError(
                "physics must be a simlab model with a 1-D state (e.g. LotkaVolterra); got "
                f"{type(physics).__name__}."
            )
        size = physics.state_shape[0]
        network = eqx.nn.MLP(size, size, width, depth, activation=activation, key=key)
        last = network.layers[-1]
        self.correction = eqx.tree_at(
            lambda n: (n.layers[-1].weight, n.layers[-1].bias),
            network,
            (jnp.zeros_like(last.weight), jnp.zeros_like(last.bias)),
        )
        self.physics = physics
        self.state_scale = _per_component(state_scale, size, "state_scale")
        self.correction_scale = _per_component(correction_scale, size, "correction_scale")

    @property
    def state_names(self) -> tuple[str, ...]:
        return self.physics.state_names

    @property
    def state_shape(self) -> tuple[int, ...]:
        return self.physics.state_shape

    @property
    def is_stiff(self) -> bool:
        return self.physics.is_stiff

    @property
    def mass_matrix(self):
        """The physics' mass matrix: a hybrid of a differential-algebraic model stays one."""
        return self.physics.mass_matrix

    def max_stable_step(self, solver, y0):
        return None  # the network's contribution has no known stability limit

    def __call__(self, t, y, args):
        scaled = y / jnp.asarray(self.state_scale)
        learned = jnp.asarray(self.correction_scale) * self.correction(scaled)
        return self.physics(t, y, args) + learned


def _per_component(value, size: int, name: str) -> tuple[float, ...]:
    values = np.asarray(value, dtype=float)
    if values.shape not in ((), (size,)) or not np.all(np.isfinite(values) & (values > 0)):
        raise ValueError(f"{name} must be positive: a scalar or {size} values; got {value!r}.")
    return tuple(float(v) for v in np.broadcast_to(values, (size,)))
