"""Storage and network telemetry: real processes doing real disk I/O, sampled from outside.

The reads go to the disk because the file is evicted from the page cache first
(``POSIX_FADV_DONTNEED`` after an fsync); on this project's machines that was checked by hand:
a 20 MiB read after eviction adds exactly 20 MiB to ``/proc/PID/io``'s ``read_bytes``, the same
read from the page cache adds 0. Eviction only means something on a block device, so the file is
written under pytest's temporary folder unless that is a tmpfs (then under the repository, which
lives on a disk). Nothing here asserts on speed: only on byte counts and on which columns exist.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest_disk import on_disk

from perfgate.telemetry.sampler import MIN_INTERVAL_S, TelemetrySampler

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="/proc/PID/io and posix_fadvise are Linux's"
)

MIB = 2**20
FILE_BYTES = 20 * MIB
CHILD_BYTES = 8 * MIB

# Each script prints "ready", waits for a line on stdin, does its work, prints "done" and then
# waits for stdin to close: it stays alive (readable) until the sampler has seen all of it.
WRITE_EVICT_READ = """
import os, sys
path, size = sys.argv[1], int(sys.argv[2])
print("ready", flush=True); sys.stdin.readline()
block = os.urandom(1 << 20)
with open(path, "wb") as f:
    for _ in range(size >> 20):
        f.write(block)
    f.flush()
    os.fsync(f.fileno())
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
read = 0
while chunk := os.read(fd, 1 << 20):
    read += len(chunk)
os.close(fd)
print("done", read, flush=True)
sys.stdin.read()
"""

CPU_ONLY = """
import sys, time
print("ready", flush=True); sys.stdin.readline()
deadline = time.monotonic() + 0.8
while time.monotonic() < deadline:
    sum(range(1000))
print("done", 0, flush=True)
sys.stdin.read()
"""

# A worker whose child writes, exits, lingers as a zombie for a while, then is reaped: Linux then
# adds the child's bytes to the worker's own counters, which must not count them a second time.
REAPED_CHILD_WRITES = """
import subprocess, sys, time
path, size = sys.argv[1], int(sys.argv[2])
print("ready", flush=True); sys.stdin.readline()
child = subprocess.Popen([sys.executable, "-c", f'''
import os
with open({path!r}, "wb") as f:
    f.write(os.urandom({size}))
'''])
time.sleep(1.0)
child.wait()
time.sleep(0.6)
print("done", size, flush=True)
sys.stdin.read()
"""


@pytest.fixture
def disk_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder on a block device: pytest's temporary folder unless it is in memory."""
    with on_disk(tmp_path, ".telemetry-io-") as folder:
        yield folder


def _sampled(script: str, *args: str) -> tuple[dict[str, Any], float, int]:
    """Run ``script`` under a sampler; the series, its start time and the child's byte count."""
    child = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "ready"
        began = time.time()
        sampler = TelemetrySampler(child.pid, None, interval_s=MIN_INTERVAL_S)
        sampler.start()
        time.sleep(0.3)
        child.stdin.write("go\n")
        child.stdin.flush()
        done = child.stdout.readline().split()
        assert done[0] == "done", done
        time.sleep(0.6)  # at least two more samples while the child is still there
        series = sampler.stop()
    finally:
        with contextlib.suppress(OSError):
            child.stdin.close()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    assert series["sampler_error"] is None
    return series, began, int(done[1])


def _total_bytes(series: dict[str, Any], column: str, began: float) -> float:
    """Sum of rate × window over the samples: the bytes the column accounts for."""
    times = [began, *series["t"]]
    rates = series["host"][column]
    return sum(rate * (times[i + 1] - times[i]) for i, rate in enumerate(rates) if rate is not None)


def test_process_storage_bytes_follow_writes_and_evicted_reads(disk_dir: Path) -> None:
    path = disk_dir / "samples.bin"
    series, began, read = _sampled(WRITE_EVICT_READ, str(path), str(FILE_BYTES))
    assert read == FILE_BYTES
    host = series["host"]
    assert max(v for v in host["process_write_bytes_per_s"] if v is not None) > 0
    assert max(v for v in host["process_read_bytes_per_s"] if v is not None) > 0
    written = _total_bytes(series, "process_write_bytes_per_s", began)
    fetched = _total_bytes(series, "process_read_bytes_per_s", began)
    assert FILE_BYTES / 2 <= written <= FILE_BYTES * 2, written
    assert FILE_BYTES / 2 <= fetched <= FILE_BYTES * 2, fetched
    # The machine's disks saw at least the process's reads (other processes may add theirs).
    assert _total_bytes(series, "system_disk_read_bytes_per_s", began) >= FILE_BYTES / 2


def test_a_cpu_only_process_reads_nothing() -> None:
    series, began, _ = _sampled(CPU_ONLY)
    host = series["host"]
    assert max(v for v in host["process_cpu_percent"] if v is not None) > 0
    reads = [v for v in host["process_read_bytes_per_s"] if v is not None]
    assert reads
    # Zero unless memory pressure evicted the interpreter's own pages (one readahead at most).
    assert _total_bytes(series, "process_read_bytes_per_s", began) < 1 * MIB


def test_machine_wide_columns_are_numbers_on_linux() -> None:
    series, _, _ = _sampled(CPU_ONLY)
    host = series["host"]
    for column in (
        "system_iowait_percent",
        "system_disk_read_bytes_per_s",
        "system_disk_write_bytes_per_s",
        "system_net_sent_bytes_per_s",
        "system_net_recv_bytes_per_s",
    ):
        values = [v for v in host[column] if v is not None]
        assert values, column
        assert all(v >= 0 for v in values), column
    assert all(0 <= v <= 100 for v in host["system_iowait_percent"] if v is not None)
    pressure = [v for v in host["system_io_pressure_percent"] if v is not None]
    if _psi_readable():
        assert pressure and all(0 <= v <= 100 for v in pressure)
    else:
        assert pressure == []


def _psi_readable() -> bool:
    try:
        Path("/proc/pressure/io").read_bytes()
    except OSError:
        return False
    return True


def test_a_reaped_childs_bytes_are_counted_once(disk_dir: Path) -> None:
    path = disk_dir / "child.bin"
    series, began, size = _sampled(REAPED_CHILD_WRITES, str(path), str(CHILD_BYTES))
    assert max(v for v in series["host"]["children_count"] if v is not None) >= 1
    written = _total_bytes(series, "process_write_bytes_per_s", began)
    assert size / 2 <= written <= size * 1.5, written
