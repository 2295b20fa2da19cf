"""The newer nn layers in rlpipe and torch side by side, float32, one thread: a Dreamer-style transposed-conv
decoder (forward + backward), a same-padded Conv1d over a sequence (forward + backward), GroupNorm
(forward + backward), bilinear ``interpolate`` of Atari frames and DrQ's random-shift augmentation
(``F.pad`` + ``F.grid_sample``), both forward only.

    python3 benchmarks/bench_nn_layers.py [--repeat 5] [--peer-python PATH]

The torch side runs in its own process, in an interpreter that has torch 2.13 (``--peer-python``
defaults to /work/peervenv/bin/python when it exists, else this interpreter); its column is left
out when that interpreter cannot import torch. ``--side rlpipe`` or ``--side torch`` measures one
library in this process and prints JSON. Times are CPU time per call (the machine is shared).
"""
import one_thread  # noqa: F401 - first: pins BLAS to one thread before NumPy loads

import numpy as np
from peer_process import side_by_side_main


def _data(lib, *shape):
    return lib.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))


def _train_step(lib, module, x):
    def step():
        for p in module.parameters():
            p.grad = None
        module(x).sum().backward()
    return step


def _random_shift(lib, frames, pad=4):
    """DrQ's RandomShiftsAug: replicate-pad, then sample a shifted crop with grid_sample."""
    F = lib.nn.functional
    n, _, h, _ = frames.shape
    eps = 1.0 / (h + 2 * pad)
    steps = lib.linspace(-1.0 + eps, 1.0 - eps, h + 2 * pad)[:h]
    steps = steps.unsqueeze(0).repeat(h, 1).unsqueeze(2)
    base = lib.cat([steps, steps.transpose(1, 0)], dim=2).unsqueeze(0).repeat(n, 1, 1, 1)
    shift = lib.randint(0, 2 * pad + 1, size=(n, 1, 1, 2)).to(lib.float32) * (2.0 / (h + 2 * pad))

    def augment():
        with lib.no_grad():
            return F.grid_sample(F.pad(frames, (pad,) * 4, "replicate"), base + shift, padding_mode="zeros",
                                 align_corners=False)
    return augment


def workloads(lib):
    """name -> (callable, calls per timing) for one library (rlpipe or torch, same names)."""
    lib.manual_seed(0)
    nn = lib.nn
    decoder = nn.Sequential(nn.ConvTranspose2d(256, 128, 5, stride=2), nn.ReLU(),
                            nn.ConvTranspose2d(128, 64, 5, stride=2), nn.ReLU(),
                            nn.ConvTranspose2d(64, 32, 6, stride=2), nn.ReLU(),
                            nn.ConvTranspose2d(32, 3, 6, stride=2))
    conv1d = nn.Conv1d(32, 64, 5, padding="same")
    group_norm = nn.GroupNorm(8, 64)
    frames = _data(lib, 32, 3, 84, 84)
    stacked = _data(lib, 32, 9, 84, 84)

    def resize():
        with lib.no_grad():
            return nn.functional.interpolate(frames, size=(64, 64), mode="bilinear", align_corners=False)

    latent = _data(lib, 8, 256, 1, 1)
    return {"ConvTranspose2d decoder 1x1 -> 64x64, B=8, fwd+bwd": (_train_step(lib, decoder, latent), 3),
            "Conv1d(32, 64, 5, 'same') [64, 32, 128], fwd+bwd": (_train_step(lib, conv1d, _data(lib, 64, 32, 128)), 5),
            "GroupNorm(8, 64) [32, 64, 16, 16], fwd+bwd": (_train_step(lib, group_norm, _data(lib, 32, 64, 16, 16)), 5),
            "interpolate bilinear [32, 3, 84, 84] -> 64x64": (resize, 5),
            "DrQ random shift (pad + grid_sample) [32, 9, 84, 84]": (_random_shift(lib, stacked), 3)}


def main():
    side_by_side_main(__file__, workloads, "nn layers, rlpipe vs torch", "nn layers, float32, one thread, us per call",
                      number_format="10.0f")


if __name__ == "__main__":
    main()
