"""PEtab observables: the observable and noise formulas of the observable table, read by
PEtab's own formula reader and compiled to JAX.

A formula may read the states, any id the SBML model defines (rule targets are substituted),
the parameters of the parameter table, `time`, and its own placeholders
(`observableParameter{n}_{id}`, `noiseParameter{n}_{id}`), whose values each measurement
supplies. A noise formula may also read the observable's placeholders and the observable
itself (its id stands for the observable formula).
"""

import petab.v1 as petab
import sympy

from ._math import TIME, lambdify
from ._sbml import Network


class CompiledObservable:
    """One observable: `value(t, y, constants, theta, placeholders)` and
    `sigma(t, y, constants, theta, placeholders)`, with its transformation and noise
    distribution. `theta` is the linear value of every parameter of the parameter table;
    the placeholders are those of the observable formula, and for `sigma` those of the
    observable formula followed by those of the noise formula."""

    def __init__(self, row, network: Network, table_ids: tuple[str, ...]):
        self.id = row.name
        self.transformation = _text(row, petab.C.OBSERVABLE_TRANSFORMATION, petab.C.LIN)
        self.distribution = _text(row, petab.C.NOISE_DISTRIBUTION, petab.C.NORMAL)
        formula = str(row[petab.C.OBSERVABLE_FORMULA])
        noise = str(row[petab.C.NOISE_FORMULA])
        self.observable_placeholders = tuple(
            petab.observables.get_formula_placeholders(formula, self.id, "observable")
        )
        self.noise_placeholders = tuple(
            petab.observables.get_formula_placeholders(noise, self.id, "noise")
        )
        self.value = _compile(
            petab.math.sympify_petab(formula),
            self.observable_placeholders,
            network,
            table_ids,
            f"observable {self.id}",
        )
        # The observable's id in its noise formula stands for the observable's value.
        noise_expression = petab.math.sympify_petab(noise)
        if isinstance(noise_expression, sympy.Expr):
            noise_expression = noise_expression.xreplace(
                {
                    s: petab.math.sympify_petab(formula)
                    for s in noise_expression.free_symbols
                    if s.name == self.id
                }
            )
        self.sigma = _compile(
            noise_expression,
            self.observable_placeholders + self.noise_placeholders,
            network,
            table_ids,
            f"the noise formula of {self.id}",
        )


def _text(row, column: str, default: str) -> str:
    value = row.get(column, default)
    return default if not isinstance(value, str) or not value else value


def _compile(expression, placeholders, network: Network, table_ids, where: str):
    if not isinstance(expression, sympy.Expr):
        raise NotImplementedError(f"PEtab: {where} is not a number-valued formula: {expression!r}.")
    states = [sympy.Dummy(name) for name in network.states]
    constants = [sympy.Dummy(name) for name in network.constants]
    theta = [sympy.Dummy(name) for name in table_ids]
    slots = [sympy.Dummy(name) for name in placeholders]
    roles = {
        **dict(zip(table_ids, theta, strict=True)),
        **dict(zip(network.constants, constants, strict=True)),
        **dict(zip(network.states, states, strict=True)),
        **dict(zip(placeholders, slots, strict=True)),
    }
    for _ in range(len(network.derived) + 1):  # rule targets, until none is left
        derived = {
            s: network.derived[s.name] for s in expression.free_symbols if s.name in network.derived
        }
        if not derived:
            break
        expression = expression.xreplace(derived)
    substitution = {}
    for free in expression.free_symbols:
        if free.name == TIME.name:
            substitution[free] = TIME
        elif free.name in roles:
            substitution[free] = roles[free.name]
        else:
            raise ValueError(f"PEtab: {where} reads {free.name!r}, which is defined nowhere.")
    expression = expression.xreplace(substitution)
    return lambdify([TIME, states, constants, theta, slots], expression)
