"""simlab.petab over a local copy of the PEtab benchmark collection: which problems load, and
their log-likelihood at the nominal parameters against the collection's reference.

    python benchmarks/petab_collection.py PATH/Benchmark-Models [--timeout 600] [MODEL ...]

PATH is the `Benchmark-Models` folder of
https://github.com/Benchmarking-Initiative/Benchmark-Models-PEtab. Each problem runs in its
own process (a crash or a timeout costs one row). Two references: `llh sim.data` is
`petab.calculate_llh` on the collection's own simulation table (`simulatedData_*.tsv` or
`simulations.tsv`, its simulation at the nominal parameters) with the problem's
measurement, observable and parameter tables; `llh AMICI` is the value AMICI's test suite
records for the problem (AMICI-dev/AMICI, tests/benchmark_models/benchmark_models.yaml),
where it has one. A
problem agrees with a reference when the difference is within 1e-3 absolute or 1e-3
relative; the verdict names the references it agrees with ("sim", "AMICI"). `sim.diff` is
the largest difference between simlab's simulation table and the collection's, relative
(`|s - r| / (|r| + 1e-6)`), a check of the simulation alone where the reference
log-likelihood cannot be computed (noise formulas that read the model's states). The times
are seconds: `compile` is the first call of the jitted log-likelihood, `llh` a later one.
"""

import argparse
import json
import math
import pathlib
import subprocess
import sys
import time

# AMICI-dev/AMICI, tests/benchmark_models/benchmark_models.yaml: the log-likelihood at the
# nominal parameters that AMICI (CVODES) computes for the collection's problems.
AMICI_LLH = {
    "Bachmann_MSB2011": 418.40573341425295,
    "Beer_MolBioSystems2014": 58622.9145631413,
    "Boehm_JProteomeRes2014": -138.22199693517703,
    "Borghans_BiophysChem1997": 83.3237191357272,
    "Brannmark_JBC2010": -141.889113770537,
    "Bruno_JExpBot2016": 46.688176988431806,
    "Chen_MSB2009": -115700.1192629893,
    "Crauste_CellSystems2017": -190.96521897435176,
    "Elowitz_Nature2000": 63.20279991419332,
    "Fiedler_BMCSystBiol2016": 58.58390161681,
    "Fujita_SciSignal2010": 53.08377736998929,
    "Isensee_JCB2018": -3949.375966548649,
    "Lucarelli_CellSystems2018": -1681.6059879426584,
    "Schwen_PONE2014": -943.9992988598723,
    "Sneyd_PNAS2002": 319.79177818768756,
    "Smith_BMCSystBiol2013": -888198.436541014,
    "Weber_BMC2015": -296.2017922646865,
    "Zheng_PNAS2012": 278.33353271001477,
}
TOLERANCE = 1e-3


def run_one(folder: pathlib.Path) -> dict:
    """Loads and evaluates one problem (in this process)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np
    import petab.v1 as petab

    import simlab.petab

    row: dict = {"model": folder.name}
    # The collection's newer problems name their files `problem.yaml`, `simulations.tsv`.
    yaml = folder / f"{folder.name}.yaml"
    if not yaml.exists():
        yaml = folder / "problem.yaml"
    if not yaml.exists():
        row["reason"] = "no PEtab problem file"
        return row
    simulated = sorted(folder.glob("simulatedData_*.tsv")) or sorted(folder.glob("simulations.tsv"))
    try:
        start = time.perf_counter()
        problem = simlab.petab.load(yaml)
        row["load"] = time.perf_counter() - start
    except Exception as error:  # noqa: BLE001 - the reason is the table's content
        row["reason"] = f"{type(error).__name__}: {error}"
        return row
    row["imported"] = True
    row["conditions"] = len(problem.condition_ids)
    row["parameters"] = len(problem.parameter_ids)
    tables = problem.petab_problem
    table = None
    if simulated:
        try:
            table = _simulation_table(
                tables.measurement_df, petab.get_simulation_df(str(simulated[0]))
            )
            row["reference"] = float(
                petab.calculate_llh(
                    tables.measurement_df, table, tables.observable_df, tables.parameter_df
                )
            )
        except Exception as error:  # noqa: BLE001
            row["reference_error"] = f"{type(error).__name__}: {error}"
    row["amici"] = AMICI_LLH.get(folder.name)
    llh = jax.jit(problem.log_likelihood)
    try:
        start = time.perf_counter()
        value = float(llh(problem.nominal))
        row["compile"] = time.perf_counter() - start
        start = time.perf_counter()
        value = float(llh(problem.nominal))
        row["time"] = time.perf_counter() - start
    except Exception as error:  # noqa: BLE001
        row["reason"] = f"solve: {type(error).__name__}: {str(error)[:200]}"
        return row
    row["llh"] = value
    if simulated:
        try:
            ours = problem.simulate()["simulation"].to_numpy(float)
            recorded = table["simulation"].to_numpy(float)
            if len(recorded) == len(ours):
                row["simulation_difference"] = float(
                    np.nanmax(np.abs(ours - recorded) / (np.abs(recorded) + 1e-6))
                )
        except Exception as error:  # noqa: BLE001
            row["simulation_error"] = f"{type(error).__name__}: {error}"
    return row


def _simulation_table(measurements, recorded):
    """The measurement table with the recorded simulation of each row. The collection's
    simulation tables list the measurements' rows, in their order or another (some name
    the observables without their `observable_` prefix, or the condition columns without
    `Id`): rows are matched on observable, condition and time, in order among equals;
    petab matches them itself when that fails."""
    import numpy as np

    def keys(table):
        condition = next(
            (c for c in ("simulationConditionId", "simulationCondition") if c in table), None
        )
        return [
            (_bare(o), "" if condition is None else str(c), round(float(t), 9))
            for o, c, t in zip(
                table["observableId"],
                table[condition] if condition else [None] * len(table),
                table["time"],
                strict=True,
            )
        ]

    ours, theirs = keys(measurements), keys(recorded)
    if len(ours) != len(theirs):
        return recorded
    order_ours = sorted(range(len(ours)), key=lambda i: ours[i])
    order_theirs = sorted(range(len(theirs)), key=lambda i: theirs[i])
    if [ours[i] for i in order_ours] != [theirs[i] for i in order_theirs]:
        return recorded
    values = np.empty(len(ours))
    values[order_ours] = recorded["simulation"].to_numpy(float)[order_theirs]
    table = measurements.rename(columns={"measurement": "simulation"}).copy()
    table["simulation"] = values
    return table


def _bare(observable_id: str) -> str:
    return str(observable_id).removeprefix("observable_")


def _reason(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 90 else text[:87] + "..."


def _number(value, digits=6) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if abs(value) < 1e6 else f"{value:.{digits}e}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("collection", type=pathlib.Path)
    parser.add_argument("models", nargs="*", help="only these problems")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_intermixed_args()

    if arguments.one:
        print(json.dumps(run_one(arguments.collection)))
        return

    folders = sorted(p for p in arguments.collection.iterdir() if p.is_dir())
    if arguments.models:
        folders = [p for p in folders if p.name in arguments.models]
    rows = []
    for folder in folders:
        command = [sys.executable, __file__, str(folder), "--one"]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=arguments.timeout
            )
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if lines:
                row = json.loads(lines[-1])
            else:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                row = {"model": folder.name, "reason": f"crashed: {last}"}
        except subprocess.TimeoutExpired:
            row = {"model": folder.name, "reason": f"timed out after {arguments.timeout:.0f} s"}
        rows.append(row)
        print(_line(row), flush=True)
    imported = [r for r in rows if r.get("imported")]
    agree = [r for r in rows if _agrees(r)]
    print(
        f"\n{len(rows)} problems; {len(imported)} imported; "
        f"{len(agree)} agree with a reference within {TOLERANCE:g} (absolute or relative)."
    )


def _difference(row: dict, key: str) -> float | None:
    if row.get("llh") is None or row.get(key) is None:
        return None
    return row["llh"] - row[key]


def _within(row: dict, key: str) -> bool:
    difference = _difference(row, key)
    if difference is None or math.isnan(difference):
        return False
    return abs(difference) <= TOLERANCE or abs(difference) <= TOLERANCE * abs(row[key])


def _agrees(row: dict) -> bool:
    return _within(row, "reference") or _within(row, "amici")


def _verdict(row: dict) -> str:
    if not row.get("imported") or row.get("llh") is None:
        return "-"
    pairs = (("reference", "sim"), ("amici", "AMICI"))
    sources = [name for key, name in pairs if _within(row, key)]
    if sources:
        return "agrees " + "+".join(sources)
    if row.get("reference") is None and row.get("amici") is None:
        return "no reference"
    return "DIFFERS"


def _seconds(value, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _signed(value) -> str:
    return "-" if value is None else f"{value:.1e}"


def _line(row: dict) -> str:
    imported = row.get("imported") and row.get("llh") is not None
    reason = row.get("reason", "")
    if imported and row.get("reference") is None and row.get("reference_error"):
        reason = "simulatedData: " + row["reference_error"]
    fields = [
        f"{row['model']:<38}",
        "yes" if row.get("imported") else "no ",
        f"{_number(row.get('llh')):>15}",
        f"{_number(row.get('reference')):>15}",
        f"{_signed(_difference(row, 'reference')):>9}",
        f"{_number(row.get('amici')):>15}",
        f"{_signed(_difference(row, 'amici')):>9}",
        f"{_signed(row.get('simulation_difference')):>8}",
        f"{_seconds(row.get('compile'), 1):>7}",
        f"{_seconds(row.get('time'), 3):>7}",
        f"{_verdict(row):<16}",
        _reason(reason),
    ]
    return " ".join(fields).rstrip()


HEADER = (
    f"{'model':<38} imp {'llh simlab':>15} {'llh sim.data':>15} {'diff':>9} "
    f"{'llh AMICI':>15} {'diff':>9} {'sim.diff':>8} {'compile':>7} {'llh (s)':>7} "
    f"{'verdict':<16} reason"
)

if __name__ == "__main__":
    if "--one" not in sys.argv:
        print(HEADER)
    main()
