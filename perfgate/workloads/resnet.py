"""``resnet``: a ResNet image classifier (basic blocks with BatchNorm) on synthetic images.

The convolution workload: it is where memory format (``channels_last``), cuDNN algorithm choice
and mixed precision matter most. ``full`` is ResNet-18 at 224x224 (ImageNet stem: 7x7 stride-2
convolution and max-pool); ``smoke`` is a three-stage toy with the CIFAR stem (one 3x3
convolution) so it runs in milliseconds on a CPU.

Images are Gaussian noise plus a coarse (4x4, upsampled) class prototype, so labels are
learnable and the loss falls within a few steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from perfgate.workloads.builtin import BUILTIN_WORKLOADS
from perfgate.workloads.common import (
    SYNTHETIC_BATCHES,
    Batch,
    batch_size,
    check_device,
    effective_knobs,
    make_training,
    parameter_count,
    resident_batches,
    seed_everything,
)
from perfgate.workloads.protocol import TrainingSetup, WorkloadContext

DEFINITION = BUILTIN_WORKLOADS["resnet"]
"""This workload's entry in the torch-free catalog (:mod:`perfgate.workloads.builtin`)."""

PROTOTYPE_SIZE = 4
"""Side of the coarse class prototypes hidden in the synthetic images."""


def width_major(x: torch.Tensor) -> torch.Tensor:
    """The same ``(N, C, H, W)`` values with H and W swapped in memory: a view over a copy.

    Used by ``non_contiguous`` between stages: the explicit copy plus the ``.contiguous()`` the
    next convolution makes of an input in neither NCHW nor NHWC layout both show in a profile.
    """
    return x.transpose(-1, -2).contiguous().transpose(-1, -2)


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with a residual; a 1x1 conv-BN shortcut when the shape changes."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


def make_stem(kind: str, out_channels: int) -> nn.Sequential:
    """``imagenet``: 7x7/2 conv + 3x3/2 max-pool (¼ resolution); ``cifar``: one 3x3 conv."""
    if kind == "imagenet":
        return nn.Sequential(
            nn.Conv2d(3, out_channels, 7, 2, 3, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
    return nn.Sequential(
        nn.Conv2d(3, out_channels, 3, 1, 1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(),
    )


class ResNet(nn.Module):
    """Stem, stages of basic blocks (each stage after the first halves resolution), pool, fc."""

    def __init__(
        self,
        widths: Sequence[int],
        blocks: Sequence[int],
        stem: str,
        num_classes: int,
        non_contiguous: bool = False,
    ) -> None:
        super().__init__()
        self.non_contiguous = non_contiguous
        self.stem = make_stem(stem, widths[0])
        stages = []
        in_channels = widths[0]
        for index, (width, count) in enumerate(zip(widths, blocks, strict=True)):
            stride = 1 if index == 0 else 2
            layers = [BasicBlock(in_channels, width, stride)]
            layers += [BasicBlock(width, width, 1) for _ in range(count - 1)]
            stages.append(nn.Sequential(*layers))
            in_channels = width
        self.stages = nn.ModuleList(stages)
        self.fc = nn.Linear(in_channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for stage in self.stages:
            if self.non_contiguous:
                x = width_major(x)
            x = stage(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def synthetic_images(
    generator: torch.Generator, image_size: int, num_classes: int, batch: int, count: int
) -> list[Batch]:
    """``count`` batches of noisy images, each carrying its class's coarse prototype."""
    prototypes = torch.randn(num_classes, 3, PROTOTYPE_SIZE, PROTOTYPE_SIZE, generator=generator)
    labels = torch.randint(num_classes, (count * batch,), generator=generator)
    images = torch.randn(count * batch, 3, image_size, image_size, generator=generator)
    images += F.interpolate(prototypes[labels], size=image_size, mode="nearest")
    return list(zip(images.split(batch), labels.split(batch), strict=True))


def build(ctx: WorkloadContext) -> TrainingSetup:
    """The factory: a ResNet, its synthetic image batches and one training step."""
    knobs = effective_knobs(DEFINITION, ctx)
    device = check_device(ctx.device)
    params = ctx.params
    image_size, num_classes = int(params["image_size"]), int(params["num_classes"])
    memory_format = torch.channels_last if knobs["channels_last"] else torch.contiguous_format
    batch = batch_size(knobs, params)
    data_generator = seed_everything(ctx.seed)
    model = ResNet(
        [int(w) for w in params["widths"]],
        [int(b) for b in params["blocks"]],
        str(params["stem"]),
        num_classes,
        non_contiguous=bool(knobs["non_contiguous"]),
    ).to(device)
    model.to(memory_format=memory_format)  # type: ignore[call-overload]  # stubs lack the kwarg
    batches = resident_batches(
        synthetic_images(data_generator, image_size, num_classes, batch, SYNTHETIC_BATCHES),
        device,
        memory_format,
    )
    training = make_training(
        model, F.cross_entropy, knobs, ctx.device, lr=float(params["lr"]), convolutions=True
    )
    return training.setup(
        batches=batches,
        samples_per_step=batch,
        knobs=knobs,
        info={
            "model": {
                "widths": list(params["widths"]),
                "blocks": list(params["blocks"]),
                "stem": str(params["stem"]),
                "num_classes": num_classes,
                "parameters": parameter_count(model),
            },
            "batch_shape": [batch, 3, image_size, image_size],
            "memory_format": "channels_last" if knobs["channels_last"] else "contiguous",
        },
    )
