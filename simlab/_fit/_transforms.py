r"""Bijections from the real line onto a parameter's valid range.

The optimiser works on unconstrained values $u \in \mathbb{R}$; the model sees
$\theta = g(u)$, which lies inside the declared range for every $u$, so no iterate is ever
an invalid model.
"""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from ..models._base import Bounds


@dataclasses.dataclass(frozen=True)
class Transform:
    """$\\theta = g(u)$ onto `(lower, upper)`: identity, shifted exponential or scaled sigmoid;
    onto `[lower, upper]` by a sine where `closed`.

    A plain dataclass (not a pytree), so it is a leaf of the tree of transforms that
    mirrors the fitted parameters.
    """

    lower: float = -math.inf
    upper: float = math.inf
    # A closed range `[lower, upper]` mapped by a sine (as MINUIT maps its bounded
    # parameters): g'(u) vanishes only on a bound, so a start never sinks into a flat,
    # saturated tail as with the sigmoid, and an estimate on a bound is reached at finite u.
    closed: bool = False

    @property
    def kind(self) -> str:
        if self.closed:
            return "sine"
        if math.isinf(self.lower) and math.isinf(self.upper):
            return "identity"
        if math.isinf(self.upper):
            return "log-lower"  # theta = lower + exp(u): rates are scale-free in log space
        if math.isinf(self.lower):
            return "log-upper"  # theta = upper - exp(u)
        return "sigmoid"

    def to_natural(self, u):
        # u is clipped where the map saturates in floating point: there g(u) would round
        # onto the bound itself, which is outside an open range.
        kind = self.kind
        if kind == "identity":
            return u
        eps = jnp.finfo(jnp.result_type(u)).eps
        if kind in ("log-lower", "log-upper"):
            bound = self.lower if kind == "log-lower" else self.upper
            tiny = math.sqrt(float(jnp.finfo(jnp.result_type(u)).tiny))  # clear of denormals
            floor = math.log(max(4 * float(eps) * abs(bound), tiny))
            distance = jnp.exp(jnp.maximum(u, floor))
            return self.lower + distance if kind == "log-lower" else self.upper - distance
        if kind == "sine":
            return self.lower + (self.upper - self.lower) * 0.5 * (1.0 + jnp.sin(u))
        limit = -math.log(float(eps)) - 2.0
        fraction = jax.nn.sigmoid(jnp.clip(u, -limit, limit))
        return self.lower + (self.upper - self.lower) * fraction

    def to_unconstrained(self, theta):
        kind = self.kind
        if kind == "identity":
            return theta
        if kind == "log-lower":
            return jnp.log(theta - self.lower)
        if kind == "log-upper":
            return jnp.log(self.upper - theta)
        fraction = (theta - self.lower) / (self.upper - self.lower)
        if kind == "sine":
            return jnp.arcsin(jnp.clip(2.0 * fraction - 1.0, -1.0, 1.0))
        return jnp.log(fraction) - jnp.log1p(-fraction)

    @property
    def branch(self) -> tuple[float, float]:
        """The range of `u` on which `g` is one to one (onto the whole range)."""
        return (-0.5 * math.pi, 0.5 * math.pi) if self.kind == "sine" else (-math.inf, math.inf)

    def strictly_inside(self, theta: np.ndarray) -> np.ndarray:
        """Whether a starting value maps to a finite $u$ (open range, bounds excluded)."""
        if self.closed:
            return np.asarray((theta >= self.lower) & (theta <= self.upper))
        return np.asarray((theta > self.lower) & (theta < self.upper))

    def describe(self) -> str:
        if self.closed:
            return f"[{self.lower:g}, {self.upper:g}]"
        return f"({self.lower:g}, {self.upper:g})"


IDENTITY = Transform()


def transform_for(bounds: Bounds | None) -> Transform:
    """The transform onto a declared range; unbounded (or undeclared) means identity."""
    if bounds is None:
        return IDENTITY
    return Transform(lower=float(bounds.lower), upper=float(bounds.upper))
