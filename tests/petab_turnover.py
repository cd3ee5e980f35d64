"""A one-species PEtab problem whose log-likelihood, gradient and trajectories are known in
closed form, written to a folder for `simlab.petab.load`; and the problem file that names
a test problem's tables."""

import math
import pathlib
import textwrap

# A species made at rate k_in * stimulus and degraded at rate k_out: the preequilibration
# (stimulus 1) leaves A at k_in / k_out, where the control condition stays; stimulus 3 moves
# it towards 3 k_in / k_out. Its log-likelihood and gradient are known in closed form.
TURNOVER_SBML = """\
<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version1/core" level="3" version="1">
  <model id="turnover">
    <listOfCompartments>
      <compartment id="cell" size="1" constant="true" spatialDimensions="3"/>
    </listOfCompartments>
    <listOfSpecies>
      <species id="A" compartment="cell" initialConcentration="0"
               hasOnlySubstanceUnits="false" boundaryCondition="false" constant="false"/>
    </listOfSpecies>
    <listOfParameters>
      <parameter id="k_in" value="1" constant="true"/>
      <parameter id="k_out" value="1" constant="true"/>
      <parameter id="stimulus" value="1" constant="true"/>
    </listOfParameters>
    <listOfReactions>
      <reaction id="synthesis" reversible="false" fast="false">
        <listOfProducts>
          <speciesReference species="A" stoichiometry="1" constant="true"/>
        </listOfProducts>
        <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">
          <apply><times/><ci>cell</ci><ci>k_in</ci><ci>stimulus</ci></apply>
        </math></kineticLaw>
      </reaction>
      <reaction id="degradation" reversible="false" fast="false">
        <listOfReactants>
          <speciesReference species="A" stoichiometry="1" constant="true"/>
        </listOfReactants>
        <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">
          <apply><times/><ci>cell</ci><ci>k_out</ci><ci>A</ci></apply>
        </math></kineticLaw>
      </reaction>
    </listOfReactions>
  </model>
</sbml>
"""
K_IN, K_OUT, SIGMA = 1.3, 0.7, 0.1
STIMULI = {"control": 1.0, "stimulated": 3.0}
TIMES = (0.5, 1.0, 2.0)
MEASURED = {"control": (2.0, 1.7, 1.9), "stimulated": (3.5, 4.2, 5.0)}


def turnover_state(condition: str, t, k_in: float = K_IN, k_out: float = K_OUT):
    """A(t) in a condition, after the preequilibration to k_in / k_out."""
    stimulus = STIMULI[condition]
    return k_in / k_out * (stimulus + (1 - stimulus) * math.exp(-k_out * t))


def write_turnover(folder: pathlib.Path, measured: dict = MEASURED) -> pathlib.Path:
    """The problem's files in `folder`, with these measurements at `TIMES`; its YAML path."""
    (folder / "model.xml").write_text(TURNOVER_SBML)
    (folder / "conditions.tsv").write_text(
        "conditionId\tstimulus\n" + "".join(f"{c}\t{s}\n" for c, s in STIMULI.items())
    )
    (folder / "observables.tsv").write_text(
        f"observableId\tobservableFormula\tnoiseFormula\nobs_A\tA\t{SIGMA}\n"
    )
    rows = [
        f"obs_A\tcontrol\t{condition}\t{t}\t{m}\n"
        for condition, values in measured.items()
        for t, m in zip(TIMES, values, strict=True)
    ]
    (folder / "measurements.tsv").write_text(
        "observableId\tpreequilibrationConditionId\tsimulationConditionId\ttime\tmeasurement\n"
        + "".join(rows)
    )
    (folder / "parameters.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
        f"k_in\tlog10\t0.01\t100\t{K_IN}\t1\nk_out\tlog10\t0.01\t100\t{K_OUT}\t1\n"
    )
    return write_problem_yaml(folder)


def write_problem_yaml(folder: pathlib.Path) -> pathlib.Path:
    """`problem.yaml` in `folder`, naming the tables a test problem writes there (`model.xml`,
    `conditions.tsv`, `measurements.tsv`, `observables.tsv`, `parameters.tsv`); its path."""
    yaml = folder / "problem.yaml"
    yaml.write_text(
        textwrap.dedent(
            """\
            format_version: 1
            parameter_file: parameters.tsv
            problems:
            - condition_files: [conditions.tsv]
              measurement_files: [measurements.tsv]
              observable_files: [observables.tsv]
              sbml_files: [model.xml]
            """
        )
    )
    return yaml
