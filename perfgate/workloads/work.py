"""The exact work of one training step, counted by a dispatch mode: operators, allocations,
host synchronisations, host↔device bytes and collectives.

A timing on a shared CI runner carries several per cent of noise; these counts carry none.
``torch.utils._python_dispatch.TorchDispatchMode`` sees every aten operator the step
dispatches, with its inputs and outputs, below autograd (so the backward pass and the
optimizer are counted too) and above the kernels, in the thread that takes the step. What it
records per operator:

- one dispatch (``operators``, and per overload packet in ``by_operator``);
- an allocation for every output whose storage is none of the inputs' (a view or an in-place
  result is not one), with its storage's bytes;
- a host synchronisation for the operators whose result the host must wait for on an
  accelerator: scalar reads (``.item()`` is ``aten._local_scalar_dense``), operators whose
  output shape depends on the data, and blocking copies from the device to the host. Counted
  the same on a CPU (where nothing waits), so a ``.item()`` added to a step shows up there too;
- the bytes of a copy between devices (``aten._to_copy`` and ``aten.copy_``), by direction;
- a collective for every ``c10d`` operator (process-group and functional collectives), with
  the bytes of the tensors it was given.

A compiled step is counted through its eager twin (``TrainingSetup.flop_step``), as the FLOPs
are. Kernel launches on a GPU are the profiler's to count (``perfgate advise``); operator
dispatches are what a step asks of the host on any device.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from perfgate.documents.result import WorkCounters

_aten = torch.ops.aten

DATA_DEPENDENT_SHAPES = frozenset(
    {
        _aten.nonzero.default,
        _aten.masked_select.default,
        _aten._unique2.default,
        _aten.unique_consecutive.default,
        _aten.unique_dim.default,
    }
)
"""Operators whose output size is read back from the device before it can be allocated."""

SCALAR_READS = frozenset({_aten._local_scalar_dense.default, _aten.is_nonzero.default})
"""``.item()``, ``float(t)``, ``bool(t)``, ``if t:``: the host reads a device value."""

COLLECTIVE_NAMESPACES = frozenset({"c10d", "_c10d_functional", "c10d_functional"})


def _tensors(tree: object) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(tree)
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def _storage(tensor: torch.Tensor) -> tuple[int, int] | None:
    """(address, bytes) of the tensor's storage; None for one without plain storage."""
    try:
        storage = tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse, nested or wrapper tensors
        return None
    return storage.data_ptr(), storage.nbytes()


class WorkCounter(TorchDispatchMode):
    """Counts what the operators dispatched under it do (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_operator: Counter[str] = Counter()
        self.allocations = 0
        self.allocated_bytes = 0
        self.host_syncs = 0
        self.host_to_device_bytes = 0
        self.device_to_host_bytes = 0
        self.collectives = 0
        self.collective_bytes = 0

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        inputs = _tensors((args, kwargs))
        output = func(*args, **kwargs)
        self.by_operator[str(func.overloadpacket)] += 1
        self._count_allocations(inputs, _tensors(output))
        if func in SCALAR_READS or func in DATA_DEPENDENT_SHAPES:
            self.host_syncs += 1
        self._count_copy(func, args, kwargs, inputs, output)
        if func.namespace in COLLECTIVE_NAMESPACES:
            self.collectives += 1
            self.collective_bytes += sum(t.numel() * t.element_size() for t in inputs)
        return output

    def _count_allocations(self, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
        existing = {found[0] for found in map(_storage, inputs) if found is not None}
        seen: set[int] = set()
        for tensor in outputs:
            found = _storage(tensor)
            if found is None or found[1] == 0 or found[0] in existing or found[0] in seen:
                continue
            seen.add(found[0])
            self.allocations += 1
            self.allocated_bytes += found[1]

    def _count_copy(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        inputs: list[torch.Tensor],
        output: Any,
    ) -> None:
        if func is _aten._to_copy.default and isinstance(output, torch.Tensor) and inputs:
            source, target = inputs[0], output
        elif func in (_aten.copy_.default, _aten.copy.default) and len(inputs) >= 2:
            target, source = inputs[0], inputs[1]
        else:
            return
        if source.device == target.device:
            return
        size = source.numel() * source.element_size()
        if source.device.type == "cpu":
            self.host_to_device_bytes += size
        elif target.device.type == "cpu":
            self.device_to_host_bytes += size
            positional = args[2] if func is not _aten._to_copy.default and len(args) > 2 else False
            if not kwargs.get("non_blocking", positional):
                self.host_syncs += 1  # a blocking copy waits for the device's queue

    def counters(self) -> WorkCounters:
        """What was counted, as the result document records it."""
        return WorkCounters(
            operators=sum(self.by_operator.values()),
            allocations=self.allocations,
            allocated_bytes=self.allocated_bytes,
            host_syncs=self.host_syncs,
            host_to_device_bytes=self.host_to_device_bytes,
            device_to_host_bytes=self.device_to_host_bytes,
            collectives=self.collectives,
            collective_bytes=self.collective_bytes,
            by_operator=dict(sorted(self.by_operator.items())),
        )


@contextlib.contextmanager
def counting_work() -> Iterator[WorkCounter]:
    """Count the work of everything run in the block, in this thread (a dispatch mode is kept
    per thread): a factory's eager step, or the body of a script's ``with session.step():``."""
    counter = WorkCounter()
    with counter:
        yield counter
