"""Identities of a few models and functions, for a test to compare across processes.

`python _digest_worker.py` prints, as JSON, what `identities()` returns in a fresh process.
"""

import json


def identities() -> dict[str, str]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from helpers import GRAY_SCOTT_PARAMETERS, LOTKA_VOLTERRA

    import simlab
    from simlab._identity import (
        abstract_time_and_state,
        event_identity,
        function_identity,
        model_identity,
    )

    table = np.linspace(0.0, 1.0, 2000)  # closed over: a constant, hashed by value

    def observe(y):
        return jnp.interp(y[0], table, table) * 1.2 + jax.nn.softplus(y[1])

    def extinction(t, y, args):
        return y[1] - 0.5

    ts = jnp.zeros(3)
    t, y = abstract_time_and_state(ts, jnp.zeros(2))
    grid = simlab.Grid((8, 8), extent=8.0)
    fused = simlab.models.GrayScott(**GRAY_SCOTT_PARAMETERS, grid=grid, impl="pallas")
    spectral = simlab.models.KuramotoSivashinsky(grid=simlab.Grid((16,), extent=16.0))
    return {
        "model": model_identity(LOTKA_VOLTERRA, t, y),
        "observe": function_identity(observe, y),
        "event": event_identity(simlab.Event(extinction), LOTKA_VOLTERRA, t, y),
        "pallas": model_identity(fused, *abstract_time_and_state(ts, jnp.zeros((2, 8, 8)))),
        "split": model_identity(spectral, *abstract_time_and_state(ts, jnp.zeros(16))),
    }


if __name__ == "__main__":
    import _digest_worker  # by its module name, as the test imports it
    import jax

    jax.config.update("jax_enable_x64", True)  # as in conftest: the same dtypes
    print(json.dumps(_digest_worker.identities()))
