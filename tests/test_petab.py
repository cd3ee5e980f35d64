"""`simlab.petab` on the Boehm et al. (2014) problem of the PEtab benchmark collection,
against the collection's recorded log-likelihood, petab's own evaluation of the noise
model, independent integrations of the SBML model (SciPy, libRoadRunner), and finite
differences."""

import math
import pathlib
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

petab = pytest.importorskip("petab.v1")
libsbml = pytest.importorskip("libsbml")
sympy = pytest.importorskip("sympy")
integrate = pytest.importorskip("scipy.integrate")

from petab_turnover import write_problem_yaml  # noqa: E402

import simlab  # noqa: E402
import simlab.petab  # noqa: E402

pytestmark = pytest.mark.skipif(not jax.config.jax_enable_x64, reason="PEtab solves in float64")

BOEHM = pathlib.Path(__file__).parent / "data" / "petab" / "Boehm_JProteomeRes2014"
YAML = BOEHM / "Boehm_JProteomeRes2014.yaml"

# The log-likelihood at the nominal parameters recorded for the benchmark collection's
# problems in AMICI's test suite (AMICI-dev/AMICI, tests/benchmark_models/benchmark_models.yaml,
# "Boehm_JProteomeRes2014: llh: -138.22199693517703"), computed by AMICI (CVODES).
REFERENCE_LLH = -138.22199693517703


@pytest.fixture(scope="module")
def problem():
    return simlab.petab.load(YAML)


@pytest.fixture(scope="module")
def table(problem):
    return problem.simulate()  # at the nominal parameters


@pytest.fixture(scope="module")
def llh(problem):
    return jax.jit(problem.log_likelihood)


def test_parameters_are_the_estimated_ones_on_their_scales(problem):
    parameters = problem.petab_problem.parameter_df
    estimated = parameters[parameters["estimate"] == 1]
    assert problem.parameter_ids == tuple(estimated.index)
    assert problem.scales == ("log10",) * 9
    np.testing.assert_allclose(
        problem.nominal, np.log10(estimated["nominalValue"].to_numpy()), rtol=1e-14
    )


def test_log_likelihood_matches_the_collection_reference(problem, llh):
    assert float(llh(problem.nominal)) == pytest.approx(REFERENCE_LLH, rel=1e-7)


def test_log_likelihood_matches_petab_on_the_simulation_table(problem, table, llh):
    tables = problem.petab_problem
    assert list(table.columns) == [
        "simulation" if column == "measurement" else column
        for column in tables.measurement_df.columns
    ]
    expected = petab.calculate_llh(
        tables.measurement_df, table, tables.observable_df, tables.parameter_df
    )
    assert float(llh(problem.nominal)) == pytest.approx(expected, rel=1e-12)


def test_simulation_matches_the_collection_simulated_data(table):
    # The collection's own simulation at the nominal parameters, to 10 significant digits.
    recorded = petab.get_simulation_df(str(BOEHM / "simulatedData_Boehm_JProteomeRes2014.tsv"))
    assert list(recorded["observableId"]) == list(table["observableId"])
    np.testing.assert_allclose(recorded["time"], table["time"])
    np.testing.assert_allclose(table["simulation"], recorded["simulation"], rtol=1e-7, atol=1e-9)


def _parameter_values(tables) -> dict[str, float]:
    """SBML values with the parameter table's nominal values over them."""
    model = tables.model.sbml_model
    values = {p.getId(): p.getValue() for p in model.getListOfParameters()}
    values.update({c.getId(): c.getSize() for c in model.getListOfCompartments()})
    values.update(tables.parameter_df["nominalValue"].to_dict())
    return values


def _scipy_states(tables, times):
    """The species concentrations at `times` by SciPy's LSODA at rtol 1e-10, the right-hand
    side assembled here from libsbml's objects: kinetic laws and rules as libsbml's
    Level 1 formula text evaluated by Python with NumPy, stoichiometries and compartment
    sizes read directly."""
    model = tables.model.sbml_model
    values = _parameter_values(tables)
    species = [s.getId() for s in model.getListOfSpecies()]

    compiled = {}

    def evaluate(math, namespace):
        key = libsbml.formulaToString(math)
        if key not in compiled:
            compiled[key] = compile(key.replace("^", "**"), "<sbml>", "eval")
        return eval(compiled[key], {"exp": math_exp, "pow": pow}, namespace)

    def namespace(t, y):
        scope = {**values, **dict(zip(species, y, strict=True)), "t": t, "time": t}
        for rule in model.getListOfRules():
            scope[rule.getVariable()] = evaluate(rule.getMath(), scope)
        return scope

    def rhs(t, y):
        scope = namespace(t, y)
        dydt = np.zeros(len(species))
        for reaction in model.getListOfReactions():
            rate = evaluate(reaction.getKineticLaw().getMath(), scope)
            for sign, references in (
                (-1, reaction.getListOfReactants()),
                (1, reaction.getListOfProducts()),
            ):
                for reference in references:
                    s = model.getSpecies(reference.getSpecies())
                    volume = values[s.getCompartment()]
                    dydt[species.index(s.getId())] += (
                        sign * reference.getStoichiometry() * rate / volume
                    )
        return dydt

    y0 = np.array([model.getSpecies(s).getInitialConcentration() for s in species])
    scope = namespace(0.0, y0)
    for assignment in model.getListOfInitialAssignments():
        y0[species.index(assignment.getSymbol())] = evaluate(assignment.getMath(), scope)
    solution = integrate.solve_ivp(
        rhs, (0.0, times[-1]), y0, method="LSODA", t_eval=times, rtol=1e-10, atol=1e-12
    )
    assert solution.success
    return species, solution.y.T


def _observables(tables, species, states, times):
    """PEtab's observable formulas evaluated with SymPy at the given states."""
    values = _parameter_values(tables)
    out = {}
    for observable_id, row in tables.observable_df.iterrows():
        expression = petab.math.sympify_petab(row["observableFormula"])
        names = sorted(expression.free_symbols, key=str)
        function = sympy.lambdify(names, expression, "numpy")
        columns = []
        for name in map(str, names):
            columns.append(
                states[:, species.index(name)]
                if name in species
                else np.full(len(times), values[name])
            )
        out[observable_id] = function(*columns)
    return out


def _compare_table(tables, table, species, states, times, rtol):
    observed = _observables(tables, species, states, times)
    for _, row in table.iterrows():
        expected = observed[row["observableId"]][np.searchsorted(times, row["time"])]
        assert row["simulation"] == pytest.approx(expected, rel=rtol, abs=1e-9)


def test_simulation_matches_scipy_lsoda(problem, table):
    tables = problem.petab_problem
    times = np.unique(np.concatenate([[0.0], tables.measurement_df["time"].to_numpy(float)]))
    species, states = _scipy_states(tables, times)

    model = problem.model("model1_data1")
    assert model.state_names == tuple(species)
    trajectory = simlab.simulate(
        model, model.initial_state(), jnp.asarray(times), solver="rodas5p", rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(trajectory.ys, states, rtol=1e-7, atol=1e-9)
    _compare_table(tables, table, species, states, times, rtol=1e-7)


def test_simulation_matches_libroadrunner(problem, table):
    roadrunner = pytest.importorskip("roadrunner")
    tables = problem.petab_problem
    times = np.unique(np.concatenate([[0.0], tables.measurement_df["time"].to_numpy(float)]))
    runner = roadrunner.RoadRunner(libsbml.writeSBMLToString(tables.model.sbml_document))
    for name, value in tables.parameter_df["nominalValue"].items():
        if tables.model.sbml_model.getParameter(name) is not None:
            runner[name] = value
    runner.reset()  # species back to their initial values (not the parameters just set)
    runner.integrator.relative_tolerance = 1e-12
    runner.integrator.absolute_tolerance = 1e-14
    species = list(runner.model.getFloatingSpeciesIds())
    runner.timeCourseSelections = ["time"] + [f"[{name}]" for name in species]
    result = np.asarray(runner.simulate(times=list(times)))
    np.testing.assert_allclose(result[:, 0], times)
    _compare_table(tables, table, species, result[:, 1:], times, rtol=1e-8)


def test_gradient_matches_central_differences(problem):
    x = problem.nominal
    gradient = np.asarray(jax.jit(jax.grad(problem.log_likelihood))(x))
    # Differences of a tighter solve, on the fourth-order stencil: the log10 scales curve
    # enough that two-point differences carry percent-level truncation errors.
    tight = simlab.petab.load(YAML, rtol=1e-13, atol=1e-15)
    llh = jax.jit(tight.log_likelihood)
    step = 1e-3

    def at(i, offset):
        return float(llh(x.at[i].add(offset)))

    for i, name in enumerate(problem.parameter_ids):
        difference = (8 * (at(i, step) - at(i, -step)) - (at(i, 2 * step) - at(i, -2 * step))) / (
            12 * step
        )
        assert gradient[i] == pytest.approx(difference, rel=2e-5), name


def _copy(tmp_path) -> pathlib.Path:
    for file in BOEHM.iterdir():
        shutil.copy(file, tmp_path / file.name)
    return tmp_path / YAML.name


def test_condition_table_sets_initial_values(tmp_path):
    yaml = _copy(tmp_path)
    conditions = tmp_path / "experimentalCondition_Boehm_JProteomeRes2014.tsv"
    table = petab.get_condition_df(str(conditions))
    table["STAT5A"] = 100.0
    petab.write_condition_df(table, str(conditions))
    changed = simlab.petab.load(yaml)
    model = changed.model("model1_data1")
    y0 = changed.initial_state("model1_data1")
    index = model.state_names.index("STAT5A")
    assert float(y0[index]) == 100.0
    assert float(model.initial_state()[index]) != 100.0  # the SBML value
    np.testing.assert_array_equal(np.delete(y0, index), np.delete(model.initial_state(), index))


def test_unsupported_math_is_refused(tmp_path):
    yaml = _copy(tmp_path)
    sbml = tmp_path / "model_Boehm_JProteomeRes2014.xml"
    document = libsbml.readSBMLFromFile(str(sbml))
    law = document.getModel().getReaction(0).getKineticLaw()
    law.setMath(libsbml.parseL3Formula("k_phos * delay(STAT5A, 1)"))
    libsbml.writeSBMLToFile(document, str(sbml))
    with pytest.raises(NotImplementedError, match="delay"):
        simlab.petab.load(yaml)


def test_sbml_logical_operators_and_equalities_read_as_conditions():
    from simlab.petab._math import symbol, to_sympy

    text = "piecewise(1, (x > 1) && (y < 2) || !(x == 3), 0) + piecewise(5, xor(x > 1, y != 2), 0)"
    expression = to_sympy(libsbml.parseL3Formula(text), "a test formula")
    x, y = symbol("x"), symbol("y")
    function = sympy.lambdify([x, y], expression, "jax")
    for a, b in [(1.5, 1.0), (3.0, 3.0), (0.0, 2.0), (2.0, 2.0), (3.0, 1.0)]:
        first = 1 if ((a > 1 and b < 2) or not a == 3) else 0
        second = 5 if ((a > 1) != (b != 2)) else 0
        assert float(function(jnp.asarray(a), jnp.asarray(b))) == first + second


def test_sbml_math_reads_names_that_sympy_would_take_for_its_own():
    from simlab.petab._math import symbol, to_sympy

    math = libsbml.parseL3Formula("beta * E + piecewise(gamma, S < 1, log10(I)) + ln(time)")
    expression = to_sympy(math, "a test formula")
    beta, e, gamma, s, i = (symbol(name) for name in ("beta", "E", "gamma", "S", "I"))
    value = expression.subs({beta: 2, e: 3, gamma: 5, s: 0.5, i: 100, symbol("time"): math_e()})
    assert float(value) == pytest.approx(2 * 3 + 5 + 1)
    value = expression.subs({beta: 2, e: 3, gamma: 5, s: 2, i: 100, symbol("time"): math_e()})
    assert float(value) == pytest.approx(2 * 3 + 2 + 1)


def test_sbml_products_and_sums_of_fewer_than_two_terms_are_the_term_one_and_zero():
    from simlab.petab._math import symbol, to_sympy

    def read(operator, terms):
        arguments = "".join(f"<ci> {term} </ci>" for term in terms)
        mathml = (
            '<math xmlns="http://www.w3.org/1998/Math/MathML">'
            f"<apply><{operator}/>{arguments}</apply></math>"
        )
        return to_sympy(libsbml.readMathMLFromString(mathml), "a test formula")

    a = symbol("a")
    assert read("times", ["a"]) == a and read("plus", ["a"]) == a
    assert read("times", []) == 1 and read("plus", []) == 0
    assert read("times", ["a", "a"]) == a**2


def math_e() -> float:
    return math.e


def math_exp(value: float) -> float:
    return math.exp(value)


# Problems of the benchmark collection (tests/data/petab/<name>/, each with its README and
# the collection's LICENSE), with the log-likelihood at the nominal parameters that AMICI's
# test suite records for them (AMICI-dev/AMICI, tests/benchmark_models/benchmark_models.yaml),
# or, where noted, `petab.calculate_llh` on the collection's own simulation table
# (`simulatedData_<name>.tsv`). Each compiles for 10-30 s, except the first.
COLLECTION = [
    # AMICI records -190.96521897 (1.2e-3 away, 6.5e-6 relative); the collection's
    # simulation table gives this value, and simlab's simulation matches it to 1e-8.
    ("Crauste_CellSystems2017", -190.963978, False),
    ("Borghans_BiophysChem1997", 83.3237191357272, True),
    ("Brannmark_JBC2010", -141.889113770537, True),  # preequilibration
    ("Elowitz_Nature2000", 63.20279991419332, True),
    ("Fujita_SciSignal2010", 53.08377736998929, True),  # 6 conditions
    ("Schwen_PONE2014", -943.9992988598723, True),  # 19 conditions
    ("Sneyd_PNAS2002", 319.79177818768756, True),  # 9 conditions
    ("Weber_BMC2015", -296.2017922646865, True),  # preequilibration
    ("Zheng_PNAS2012", 278.33353271001477, True),  # preequilibration
]


@pytest.mark.parametrize(
    ("name", "reference"),
    [
        pytest.param(name, reference, id=name, marks=[pytest.mark.slow] if slow else [])
        for name, reference, slow in COLLECTION
    ],
)
def test_collection_log_likelihood_at_the_nominal_parameters(name, reference):
    folder = BOEHM.parent / name
    problem = simlab.petab.load(folder / f"{name}.yaml")
    value = float(jax.jit(problem.log_likelihood)(problem.nominal))
    assert value == pytest.approx(reference, abs=1e-3, rel=1e-3)
    assert abs(value - reference) <= 1e-3


def test_bertozzi_in_the_collections_newer_layout_matches_petab_on_its_simulation():
    # `problem.yaml` and short table names; its SBML has a product of one factor.
    folder = BOEHM.parent / "Bertozzi_PNAS2020"
    problem = simlab.petab.load(folder / "problem.yaml")
    tables = problem.petab_problem
    recorded = petab.get_simulation_df(str(folder / "simulations.tsv"))
    np.testing.assert_allclose(problem.simulate()["simulation"], recorded["simulation"], rtol=1e-6)
    reference = petab.calculate_llh(
        tables.measurement_df, recorded, tables.observable_df, tables.parameter_df
    )
    value = float(jax.jit(problem.log_likelihood)(problem.nominal))
    assert value == pytest.approx(reference, abs=1e-3, rel=1e-6)


@pytest.mark.slow
def test_raia_simulation_matches_the_collection_simulated_data():
    # Raia's noise formulas read the model's states, which `petab.calculate_llh` cannot
    # evaluate on a simulation table: the simulation itself is compared (the collection's
    # table names the observables without their `observable_` prefix, rows in order).
    folder = BOEHM.parent / "Raia_CancerResearch2011"
    problem = simlab.petab.load(folder / "Raia_CancerResearch2011.yaml")
    table = problem.simulate()
    recorded = petab.get_simulation_df(str(folder / "simulatedData_Raia_CancerResearch2011.tsv"))
    assert [i.removeprefix("observable_") for i in table["observableId"]] == list(
        recorded["observableId"]
    )
    np.testing.assert_allclose(table["time"], recorded["time"])
    np.testing.assert_allclose(table["simulation"], recorded["simulation"], rtol=1e-4, atol=1e-6)
    assert np.isfinite(float(jax.jit(problem.log_likelihood)(problem.nominal)))


def _chain_problem(folder: pathlib.Path, size: int) -> pathlib.Path:
    """A PEtab problem of `size` species, each decaying at its own rate constant
    (`x_i' = -k_i x_i`, `x_i(0) = 1 + i / size`), with `x_0` measured."""
    document = libsbml.SBMLDocument(3, 1)
    model = document.createModel()
    compartment = model.createCompartment()
    compartment.setId("cell")
    compartment.setSize(1.0)
    compartment.setConstant(True)
    for i in range(size):
        species = model.createSpecies()
        species.setId(f"x{i}")
        species.setCompartment("cell")
        species.setInitialConcentration(1.0 + i / size)
        species.setHasOnlySubstanceUnits(False)
        species.setBoundaryCondition(False)
        species.setConstant(False)
        rate = model.createParameter()
        rate.setId(f"k{i}")
        rate.setValue(0.1 + i / size)
        rate.setConstant(True)
        reaction = model.createReaction()
        reaction.setId(f"decay{i}")
        reaction.setReversible(False)
        reaction.setFast(False)
        reactant = reaction.createReactant()
        reactant.setSpecies(f"x{i}")
        reactant.setStoichiometry(1.0)
        reactant.setConstant(True)
        reaction.createKineticLaw().setMath(libsbml.parseL3Formula(f"cell * k{i} * x{i}"))
    libsbml.writeSBMLToFile(document, str(folder / "model.xml"))
    tables = {
        "measurements": {
            "observableId": ["x_obs"] * 2,
            "simulationConditionId": "c0",
            "time": [0.0, 1.0],
            "measurement": [1.0, 0.9],
        },
        "conditions": {"conditionId": ["c0"]},
        "observables": {
            "observableId": ["x_obs"],
            "observableFormula": ["x0"],
            "noiseFormula": [1],
        },
        "parameters": {
            "parameterId": ["k0"],
            "parameterScale": "lin",
            "lowerBound": 0.01,
            "upperBound": 10.0,
            "nominalValue": [0.1],
            "estimate": 1,
        },
    }
    for name, columns in tables.items():
        pd.DataFrame(columns).to_csv(folder / f"{name}.tsv", sep="\t", index=False)
    return write_problem_yaml(folder)


def test_a_model_of_more_than_100_species_and_constants_compiles(tmp_path):
    # The compiled expressions unpack the state and constant arrays into their entries;
    # JAX iterates over an array of more than 100 entries in traced chunks, which failed
    # under `jax.jit` (TracerIntegerConversionError), so such a model could not simulate.
    size = 101
    problem = simlab.petab.load(_chain_problem(tmp_path, size))
    model = problem.model("c0")
    assert model.constants.shape[0] > 100 and len(model.state_names) == size
    k = np.array([float(model.constant(f"k{i}")) for i in range(size)])
    x0 = 1.0 + np.arange(size) / size
    # Its arrays closed over (concrete while traced), as `simlab.simulate` has them.
    np.testing.assert_allclose(jax.jit(lambda: model.initial_state())(), x0)
    np.testing.assert_allclose(jax.jit(lambda m: m.initial_state())(model), x0)
    rate = jax.jit(lambda y: model(0.0, y, None))(jnp.asarray(x0))
    np.testing.assert_allclose(rate, -k * x0)
