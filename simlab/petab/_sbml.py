"""An SBML model as a symbolic reaction network: the species that are state, the constants
(parameters and compartment sizes) that PEtab may set, and SymPy expressions for the initial
state and the time derivative.

The state is each species' value as the model's math reads it: its concentration, or its
amount where the species `hasOnlySubstanceUnits`. Reaction rates are amounts per time, so a
concentration changes by the rates divided by its compartment's (constant) size. Assignment
rules and initial assignments are substituted into the expressions; a rate rule gives its
species' derivative, or makes its parameter a state (after the species). Events are read by
`simlab.petab._events`. Features with other semantics (algebraic rules, varying
compartments, variable stoichiometry, conversion factors, fast reactions) are refused with
`NotImplementedError`.
"""

import dataclasses

import libsbml
import sympy

from ._events import SBMLEvent, read_events
from ._math import TIME, symbol, to_sympy


@dataclasses.dataclass(frozen=True)
class Network:
    """The symbolic content of an SBML model.

    - `states`: the ids of the species that are state variables, in the model's order,
      then those of the parameters that rate rules change.
    - `constants`: the ids of the parameters and compartments that keep a fixed value, with
      that value (PEtab may set them per condition).
    - `initial`: each state's initial value at time 0, in terms of `constants`.
    - `rates`: each state's time derivative, in terms of the states, `constants` and `TIME`.
    - `derived`: every other id the model defines (assignment-rule and initial-assignment
      targets), in terms of the states, `constants` and `TIME`, for observable formulas.
    - `events`: the model's events, in terms of the states, `constants` and `TIME`.
    """

    states: tuple[str, ...]
    constants: dict[str, float]
    initial: tuple[sympy.Expr, ...]
    rates: tuple[sympy.Expr, ...]
    derived: dict[str, sympy.Expr]
    events: tuple[SBMLEvent, ...] = ()


def read_network(document: libsbml.SBMLDocument) -> Network:
    """The network of an SBML document (a private copy is converted; `document` is left as
    it is)."""
    document = libsbml.readSBMLFromString(libsbml.writeSBMLToString(document))
    _check_errors(document)
    model = document.getModel()
    if model is None:
        raise ValueError("SBML: the document has no model.")
    if model.getNumFunctionDefinitions():
        _expand_function_definitions(document)
        model = document.getModel()
    _refuse_unsupported(model)
    if "time" in _ids(model):
        raise NotImplementedError(
            "SBML: an entity with the id 'time' (PEtab reads `time` as the simulation time)."
        )

    rules = {
        rule.getVariable(): to_sympy(rule.getMath(), f"the assignment rule of {rule.getVariable()}")
        for rule in model.getListOfRules()
        if rule.isAssignment()
    }
    rate_rules = {
        rule.getVariable(): to_sympy(rule.getMath(), f"the rate rule of {rule.getVariable()}")
        for rule in model.getListOfRules()
        if rule.isRate()
    }
    assignments = {
        item.getSymbol(): to_sympy(item.getMath(), f"the initial assignment of {item.getSymbol()}")
        for item in model.getListOfInitialAssignments()
    }
    for compartment in model.getListOfCompartments():
        if compartment.getId() in rules:
            raise NotImplementedError(
                f"SBML: compartment {compartment.getId()} of varying size (an assignment rule)."
            )

    # An initial assignment of a number to a constant is its value (which PEtab's condition
    # table may set).
    numbers = {
        name: float(value)
        for name, value in assignments.items()
        if value.is_number and model.getSpecies(name) is None and name not in rate_rules
    }
    assignments = {name: value for name, value in assignments.items() if name not in numbers}
    constants: dict[str, float] = {}
    for entity in [*model.getListOfCompartments(), *model.getListOfParameters()]:
        identifier = entity.getId()
        if identifier in numbers:
            constants[identifier] = numbers[identifier]
            continue
        if identifier in rules or identifier in assignments or identifier in rate_rules:
            continue
        value = entity.getSize() if isinstance(entity, libsbml.Compartment) else entity.getValue()
        is_set = (
            entity.isSetSize() if isinstance(entity, libsbml.Compartment) else entity.isSetValue()
        )
        if not is_set:
            if isinstance(entity, libsbml.Compartment) and entity.getSpatialDimensions() == 0:
                value = 1.0
            else:
                raise ValueError(f"SBML: {identifier} has no value and no assignment.")
        constants[identifier] = float(value)

    species = list(model.getListOfSpecies())
    states = [s for s in species if s.getId() not in rules]
    # Parameters that rate rules change are states after the species.
    variables = [p for p in model.getListOfParameters() if p.getId() in rate_rules]
    state_ids = {s.getId() for s in states} | {p.getId() for p in variables}

    # Values at time 0: species' initial values, then the initial assignments, in terms of
    # the constants (initial assignments may read each other, species and rules at time 0).
    start: dict[str, sympy.Expr] = {}
    for s in species:
        if s.getId() in assignments or s.getId() in rules:
            continue
        start[s.getId()] = _initial_value(s, model)
    for p in variables:
        if p.getId() in assignments:
            continue
        if not p.isSetValue():
            raise ValueError(f"SBML: {p.getId()} has no value and no assignment.")
        start[p.getId()] = sympy.Float(p.getValue())
    start.update(assignments)
    start.update({name: expression.subs(TIME, 0) for name, expression in rules.items()})
    start = _resolve(start, where="the initial assignments")

    # Targets of initial assignments that are not species are fixed from then on.
    fixed = {name: value for name, value in start.items() if name not in state_ids}
    fixed = {name: value for name, value in fixed.items() if name not in rules}
    derived = _resolve({**rules, **fixed}, where="the assignment rules")

    fluxes = {s.getId(): sympy.Integer(0) for s in states}
    for reaction in model.getListOfReactions():
        rate = _kinetic_law(reaction)
        for reference, sign in [
            *((r, -1) for r in reaction.getListOfReactants()),
            *((p, 1) for p in reaction.getListOfProducts()),
        ]:
            name = reference.getSpecies()
            if name in fluxes:
                stoichiometry = _stoichiometry(reference, reaction, set(rules) | set(assignments))
                fluxes[name] += sign * stoichiometry * rate

    rates = []
    for s in states:
        if s.getId() in rate_rules:
            rates.append(rate_rules[s.getId()])
        elif s.getBoundaryCondition() or s.getConstant():
            rates.append(sympy.Integer(0))
        elif s.getHasOnlySubstanceUnits():
            rates.append(fluxes[s.getId()])
        else:
            rates.append(fluxes[s.getId()] / symbol(s.getCompartment()))
    rates += [rate_rules[p.getId()] for p in variables]

    substitution = {symbol(name): value for name, value in derived.items()}
    network = Network(
        states=tuple(s.getId() for s in [*states, *variables]),
        constants=constants,
        initial=tuple(start[s.getId()] for s in [*states, *variables]),
        rates=tuple(sympy.sympify(rate).xreplace(substitution) for rate in rates),
        derived=derived,
        events=read_events(
            model,
            {*state_ids, *(c for c in constants if model.getCompartment(c) is None)},
            substitution,
        ),
    )
    _check_symbols(network)
    return network


def _check_errors(document: libsbml.SBMLDocument) -> None:
    errors = [
        document.getError(i)
        for i in range(document.getNumErrors())
        if document.getError(i).getSeverity() >= libsbml.LIBSBML_SEV_ERROR
    ]
    if errors:
        raise ValueError(
            "SBML: the model does not read: " + "; ".join(e.getMessage() for e in errors)
        )


def _expand_function_definitions(document: libsbml.SBMLDocument) -> None:
    properties = libsbml.ConversionProperties()
    properties.addOption("expandFunctionDefinitions", True)
    if document.convert(properties) != libsbml.LIBSBML_OPERATION_SUCCESS:
        raise NotImplementedError("SBML: function definitions that libsbml cannot expand.")


def _refuse_unsupported(model: libsbml.Model) -> None:
    """`NotImplementedError` naming the first feature of `model` this reader does not
    simulate faithfully."""
    for rule in model.getListOfRules():
        if rule.isRate() and model.getCompartment(rule.getVariable()) is not None:
            raise NotImplementedError(
                f"SBML: compartment {rule.getVariable()} of varying size (a rate rule)."
            )
        if rule.isRate() and model.getSpeciesReference(rule.getVariable()) is not None:
            raise NotImplementedError(
                f"SBML: variable stoichiometry (a rate rule for {rule.getVariable()})."
            )
        if rule.isAlgebraic():
            raise NotImplementedError("SBML: algebraic rules.")
    if model.isSetConversionFactor() or any(
        s.isSetConversionFactor() for s in model.getListOfSpecies()
    ):
        raise NotImplementedError("SBML: conversion factors.")
    for compartment in model.getListOfCompartments():
        if not compartment.getConstant():
            raise NotImplementedError(
                f"SBML: compartment {compartment.getId()} of varying size (constant='false')."
            )
    for reaction in model.getListOfReactions():
        if reaction.isSetFast() and reaction.getFast():
            raise NotImplementedError(f"SBML: fast reactions ({reaction.getId()}).")


def _ids(model: libsbml.Model) -> set[str]:
    entities = [
        *model.getListOfCompartments(),
        *model.getListOfSpecies(),
        *model.getListOfParameters(),
        *model.getListOfReactions(),
    ]
    return {entity.getId() for entity in entities}


def _initial_value(species: libsbml.Species, model: libsbml.Model) -> sympy.Expr:
    """The species' initial value in the units its symbol stands for (concentration unless
    it `hasOnlySubstanceUnits`)."""
    size = symbol(species.getCompartment())
    amounts = species.getHasOnlySubstanceUnits()
    if species.isSetInitialConcentration():
        value = sympy.Float(species.getInitialConcentration())
        return value * size if amounts else value
    if species.isSetInitialAmount():
        value = sympy.Float(species.getInitialAmount())
        return value if amounts else value / size
    raise ValueError(f"SBML: species {species.getId()} has no initial value.")


def _resolve(expressions: dict[str, sympy.Expr], *, where: str) -> dict[str, sympy.Expr]:
    """Each expression with every other one substituted in until none is left (SBML rules
    and initial assignments may read one another, without cycles)."""
    substitution = {symbol(name): expression for name, expression in expressions.items()}
    resolved = dict(expressions)
    for _ in range(len(expressions) + 1):
        changed = False
        for name, expression in resolved.items():
            new = expression.xreplace(substitution)
            if new != expression:
                resolved[name], changed = new, True
        if not changed:
            return resolved
        substitution = {symbol(name): expression for name, expression in resolved.items()}
    raise ValueError(f"SBML: {where} refer to one another in a cycle.")


def _kinetic_law(reaction: libsbml.Reaction) -> sympy.Expr:
    law = reaction.getKineticLaw()
    if law is None:
        raise ValueError(f"SBML: reaction {reaction.getId()} has no kinetic law.")
    rate = to_sympy(law.getMath(), f"the kinetic law of reaction {reaction.getId()}")
    local = [law.getParameter(i) for i in range(law.getNumParameters())]
    local += [law.getLocalParameter(i) for i in range(law.getNumLocalParameters())]
    return rate.xreplace({symbol(p.getId()): sympy.Float(p.getValue()) for p in local})


def _stoichiometry(
    reference: libsbml.SpeciesReference, reaction: libsbml.Reaction, targets: set[str]
) -> sympy.Expr:
    variable = (
        (reference.getLevel() < 3 and reference.isSetStoichiometryMath())
        or (reference.getLevel() >= 3 and not reference.getConstant())
        or (reference.isSetId() and reference.getId() in targets)
    )
    if variable:
        raise NotImplementedError(
            f"SBML: variable stoichiometry ({reference.getSpecies()} in {reaction.getId()})."
        )
    if reference.getLevel() >= 3 and not reference.isSetStoichiometry():
        raise ValueError(
            f"SBML: the stoichiometry of {reference.getSpecies()} in {reaction.getId()} is not set."
        )
    return sympy.nsimplify(reference.getStoichiometry(), rational=False)


def _check_symbols(network: Network) -> None:
    known = {symbol(name) for name in (*network.states, *network.constants)} | {TIME}
    for kind, expressions in (("initial value", network.initial), ("rate", network.rates)):
        for name, expression in zip(network.states, expressions, strict=True):
            unknown = sympy.sympify(expression).free_symbols - known
            if unknown:
                raise ValueError(
                    f"SBML: the {kind} of {name} reads {sorted(map(str, unknown))}, which the "
                    "model does not define."
                )
