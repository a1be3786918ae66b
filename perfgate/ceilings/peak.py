"""``perfgate doctor --peak`` as a library call: measure this machine's ceilings and store them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfgate.ceilings.bench import Ceilings, measure_ceilings
from perfgate.ceilings.report import ceilings_document
from perfgate.ceilings.store import ceilings_path, read_ceilings_file, save_ceilings
from perfgate.config import Config
from perfgate.documents.ceilings import CEILINGS
from perfgate.errors import UsageError


@dataclass(frozen=True)
class PeakOutcome:
    """What ``doctor --peak`` measured and where it was stored."""

    ceilings: Ceilings
    path: Path


def doctor_peak(
    config: Config, device: str, threads: int | None, json_out: Path | None = None
) -> PeakOutcome:
    """Measure the ceilings of ``device`` (cpu, cuda or auto) at the thread count a run pins
    (``threads``, else the config's, else one per physical core), store them under the
    environment's fingerprint key, and write them to ``json_out`` when given.

    The ceilings file and ``json_out`` are checked before anything is measured: a corrupt
    file or an unwritable path fails in a moment, not after the benchmarks."""
    from perfgate.files import check_writable, write_json_atomic
    from perfgate.run import resolve_device
    from perfgate.telemetry.host import default_thread_count

    if threads is not None and threads < 1:
        raise UsageError(f"--threads {threads} is not a thread count", "use 1 or more")
    resolved = resolve_device(device)
    read_ceilings_file(ceilings_path(config.root))
    if json_out is not None:
        check_writable(json_out, "--json")
    pinned = threads or config.threads or default_thread_count()
    ceilings = measure_ceilings(resolved, threads=pinned)
    path = save_ceilings(config.root, ceilings)
    if json_out is not None:
        document = CEILINGS.dump(ceilings_document(ceilings))
        write_json_atomic(json_out, document, option="--json")
    return PeakOutcome(ceilings, path)
