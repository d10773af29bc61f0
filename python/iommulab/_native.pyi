"""Type stubs of the private native module (checked with `python -m mypy.stubtest iommulab._native`)."""

import os
from typing import Any, Callable, ClassVar, Optional, Union, final

from typing_extensions import TypeAlias

_Config: TypeAlias = Union[dict[str, Any], str, None]
_StrPath: TypeAlias = Union[str, os.PathLike[str]]

__all__ = [
    "ConfigError",
    "DmaError",
    "IommulabError",
    "IovaError",
    "MapError",
    "RunResult",
    "TraceError",
    "VirtError",
    "bench",
    "cancel_runs",
    "compare",
    "expether",
    "iosup",
    "mrc",
    "replay",
    "reproduce",
    "run",
    "run_batch",
    "trace_check",
    "trace_generate",
    "trace_stats",
    "trace_validate",
    "validate",
    "version",
]

class IommulabError(Exception): ...
class ConfigError(IommulabError): ...
class TraceError(IommulabError): ...
class DmaError(IommulabError): ...
class IovaError(IommulabError): ...
class VirtError(IommulabError): ...
class MapError(IommulabError): ...

@final
class RunResult:
    def to_dict(self, flat: bool = False) -> dict[str, Any]: ...
    @property
    def config(self) -> str: ...
    @property
    def allocator(self) -> str: ...
    @property
    def flush(self) -> str: ...
    @property
    def cost_preset(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def ops(self) -> int: ...
    @property
    def iops(self) -> float: ...
    @property
    def relative_to_disabled(self) -> Optional[float]: ...
    @property
    def software_ns_per_op(self) -> float: ...
    @property
    def modeled_ns_per_op(self) -> float: ...
    @property
    def iotlb_invalidations(self) -> int: ...
    @property
    def iotlb_flushes(self) -> int: ...
    @property
    def stale_accesses(self) -> int: ...
    @property
    def faults(self) -> int: ...
    @property
    def wall_seconds(self) -> float: ...
    @property
    def modeled_seconds(self) -> float: ...
    @property
    def cores(self) -> Optional[dict[str, Any]]: ...
    @staticmethod
    def from_json(text: str) -> RunResult: ...
    def __reduce__(self) -> tuple[Callable[[str], RunResult], tuple[str]]: ...
    def __eq__(self, value: object, /) -> bool: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]
    # Every other field of to_dict() (pyo3's __getattr__ slot; see stubtest-allowlist.txt).
    def __getattr__(self, name: str) -> Any: ...

def run(config: _Config = None, cpus: Optional[int] = None) -> RunResult: ...
def bench(
    configs: Optional[list[str]] = None,
    ops: Optional[int] = None,
    seed: Optional[int] = None,
    repeats: int = 1,
    base: _Config = None,
) -> list[RunResult]: ...
def replay(
    trace: _StrPath, config: _Config = None, format: str = "auto", lenient: bool = False
) -> RunResult: ...
def compare(
    path: _StrPath,
    configs: Optional[list[str]] = None,
    device: Optional[str] = None,
    config: _Config = None,
    format: str = "auto",
    lenient: bool = False,
) -> dict[str, Any]: ...
def expether(config: _Config = None) -> dict[str, Any]: ...
def iosup(config: _Config = None) -> dict[str, Any]: ...
def trace_stats(path: _StrPath, format: str = "auto", lenient: bool = False) -> dict[str, Any]: ...
def trace_check(
    path: _StrPath,
    format: str = "auto",
    lenient: bool = False,
    dma_masks: Optional[list[tuple[str, Union[int, str]]]] = None,
    iommu: bool = True,
    max_findings: Optional[int] = None,
    leaks: bool = False,
    from_boot: bool = False,
) -> dict[str, Any]: ...
def trace_validate(
    path: _StrPath,
    kernel: str = "6.12",
    lazy: bool = False,
    warmup: float = 0.0,
    lenient: bool = False,
    cpus: Optional[int] = None,
    dma_masks: Optional[list[tuple[str, Union[int, str]]]] = None,
    groups: Optional[list[list[str]]] = None,
    start_pfn: int = 1,
    aperture_bits: int = 48,
    reserved: Optional[list[tuple[int, int]]] = None,
    default_windows: bool = True,
    forcedac: bool = False,
    max_mismatches: int = 20,
) -> dict[str, Any]: ...
def trace_generate(
    workload: Union[str, dict[str, Any]], events: int, path: _StrPath, seed: Optional[int] = None
) -> int: ...
def mrc(
    trace: _StrPath,
    policy: Union[str, dict[str, Any], None] = None,
    pinning: bool = False,
    max_quota: Optional[int] = None,
    quotas: Optional[list[int]] = None,
    format: str = "auto",
    lenient: bool = False,
) -> dict[str, Any]: ...
def reproduce(
    name: str,
    quick: bool = False,
    out: Optional[_StrPath] = None,
    progress: Optional[Callable[[str, str, int, int], object]] = None,
) -> dict[str, Any]: ...
def run_batch(
    configs: list[dict[str, Any]], validate_only: bool = False
) -> dict[str, list[Any] | tuple[str, bytes]]: ...
def validate(config: _Config = None) -> None: ...
def cancel_runs() -> None: ...
def version() -> str: ...
