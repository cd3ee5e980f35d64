"""Model equations the mutation run found unchecked by the fast model tests, each against
its docstring formula or an analytic property."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simlab import models

RNG_SEED = 20261202


def brusselator(y, a, b):
    x, y_ = y
    return [a - (b + 1) * x + x**2 * y_, b * x - x**2 * y_]


def test_brusselator_vector_field_equals_its_equations():
    rng = np.random.default_rng(RNG_SEED)
    for _ in range(3):
        a, b = rng.uniform(0.2, 3.0, 2)
        y = rng.uniform(-2.0, 5.0, 2)
        got = models.Brusselator(a=float(a), b=float(b))(0.0, jnp.asarray(y), None)
        np.testing.assert_allclose(got, brusselator(y, a, b), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("b", [1.5, 3.0])
def test_brusselator_fixed_point_and_its_jacobian_are_the_textbook_ones(b):
    """(a, b/a) is stationary, with Jacobian trace b - 1 - a^2 and determinant a^2."""
    a = 1.2
    model = models.Brusselator(a=a, b=b)
    fixed_point = jnp.array([a, b / a])
    np.testing.assert_allclose(model(0.0, fixed_point, None), 0.0, atol=1e-14)
    jacobian = np.asarray(jax.jacfwd(lambda y: model(0.0, y, None))(fixed_point))
    np.testing.assert_allclose(np.trace(jacobian), b - 1 - a**2, rtol=1e-13)
    np.testing.assert_allclose(np.linalg.det(jacobian), a**2, rtol=1e-13)
