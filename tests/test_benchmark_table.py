"""The committed benchmark table flags every miss, and the docs quote it as it is."""

import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from _harness import flag, meets_target, shown_ratio  # noqa: E402

TABLE = ROOT / "benchmarks" / "results" / "cpu.txt"
DOCS = ROOT / "docs" / "performance.md"
ROW = re.compile(
    r"^(?P<name>\S.*?)\s+(?P<ratio>-?\d[\d.]*(?:e[-+]?\d+)?)  (?P<target>.{10}) "
    r"(?P<flag>MISS| {4})(?: (?P<detail>.*))?$"
)
QUOTE = re.compile(r"<!-- row: (?P<name>.+?) -->(?P<value>.*?)<!-- /row -->")


def table_rows() -> dict[str, tuple[float, str, str]]:
    """Row name → (ratio, target, flag) for every benchmark line of the committed table."""
    rows = {}
    for line in TABLE.read_text().splitlines():
        match = ROW.match(line)
        if match:
            name = match["name"].strip()
            rows[name] = (float(match["ratio"]), match["target"].strip(), match["flag"].strip())
    return rows


@pytest.mark.parametrize(
    ("ratio", "target", "met"),
    [
        (252, ">= 100x", True),
        (99.9, ">= 100x", False),
        (1.27, "<= 1.1", False),
        (1.07, "<= 1.1", True),
        (1.06, "~2x", False),
        (1.8, "~2x", True),
        (39.7, "> 1", True),
        (0.138, "<= 4 GiB", True),
        (4.5, "<= 4 GiB", False),
        (0.046, "before", None),
        (0.11, "none (CPU)", None),
        (22.1, "", None),
    ],
)
def test_targets_are_read_as_numbers(ratio, target, met):
    assert meets_target(ratio, target) is met


@pytest.mark.parametrize(
    ("ratio", "target", "shown"),
    [
        (1.1017, "<= 1.1", "1.102"),
        (1.0997, "<= 1.1", "1.1"),
        (0.2124, ">= 0.3", "0.212"),
        (99.96, ">= 100x", "99.96"),
        (4.004, "<= 4", "4.004"),
        (0.046, "before", "0.046"),
    ],
)
def test_a_ratio_is_shown_with_the_digits_that_tell_its_side_of_the_target(ratio, target, shown):
    assert shown_ratio(ratio, target) == shown


def test_the_committed_table_flags_exactly_the_rows_that_miss():
    rows = table_rows()
    assert len(rows) >= 30  # every benchmark line was parsed
    wrong = {
        name: (ratio, target, mark)
        for name, (ratio, target, mark) in rows.items()
        if mark != flag(ratio, target)
    }
    assert not wrong
    assert any(mark == "MISS" for _, _, mark in rows.values())


def test_the_docs_quote_the_committed_table():
    rows = table_rows()
    quotes = QUOTE.findall(DOCS.read_text())
    assert len(quotes) >= 6
    for name, value in quotes:
        assert name in rows, f"docs/performance.md quotes a row the table lacks: {name!r}"
        ratio, target, _ = rows[name]
        assert value == shown_ratio(ratio, target), (name, value, ratio)
