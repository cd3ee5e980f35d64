"""The derivative of a PEtab log-likelihood, by forward sensitivities through each solve."""

import jax
from jaxtyping import Array, Float


def value_and_gradient(problem, x) -> tuple[Float[Array, ""], Float[Array, " p"]]:
    """The log-likelihood at `x` and its gradient, from one forward-mode pass (the
    sensitivities of the estimated parameters carried through each solve)."""

    def value_twice(x):
        value = problem._log_likelihood(x, adjoint="forward")
        return value, value

    gradient, value = jax.jacfwd(value_twice, has_aux=True)(x)
    return value, gradient
