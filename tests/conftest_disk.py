"""Folders on a real block device, for tests whose reads must reach the disk.

Page-cache eviction (``POSIX_FADV_DONTNEED``) means nothing on a tmpfs: a test that needs its
reads to hit the block layer writes under pytest's temporary folder unless that is in memory,
and then under the repository, which lives on a disk.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IN_MEMORY = frozenset({"tmpfs", "ramfs"})


def filesystem_type(path: Path) -> str:
    """The type of the filesystem holding ``path``, from the longest matching mount point."""
    best, kind = "", ""
    resolved = str(path.resolve())
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        point = fields[1]
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, fields[2]
    return kind


@contextlib.contextmanager
def on_disk(preferred: Path, prefix: str) -> Iterator[Path]:
    """``preferred`` when it is on a block device, else a temporary folder in the repository."""
    if filesystem_type(preferred) not in IN_MEMORY:
        yield preferred
        return
    with tempfile.TemporaryDirectory(dir=REPO, prefix=prefix) as folder:
        yield Path(folder)
