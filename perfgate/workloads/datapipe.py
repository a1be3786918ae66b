"""``datapipe``: a small CNN fed by a real ``DataLoader`` whose samples are expensive to make.

This is the input-pipeline workload. Each sample is "decoded" on the CPU from its index alone
(random bytes from a per-index seed, at up to twice the final resolution, plus a class-dependent
stripe pattern; then a 3x3 median denoise, several separable blur passes, a downscale, a random
crop and flip and per-image normalisation), so the model is starved unless the loader prepares
batches in parallel: ``num_workers`` and ``pin_memory`` change the step time the way they do in
real training. The model is deliberately light for the same reason.

Determinism: a sample depends only on ``(seed, index)`` (a NumPy generator seeded with both),
never on which worker made it, and the shuffling order comes from a torch generator seeded from
``ctx.seed``. Workers run with ``torch.set_num_threads(1)`` so that N workers use N cores
instead of fighting over them.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import torch
import torch.nn.functional as F
from scipy import ndimage
from torch import nn
from torch.utils.data import DataLoader, Dataset

from perfgate.errors import UsageError
from perfgate.workloads.builtin import BUILTIN_WORKLOADS
from perfgate.workloads.common import (
    batch_size,
    check_device,
    effective_knobs,
    make_training,
    parameter_count,
    seed_everything,
)
from perfgate.workloads.protocol import TrainingSetup, WorkloadContext

DEFINITION = BUILTIN_WORKLOADS["datapipe"]
"""This workload's entry in the torch-free catalog (:mod:`perfgate.workloads.builtin`)."""

BLUR_TAPS = np.array([1.0, 4.0, 6.0, 4.0, 1.0], dtype=np.float32) / 16.0
"""Binomial 5-tap filter, applied along rows then columns: a separable Gaussian-like blur."""


class DecodedImages(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """A map-style dataset whose ``__getitem__`` does deterministic, CPU-heavy preprocessing.

    The work is NumPy/SciPy code, single-threaded like the PIL/libjpeg decoding it stands in
    for: in the main process (``num_workers=0``) it runs serially with the training step, and
    it never spawns an intra-op thread pool that would oversubscribe the cores.
    """

    def __init__(
        self,
        length: int,
        image_size: int,
        crop_margin: int,
        decode_scale: int,
        blur_passes: int,
        num_classes: int,
        seed: int,
    ) -> None:
        self.length = length
        self.image_size = image_size
        self.crop_margin = crop_margin
        self.decode_scale = decode_scale
        self.blur_passes = blur_passes
        self.num_classes = num_classes
        self.seed = seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        rng = np.random.default_rng([self.seed, index])
        label = int(rng.integers(self.num_classes))
        image = ndimage.median_filter(self._decode(label, rng), size=(1, 3, 3))
        for _ in range(self.blur_passes):
            image = ndimage.convolve1d(image, BLUR_TAPS, axis=1, mode="reflect")
            image = ndimage.convolve1d(image, BLUR_TAPS, axis=2, mode="reflect")
        image = self._crop_and_flip(self._downscale(image), rng)
        mean = image.mean(axis=(1, 2), keepdims=True)
        std = image.std(axis=(1, 2), keepdims=True)
        normalised = (image - mean) / (std + 1e-5)
        return torch.from_numpy(normalised.astype(np.float32)), torch.tensor(label)

    def _decode(self, label: int, rng: np.random.Generator) -> np.ndarray:
        """Stand-in for image decoding: random bytes to float, plus the class's stripes.

        The image is made at ``decode_scale`` times the pre-crop size, as a photo is decoded
        larger than the network input, then denoised (median), blurred and downscaled.
        """
        side = (self.image_size + 2 * self.crop_margin) * self.decode_scale
        raw = rng.integers(0, 256, size=(3, side, side), dtype=np.uint8)
        stripes = np.sin(np.arange(side, dtype=np.float32) * (label + 1) * np.pi / side)
        return raw.astype(np.float32) / 255.0 + stripes.astype(np.float32)

    def _downscale(self, image: np.ndarray) -> np.ndarray:
        """Average ``decode_scale`` x ``decode_scale`` pixel blocks."""
        channels, side, _ = image.shape
        scale = self.decode_scale
        blocks = image.reshape(channels, side // scale, scale, side // scale, scale)
        return blocks.mean(axis=(2, 4))

    def _crop_and_flip(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A random ``image_size`` crop, mirrored horizontally half of the time."""
        top, left = rng.integers(2 * self.crop_margin + 1, size=2)
        crop = image[:, top : top + self.image_size, left : left + self.image_size]
        return crop[:, :, ::-1] if rng.random() < 0.5 else crop


def single_threaded_worker(worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: one intra-op thread per worker, as real pipelines set."""
    torch.set_num_threads(1)


class ConvNet(nn.Module):
    """Stride-2 conv-BN-ReLU stages, global average pooling, a linear classifier."""

    def __init__(self, widths: list[int], num_classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_channels = 3
        for width in widths:
            layers += [
                nn.Conv2d(in_channels, width, 3, 2, 1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(),
            ]
            in_channels = width
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(in_channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


def make_loader(
    dataset: DecodedImages,
    batch: int,
    num_workers: int,
    pin_memory: bool,
    generator: torch.Generator,
) -> DataLoader[tuple[torch.Tensor, torch.Tensor]]:
    """A shuffling DataLoader; workers persist across epochs so a new epoch costs no fork."""
    workers = num_workers > 0
    return DataLoader(
        dataset,
        batch_size=batch,
        shuffle=True,
        drop_last=True,
        num_workers=num_workers,
        pin_memory=pin_memory,
        persistent_workers=workers,
        worker_init_fn=single_threaded_worker if workers else None,
        generator=generator,
    )


def check_pin_memory(pin_memory: bool, device: str) -> None:
    """Pinned memory only speeds up host-to-GPU copies; on a CPU run the knob would do nothing."""
    if pin_memory and device != "cuda":
        raise UsageError(
            "pin_memory=true needs a CUDA device: batches of a CPU run never leave host memory",
            "drop the knob or run with --device cuda",
        )


def build(ctx: WorkloadContext) -> TrainingSetup:
    """The factory: a ConvNet, a DataLoader over expensive samples and one training step."""
    knobs = effective_knobs(DEFINITION, ctx)
    device = check_device(ctx.device)
    pin_memory, num_workers = bool(knobs["pin_memory"]), cast(int, knobs["num_workers"])
    check_pin_memory(pin_memory, ctx.device)
    params = ctx.params
    batch = batch_size(knobs, params)
    widths = [int(w) for w in params["widths"]]
    image_size, num_classes = int(params["image_size"]), int(params["num_classes"])
    loader_generator = seed_everything(ctx.seed)
    model = ConvNet(widths, num_classes).to(device)
    dataset = DecodedImages(
        length=int(params["epoch_batches"]) * batch,
        image_size=image_size,
        crop_margin=int(params["crop_margin"]),
        decode_scale=int(params["decode_scale"]),
        blur_passes=int(params["blur_passes"]),
        num_classes=num_classes,
        seed=ctx.seed,
    )
    loader = make_loader(dataset, batch, num_workers, pin_memory, loader_generator)
    training = make_training(
        model, F.cross_entropy, knobs, ctx.device, lr=float(params["lr"]), convolutions=True
    )
    return training.setup(
        batches=loader,
        samples_per_step=batch,
        dataloader=loader,
        knobs=knobs,
        info={
            "model": {
                "widths": widths,
                "num_classes": num_classes,
                "parameters": parameter_count(model),
            },
            "batch_shape": [batch, 3, image_size, image_size],
            "samples_per_epoch": len(dataset),
            "preprocessing": {
                "blur_passes": dataset.blur_passes,
                "decoded_side": (image_size + 2 * dataset.crop_margin) * dataset.decode_scale,
            },
        },
    )
