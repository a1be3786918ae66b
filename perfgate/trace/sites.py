"""Which code pattern a finding comes from, and where it ran: the module and the source line.

Advice that says "use SDPA" to a team whose attention is ``nn.MultiheadAttention`` sends it
looking for a matmul–softmax–matmul chain its code does not contain; the lever there is
``need_weights=False``. So for three findings the trace is asked what pattern produced it:

- **attention**: a hand-written chain, or ``nn.MultiheadAttention`` returning its weights
  (``need_weights=True``, the default, takes the explicit path instead of SDPA);
- **copies**: where most copy time is spent — ``.contiguous()``, dtype or device conversions
  (``.to``, ``.float()``), ``.clone()``, or a ``reshape`` of a non-contiguous tensor;
- **host syncs**: ``.item()``, a device-to-host copy (``.cpu()``, ``.tolist()``), or an explicit
  ``torch.cuda.synchronize()``.

*Where* comes from the module the op ran in and the innermost source line outside torch: from
the ``perfgate.module:`` ranges perfgate's profiling window opens around each model-defined
module's forward (``perfgate.trace.capture``), or from the Python frames a trace recorded
``with_stack=True`` holds (``nn.Module: Owlv2Attention_0``, ``modeling_owlv2.py(410):
forward``). Without either, the pattern is still named and the site is absent.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from perfgate.trace.categories import (
    COPY,
    COPY_OPS,
    MODULE_RANGE,
    OPTIMIZER,
    SYNC,
    SYNC_CALLS,
    op_name,
)
from perfgate.trace.model import PythonFrame, Thread
from perfgate.trace.timeline import HostNode, Timeline

MULTIHEAD = "multihead_attention_weights"
HAND_WRITTEN = "hand_written"

_MODULE_RANGE = re.compile(
    rf"^{re.escape(MODULE_RANGE)}(?P<path>\S+) \((?P<cls>[\w.]+)\)(?: (?P<src>.+))?$"
)
_MODULE_FRAME = re.compile(r"^nn\.Module: (?P<cls>\w+?)(?:_\d+)?$")
_SOURCE_FRAME = re.compile(r"^(?P<file>[^()]+\.py)\((?P<line>\d+)\): (?P<function>.+)$")
_LIBRARY_FILES = ("torch/", "<")
"""Frames in these files are the framework's, not the code a team can change."""

_COPY_PATTERNS = {
    "contiguous": "contiguous",
    "to": "cast",
    "_to_copy": "cast",
    "to_copy": "cast",
    "clone": "clone",
    "copy_": "copy_",
}
"""The outermost copy op → the pattern named for it (``other`` for the rest)."""
_RESHAPES = frozenset({"reshape", "_reshape_alias", "flatten", "unflatten", "view_as"})
"""A copy made under one of these reshaped a non-contiguous tensor."""


@dataclass(frozen=True, kw_only=True)
class Finding:
    """The pattern behind a finding and where its heaviest instance ran."""

    pattern: str
    site: str | None
    """``module (Class) · file.py:line`` as far as the trace tells; None if it tells nothing."""


class Sites:
    """The module and source line of host events of one timeline (see the module docstring)."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline

    @cached_property
    def _frames(self) -> dict[Thread, tuple[list[float], list[PythonFrame]]]:
        by_thread: defaultdict[Thread, list[PythonFrame]] = defaultdict(list)
        for frame in self.timeline.trace.python:
            by_thread[frame.thread].append(frame)
        indexed = {}
        for thread, frames in by_thread.items():
            frames.sort(key=lambda f: f.ts)
            indexed[thread] = ([f.ts for f in frames], frames)
        return indexed

    def stack(self, index: int) -> list[PythonFrame]:
        """The Python frames enclosing host event ``index``, outermost first."""
        node = self.timeline.host[index]
        starts, frames = self._frames.get(node.event.thread, ([], []))
        until = bisect.bisect_right(starts, node.ts)
        return [f for f in frames[:until] if f.end >= node.end]

    def site(self, index: int) -> str | None:
        """Where host event ``index`` ran: its module and its innermost non-torch source line."""
        module = source = None
        parent = self.timeline.host[index].parent
        while parent >= 0 and (module is None or source is None):
            match = _MODULE_RANGE.match(self.timeline.host[parent].name)
            if match:
                module = module or f"{match['path']} ({match['cls']})"
                source = source or match["src"]  # a torch module's range names no source
            parent = self.timeline.host[parent].parent
        if module is None or source is None:
            for frame in reversed(self.stack(index)):
                named = _MODULE_FRAME.match(frame.name)
                if module is None and named:
                    module = named["cls"]
                code = _SOURCE_FRAME.match(frame.name)
                if source is None and code and not code["file"].startswith(_LIBRARY_FILES):
                    source = f"{code['file']}:{code['line']} ({code['function']})"
        parts = [part for part in (module, source) if part]
        return " · ".join(parts) if parts else None

    def modules(self, index: int) -> list[str]:
        """The classes of the modules around host event ``index``, innermost first."""
        found = []
        parent = self.timeline.host[index].parent
        while parent >= 0:
            match = _MODULE_RANGE.match(self.timeline.host[parent].name)
            if match:
                found.append(match["cls"].rsplit(".", 1)[-1])
            parent = self.timeline.host[parent].parent
        for frame in reversed(self.stack(index)):
            named = _MODULE_FRAME.match(frame.name)
            if named:
                found.append(named["cls"])
            elif "multi_head_attention_forward" in frame.name:
                found.append("MultiheadAttention")
        return found


def attention_finding(timeline: Timeline, sites: Sites) -> Finding | None:
    """What the hand-written attention chains are: ``nn.MultiheadAttention`` with its weights
    returned when most run inside one, else hand-written; None without chains."""
    chains = [i for i in timeline.manual_softmax if timeline.host[i].step >= 0]
    if not chains:
        return None
    multihead = [i for i in chains if "MultiheadAttention" in sites.modules(i)]
    pattern = MULTIHEAD if len(multihead) * 2 > len(chains) else HAND_WRITTEN
    chosen = multihead if pattern == MULTIHEAD else [i for i in chains if i not in multihead]
    return Finding(pattern=pattern, site=_commonest_site(sites, chosen))


def copy_finding(timeline: Timeline, sites: Sites) -> Finding | None:
    """The pattern carrying most of the outermost copy ops' time in the steps; None without."""
    host = timeline.host
    members: defaultdict[str, list[int]] = defaultdict(list)
    for index, node in enumerate(host):
        if not _outermost_copy(host, index) or node.region == OPTIMIZER:
            continue
        above = host[node.parent] if node.parent >= 0 else None
        if above is not None and above.kind == "op" and op_name(above.name) in _RESHAPES:
            pattern = "reshape"
        else:
            pattern = _COPY_PATTERNS.get(op_name(node.name), "other")
        members[pattern].append(index)
    return _dominant(members, sites)


def sync_finding(timeline: Timeline, sites: Sites) -> Finding | None:
    """What makes the host wait in the steps: ``.item()``, a device-to-host copy, or an
    explicit synchronize (the op a GPU's synchronize call was made under); None without."""
    host = timeline.host
    members: defaultdict[str, list[int]] = defaultdict(list)
    for index, node in enumerate(host):
        if node.step < 0 or node.region == OPTIMIZER:
            continue
        if node.kind == "runtime" and node.name in SYNC_CALLS:
            pattern = _sync_cause(host, index)
        elif node.kind == "op" and node.category == SYNC and not timeline.gpu:
            if node.parent >= 0 and host[node.parent].category == SYNC:
                continue
            pattern = "item"
        else:
            continue
        members[pattern].append(index)
    return _dominant(members, sites)


def _dominant(members: Mapping[str, Sequence[int]], sites: Sites) -> Finding | None:
    """The pattern whose host events take the most time (ties by name), with the site of its
    longest event; None without events."""
    host = sites.timeline.host
    if not members:
        return None

    def duration(index: int) -> float:
        return host[index].end - host[index].ts

    pattern = max(sorted(members), key=lambda p: sum(duration(i) for i in members[p]))
    return Finding(pattern=pattern, site=sites.site(max(members[pattern], key=duration)))


def _sync_cause(host: Sequence[HostNode], index: int) -> str:
    parent = host[index].parent
    while parent >= 0:
        node = host[parent]
        if node.kind == "op":
            base = op_name(node.name)
            if base in ("item", "_local_scalar_dense", "local_scalar_dense", "is_nonzero"):
                return "item"
            if base in COPY_OPS:
                return "device_to_host_copy"
        parent = node.parent
    return "synchronize"


def _outermost_copy(host: Sequence[HostNode], index: int) -> bool:
    node = host[index]
    if node.kind != "op" or node.step < 0 or op_name(node.name) not in COPY_OPS:
        return False
    return node.parent < 0 or host[node.parent].category != COPY or host[node.parent].kind != "op"


def _commonest_site(sites: Sites, indices: Sequence[int]) -> str | None:
    found = Counter(site for site in (sites.site(i) for i in indices) if site is not None)
    return found.most_common(1)[0][0] if found else None
