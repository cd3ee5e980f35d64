"""SBML events in `simlab.petab`: a hand-built problem whose solution has a closed form
(time-triggered switches of a rate constant and of a species, a state-triggered reset that
fires repeatedly), its gradient against central differences, the refusals, and the two
problems of the benchmark collection with events against the collection's simulations."""

import math
import pathlib

import jax
import numpy as np
import pandas as pd
import pytest

petab = pytest.importorskip("petab.v1")
libsbml = pytest.importorskip("libsbml")

from petab_turnover import write_problem_yaml  # noqa: E402

import simlab.petab  # noqa: E402

pytestmark = pytest.mark.skipif(not jax.config.jax_enable_x64, reason="PEtab solves in float64")

COLLECTION = pathlib.Path(__file__).parent / "data" / "petab"

# x' = -k x from x(0) = 1; at time T the event `switch` sets k from K1 to K2, at time T2
# the event `dose` adds B to x, and whenever x falls below LOW the event `reset` sets it
# back to 1.
K1, K2, B, T, T2, LOW = 0.5, 0.8, 0.7, 1.0, 2.0, 0.2
TIMES = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0)
SIGMA = 0.1


def _x_closed_form(t, k1=K1, k2=K2, b=B):
    """x(t) of the hand-built model, after every event at t."""
    if t < T:
        return math.exp(-k1 * t)
    x_switch = math.exp(-k1 * T)
    if t < T2:
        return x_switch * math.exp(-k2 * (t - T))
    start, x = T2, x_switch * math.exp(-k2 * (T2 - T)) + b
    while True:  # each reset: x falls from x to LOW in log(x / LOW) / k2
        fall = start + math.log(x / LOW) / k2
        if t < fall:
            return x * math.exp(-k2 * (t - start))
        start, x = fall, 1.0


def _sbml(event_changes=None) -> str:
    document = libsbml.SBMLDocument(3, 1)
    model = document.createModel()
    model.setId("switched_decay")
    compartment = model.createCompartment()
    compartment.setId("cell")
    compartment.setSize(1.0)
    compartment.setConstant(True)
    species = model.createSpecies()
    for setter, value in (
        ("setId", "x"),
        ("setCompartment", "cell"),
        ("setInitialConcentration", 1.0),
        ("setHasOnlySubstanceUnits", False),
        ("setBoundaryCondition", False),
        ("setConstant", False),
    ):
        getattr(species, setter)(value)
    for name, value, constant in (
        ("k", K1, False),
        ("k2", K2, True),
        ("b", B, True),
        ("T", T, True),
        ("low", LOW, True),
    ):
        parameter = model.createParameter()
        parameter.setId(name)
        parameter.setValue(value)
        parameter.setConstant(constant)
    reaction = model.createReaction()
    reaction.setId("decay")
    reaction.setReversible(False)
    reaction.setFast(False)
    reactant = reaction.createReactant()
    reactant.setSpecies("x")
    reactant.setStoichiometry(1.0)
    reactant.setConstant(True)
    reaction.createKineticLaw().setMath(libsbml.parseL3Formula("k * x * cell"))
    for name, trigger, target, value in (
        ("switch", "time >= T", "k", "k2"),
        ("dose", f"time >= {T2}", "x", "x + b"),
        ("reset", "x < low", "x", "1"),
    ):
        event = model.createEvent()
        event.setId(name)
        event.setUseValuesFromTriggerTime(True)
        condition = event.createTrigger()
        condition.setMath(libsbml.parseL3Formula(trigger))
        condition.setInitialValue(True)
        condition.setPersistent(True)
        assignment = event.createEventAssignment()
        assignment.setVariable(target)
        assignment.setMath(libsbml.parseL3Formula(value))
        if event_changes is not None:
            event_changes(event)
    return libsbml.writeSBMLToString(document)


def _measured(t):
    return _x_closed_form(t) + 0.05 * math.sin(3 * t)


def _write_problem(folder: pathlib.Path, sbml: str, measurements=None) -> pathlib.Path:
    (folder / "model.xml").write_text(sbml)
    if measurements is None:
        measurements = pd.DataFrame(
            {
                "observableId": ["x_obs"] * len(TIMES) + ["k_obs"] * 3,
                "simulationConditionId": "c0",
                "time": [*TIMES, 0.5, T, 3.0],
                "measurement": [*(_measured(t) for t in TIMES), K1, K2, K2],
            }
        )
    measurements.to_csv(folder / "measurements.tsv", sep="\t", index=False)
    pd.DataFrame({"conditionId": ["c0"]}).to_csv(folder / "conditions.tsv", sep="\t", index=False)
    pd.DataFrame(
        {
            "observableId": ["x_obs", "k_obs"],
            "observableFormula": ["x", "k"],
            "noiseFormula": [SIGMA, SIGMA],
        }
    ).to_csv(folder / "observables.tsv", sep="\t", index=False)
    pd.DataFrame(
        {
            "parameterId": ["k", "k2", "b"],
            "parameterScale": "lin",
            "lowerBound": 0.01,
            "upperBound": 10.0,
            "nominalValue": [K1, K2, B],
            "estimate": 1,
        }
    ).to_csv(folder / "parameters.tsv", sep="\t", index=False)
    return write_problem_yaml(folder)


@pytest.fixture(scope="module")
def switched(tmp_path_factory):
    return simlab.petab.load(_write_problem(tmp_path_factory.mktemp("events"), _sbml()))


def test_time_and_state_events_match_the_closed_form(switched):
    # Two resets fire by t = 7; a measurement at an event's time sees its assignment.
    table = switched.simulate()
    x = table[table["observableId"] == "x_obs"]
    expected = [_x_closed_form(t) for t in TIMES]
    np.testing.assert_allclose(x["simulation"], expected, rtol=1e-6, atol=1e-9)
    k = table[table["observableId"] == "k_obs"]
    np.testing.assert_allclose(k["simulation"], [K1, K2, K2], rtol=1e-12)


def test_log_likelihood_gradient_matches_central_differences(switched):
    def closed_form_llh(k1, k2, b):
        residuals = [_x_closed_form(t, k1, k2, b) - _measured(t) for t in TIMES]
        residuals += [k1 - K1, k2 - K2, k2 - K2]
        return sum(
            -0.5 * math.log(2 * math.pi * SIGMA**2) - 0.5 * (r / SIGMA) ** 2 for r in residuals
        )

    x = np.asarray(switched.nominal)
    assert float(switched.log_likelihood(x)) == pytest.approx(closed_form_llh(*x), rel=1e-7)
    gradient = np.asarray(jax.jit(jax.grad(switched.log_likelihood))(x))
    step = 1e-5
    differences = [
        (closed_form_llh(*(x + step * e)) - closed_form_llh(*(x - step * e))) / (2 * step)
        for e in np.eye(3)
    ]
    np.testing.assert_allclose(gradient, differences, rtol=1e-5)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda e: e.createDelay().setMath(libsbml.parseL3Formula("1")), "has a delay"),
        (lambda e: e.createPriority().setMath(libsbml.parseL3Formula("1")), "has a priority"),
        (lambda e: e.getTrigger().setInitialValue(False), "initialValue='false'"),
        (
            lambda e: e.getTrigger().setMath(libsbml.parseL3Formula("time > 1 && x < 2")),
            "only a comparison",
        ),
        (lambda e: e.getEventAssignment(0).setVariable("cell"), "assigns cell"),
    ],
    ids=["delay", "priority", "initial-value", "logical-trigger", "compartment"],
)
def test_unsupported_event_features_are_refused(tmp_path, change, message):
    yaml = _write_problem(tmp_path, _sbml(change))
    with pytest.raises(NotImplementedError, match=message):
        simlab.petab.load(yaml)


def test_events_with_a_steady_state_measurement_are_refused(tmp_path):
    measurements = pd.DataFrame(
        {
            "observableId": ["x_obs"],
            "simulationConditionId": ["c0"],
            "time": [np.inf],
            "measurement": [0.0],
        }
    )
    yaml = _write_problem(tmp_path, _sbml(), measurements)
    with pytest.raises(NotImplementedError, match="events with preequilibration or steady"):
        simlab.petab.load(yaml)


def test_liu_log_likelihood_matches_the_collection_simulation():
    # The event `U < 1e-8 -> U = 0` does not fire before the last measurement (day 4).
    # The noise formula reads the states, which `petab.calculate_llh` cannot evaluate: the
    # reference is the normal log-likelihood of the collection's simulation table.
    name = "Liu_IFACPapersOnLine2025"
    problem = simlab.petab.load(COLLECTION / name / f"{name}.yaml")
    recorded = petab.get_simulation_df(str(COLLECTION / name / f"simulatedData_{name}.tsv"))
    table = problem.simulate()
    key = ["simulationConditionId", "time"]
    ours = table.groupby(key)["simulation"].first()
    theirs = recorded.groupby(key)["simulation"].first()
    np.testing.assert_allclose(ours, theirs.loc[ours.index], rtol=1e-6)

    nominal = problem.petab_problem.parameter_df["nominalValue"]
    simulated = theirs.loc[list(zip(table["simulationConditionId"], table["time"], strict=True))]
    simulated = simulated.to_numpy()
    sigma = np.sqrt(nominal["sigma_a"] ** 2 + (nominal["sigma_b"] * simulated) ** 2)
    measured = problem.petab_problem.measurement_df["measurement"].to_numpy()
    reference = np.sum(
        -0.5 * np.log(2 * np.pi * sigma**2) - 0.5 * ((measured - simulated) / sigma) ** 2
    )
    value = float(jax.jit(problem.log_likelihood)(problem.nominal))
    assert value == pytest.approx(reference, abs=1e-3, rel=1e-3)


@pytest.mark.slow
def test_smith_log_likelihood_matches_petab_on_the_collection_simulation():
    # Two compiles (simulation table, log-likelihood) of about two minutes each (133
    # species). The noise is 1 against measurements in the hundreds, so the log-likelihood
    # (-888198) moves by 1e-2 when the simulation moves by 1e-8 relative: that is the
    # comparison's resolution.
    name = "Smith_BMCSystBiol2013"
    problem = simlab.petab.load(COLLECTION / name / f"{name}.yaml")
    recorded = pd.read_csv(COLLECTION / name / f"simulatedData_{name}.tsv", sep="\t", index_col=0)
    key = ["simulationConditionId", "observableId", "time"]
    table = problem.simulate().merge(recorded[[*key, "simulation"]], on=key, suffixes=("", "_ref"))
    assert len(table) == len(recorded)
    np.testing.assert_allclose(table["simulation"], table["simulation_ref"], rtol=1e-6, atol=1e-9)

    source = problem.petab_problem
    reference = petab.calculate_llh(
        source.measurement_df,
        recorded.drop(columns="datasetId"),  # named differently from the measurements'
        source.observable_df,
        source.parameter_df,
    )
    value = float(jax.jit(problem.log_likelihood)(problem.nominal))
    assert value == pytest.approx(reference, rel=1e-7)
