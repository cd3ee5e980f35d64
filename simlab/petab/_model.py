"""The simlab model of an SBML reaction network: an ODE model whose parameters are the
network's constants, its vector field and initial state compiled from SymPy to JAX."""

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..models import AbstractODEModel, parameter
from ._events import CompiledEvents
from ._math import TIME, lambdify, symbol
from ._sbml import Network


class CompiledNetwork:
    """A network's expressions as JAX functions: `rate(t, y, constants)` and
    `initial(constants)`, and its `events` (`None` without). Compared and hashed by
    identity (a static field of a model)."""

    def __init__(self, network: Network):
        self.network = network
        states = [symbol(name) for name in network.states]
        constants = [symbol(name) for name in network.constants]
        self._rate = lambdify([TIME, states, constants], list(network.rates))
        self._initial = lambdify([constants], list(network.initial))
        self.events = (
            CompiledEvents(network.events, network.states, tuple(network.constants))
            if network.events
            else None
        )

    def __repr__(self) -> str:
        network = self.network
        return f"CompiledNetwork({len(network.states)} states, {len(network.constants)} constants)"

    def rate(self, t, y, constants):
        return jnp.stack(jnp.broadcast_arrays(*self._rate(t, y, constants))).astype(y.dtype)

    def initial(self, constants):
        values = jnp.broadcast_arrays(*self._initial(constants))
        return jnp.stack(values).astype(constants.dtype)


class SBMLModel(AbstractODEModel):
    """An SBML reaction network as a simlab ODE model (stiff: Rodas5P by default).

    The state is the species' values as the SBML math reads them, in `state_names` order:
    concentrations, or amounts for species that have only substance units. `constants` holds
    the values of the SBML parameters and compartment sizes named by `constant_names`;
    `initial_state()` is the state at time 0 they give.

    !!! example

        ```python
        model = problem.model("model1_data1")
        trajectory = simlab.simulate(model, model.initial_state(), jnp.linspace(0, 240, 25))
        ```
    """

    constants: Float[Array, " n"] = parameter()
    constant_names: tuple[str, ...] = eqx.field(static=True)
    state_names: tuple[str, ...] = eqx.field(static=True)
    compiled: CompiledNetwork = eqx.field(static=True)

    stiff: ClassVar[bool] = True

    def __call__(self, t, y, args):
        return self.compiled.rate(t, y, self.constants)

    def initial_state(self) -> Float[Array, " states"]:
        """The state at time 0: the SBML initial values and initial assignments, computed
        from `constants`."""
        return self.compiled.initial(self.constants)

    def constant(self, name: str) -> Float[Array, ""]:
        """The value of the SBML parameter or compartment `name`."""
        return self.constants[self.constant_names.index(name)]


def sbml_model(compiled: CompiledNetwork, constants: Float[Array, " n"]) -> SBMLModel:
    """The model of `compiled` with these constant values."""
    return SBMLModel(
        constants=constants,
        constant_names=tuple(compiled.network.constants),
        state_names=compiled.network.states,
        compiled=compiled,
    )
