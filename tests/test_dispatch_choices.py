"""`impl="auto"` against the record: the choices of `simlab.grid.resolve_impl` on a TPU are
the paths `benchmarks/results/tpu.txt` measured faster end to end in `simulate`."""

import math
import re
from pathlib import Path

import pytest

from simlab.grid import _dispatch

TPU_TABLE = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "tpu.txt"
# "  Heat   xla 22.40 ms, pallas 42.14 ms, auto 22.41 ms; auto/best 1.000 (auto took xla for
# laplacian); ..." (a model whose impl='pallas' is refused has no pallas figure).
ROW = re.compile(
    r"^  (?P<model>\w+)\s+xla\s+(?P<xla>[\d.]+) ms(?:, pallas\s+(?P<pallas>[\d.]+) ms)?, "
    r"auto\s+(?P<auto>[\d.]+) ms; auto/best [\d.]+ \(auto took (?P<took>\w+) for "
    r"(?P<kernel>\w+)\)"
)
TOLERANCE = 1.05  # auto may trail the faster path by timing noise, never by a wrong choice


def measured_rows() -> list[dict]:
    rows = []
    text = TPU_TABLE.read_text() if TPU_TABLE.exists() else ""  # while tpu.sh writes it
    for line in text.splitlines():
        match = ROW.match(line)
        if match:
            row = match.groupdict()
            for name in ("xla", "pallas", "auto"):
                row[name] = math.inf if row[name] is None else float(row[name])
            rows.append(row)
    return rows


def test_the_tpu_table_has_a_row_for_every_model_with_a_pallas_path():
    models = {row["model"] for row in measured_rows()}
    assert {"Heat", "Wave", "GrayScott", "StochasticHeat", "WalledNavierStokes2D"} <= models


@pytest.mark.parametrize("row", measured_rows(), ids=lambda row: row["model"])
def test_auto_is_never_more_than_five_percent_behind_the_faster_path(row):
    assert row["auto"] <= TOLERANCE * min(row["xla"], row["pallas"])


@pytest.mark.parametrize("row", measured_rows(), ids=lambda row: row["model"])
def test_the_choice_on_a_tpu_is_the_one_recorded_and_the_faster(row, monkeypatch):
    monkeypatch.setattr(_dispatch.jax, "default_backend", lambda: "tpu")
    choice = _dispatch.resolve_impl("auto", row["kernel"])
    assert choice == row["took"]
    if row["pallas"] < row["xla"] / TOLERANCE:
        assert choice == "pallas"
    if row["xla"] < row["pallas"] / TOLERANCE:
        assert choice == "xla"
