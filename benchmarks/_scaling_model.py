"""The scaling report's model: collectives parsed from compiled HLO, and projected times.

`collectives` reads the text of a compiled XLA module (`compiled.as_text()`) for the
collectives a program runs, with the bytes of each result and whether it sits in a loop
body (a time step) or outside. `projected_step_seconds` turns them into a time per step on
stated hardware: compute = bytes moved per device / HBM bandwidth, plus, for each
collective, latency + link bytes / link bandwidth, with no overlap.
"""

import dataclasses
import re

import numpy as np


@dataclasses.dataclass(frozen=True)
class Hardware:
    """What a projection assumes about one kind of accelerator and its interconnect."""

    name: str
    hbm_bytes_per_s: float
    link_bytes_per_s: float  # one direction, device to neighbouring device
    latency_s: float  # per collective
    source: str


HARDWARE = (
    Hardware(
        "H200 NVLink 4",
        hbm_bytes_per_s=4.8e12,
        link_bytes_per_s=450e9,
        latency_s=5e-6,
        source="HBM3e 4.8 TB/s; NVLink 4 900 GB/s bidirectional per GPU, so 450 GB/s "
        "per direction (NVIDIA H200 datasheet); latency ~5 us per collective (assumed)",
    ),
    Hardware(
        "TPU v5e ICI",
        hbm_bytes_per_s=819e9,
        link_bytes_per_s=50e9,
        latency_s=10e-6,
        source="HBM 819 GB/s; ICI 1,600 Gbps = 200 GB/s per chip (Google Cloud TPU v5e "
        "docs), of which we assume one of its 4 links, 50 GB/s, per neighbour transfer; "
        "latency ~10 us per collective (assumed)",
    ),
)


# --- Collectives in compiled HLO -------------------------------------------------------

COLLECTIVE_KINDS = (
    "collective-permute",
    "all-reduce",
    "all-gather",
    "all-to-all",
    "reduce-scatter",
)
_INSTRUCTION = re.compile(
    r"= (?P<shape>\S+|\([^)]*\)) (?P<kind>" + "|".join(COLLECTIVE_KINDS) + r")\("
)
_ASYNC_START = re.compile(r" (?:" + "|".join(COLLECTIVE_KINDS) + r")-start\(")
_ARRAY_SHAPE = re.compile(r"([a-z]+\d*)\[([\d,]*)\]")
_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2}
_DTYPE_BYTES |= {"f32": 4, "s32": 4, "u32": 4, "f64": 8, "s64": 8, "u64": 8, "c64": 8}
_DTYPE_BYTES |= {"c128": 16}
# JAX names each operation by where it was traced; a time-stepping loop's body is a
# while loop's body, so operations of every step carry "while/body" in their name.
_IN_LOOP_MARK = "while/body"


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective instruction of compiled HLO: its kind, the bytes of its result,
    and whether it sits in a loop body (runs every step) or outside (runs once)."""

    kind: str
    num_bytes: int
    in_loop: bool


def collectives(hlo_text: str) -> list[Collective]:
    """The collectives of an HLO module's text (`compiled.as_text()`), in order.

    Reads the synchronous form the CPU compiler emits; refuses the asynchronous
    `-start`/`-done` pairs of GPU and TPU modules rather than missing them.
    """
    found = []
    for line in hlo_text.splitlines():
        if _ASYNC_START.search(line):
            raise ValueError(f"an asynchronous collective, not parsed here: {line.strip()[:120]}")
        match = _INSTRUCTION.search(line)
        if match:
            num_bytes = sum(
                _DTYPE_BYTES[dtype] * int(np.prod([int(d) for d in filter(None, dims.split(","))]))
                for dtype, dims in _ARRAY_SHAPE.findall(match["shape"])
            )
            found.append(Collective(match["kind"], num_bytes, _IN_LOOP_MARK in line))
    return found


def split_by_loop(found: list[Collective]) -> tuple[list[Collective], list[Collective]]:
    """The collectives of every step (in a loop body), and those run once (outside)."""
    return [c for c in found if c.in_loop], [c for c in found if not c.in_loop]


def describe(found: list[Collective]) -> str:
    """E.g. "8 collective-permute x 32768 B"; "none" when there are none."""
    counts: dict[tuple[str, int], int] = {}
    for collective in found:
        key = (collective.kind, collective.num_bytes)
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {kind} x {size} B" for (kind, size), n in counts.items()) or "none"


# --- Projection --------------------------------------------------------------------------


def link_bytes(collective: Collective, num_devices: int) -> float:
    """Bytes each device sends over its link, for ring algorithms (HLO result shapes:
    an all-gather's is the whole, a reduce-scatter's one device's part)."""
    share = (num_devices - 1) / num_devices
    factor = {
        "collective-permute": 1.0,
        "all-reduce": 2 * share,
        "all-gather": share,
        "all-to-all": share,
        "reduce-scatter": num_devices - 1.0,
    }[collective.kind]
    return factor * collective.num_bytes


def communication_seconds(step: list[Collective], num_devices: int, hardware: Hardware) -> float:
    return sum(
        hardware.latency_s + link_bytes(c, num_devices) / hardware.link_bytes_per_s for c in step
    )


def projected_step_seconds(
    bytes_per_device: float, step: list[Collective], num_devices: int, hardware: Hardware
) -> float:
    compute = bytes_per_device / hardware.hbm_bytes_per_s
    return compute + communication_seconds(step, num_devices, hardware)


@dataclasses.dataclass(frozen=True)
class Configuration:
    """One workload on one number of devices: what was compiled, measured and projected."""

    num_devices: int
    size: str  # the problem size, in words
    step: list[Collective]  # collectives per step in the compiled program
    once: list[Collective]  # collectives outside the step loop, run once per solve
    bytes_per_device: float  # HBM traffic per device per step, for the projection


def efficiency(times: list[float], num_devices: list[int], *, weak: bool) -> list[float]:
    """Weak: t(1) / t(n) at fixed work per device. Strong: t(1) / (n t(n)) at fixed total."""
    return [times[0] / (t if weak else n * t) for t, n in zip(times, num_devices, strict=True)]
