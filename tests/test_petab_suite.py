"""The PEtab test suite (`petabtests`): every SBML case of its v1.0.0 and v2.0.0 folders,
loaded by `simlab.petab.load` and compared with the suite's own solution (log-likelihood and
simulation table, at the tolerances each case gives), by the suite's own evaluation
functions. The first case runs in `make test`, the rest in `make slow`."""

import jax
import pytest

petabtests = pytest.importorskip("petabtests")
pytest.importorskip("petab.v1")
pytest.importorskip("libsbml")

import simlab.petab  # noqa: E402

pytestmark = pytest.mark.skipif(not jax.config.jax_enable_x64, reason="PEtab solves in float64")

FAST = {("v1.0.0", "0001"), ("v2.0.0", "0019")}  # 0019: the mapping table


def _cases():
    for version in ("v1.0.0", "v2.0.0"):
        for case in petabtests.get_cases("sbml", version):
            marks = [] if (version, case) in FAST else [pytest.mark.slow]
            yield pytest.param(version, case, id=f"{version}-{case}", marks=marks)


@pytest.mark.parametrize(("version", "case"), list(_cases()))
def test_the_case_gives_the_suites_log_likelihood_and_simulations(version, case):
    folder = petabtests.get_cases_dir("sbml", version) / case
    solution = petabtests.load_solution(case, "sbml", version)
    problem = simlab.petab.load(folder / petabtests.problem_yaml_name(case))
    llh = float(problem.log_likelihood())
    assert petabtests.evaluate_llh(llh, solution["llh"], solution["tol_llh"]), (
        f"log-likelihood {llh} against the suite's {solution['llh']}"
    )
    distance = petabtests.absolute_simulations_distance_for_tables(
        [problem.simulate()], solution["simulation_dfs"]
    )
    assert distance < solution["tol_simulations"]
