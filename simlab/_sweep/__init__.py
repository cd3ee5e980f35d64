"""`sweep`: members → chunks (vmapped) → devices (shard_map) → processes; resumable."""

from ._result import SweepResult as SweepResult
from ._sweep import sweep as sweep
