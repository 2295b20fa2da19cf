"""Attention in rlpipe and torch side by side: a TransformerEncoderLayer (d_model 128, 4 heads, feed-forward
512, causal mask) forward + backward over [B=32, T=60] (a decision-transformer-sized context), the same
layer's forward with no grad at batch 1, and scaled_dot_product_attention alone (forward + backward).

    python3 benchmarks/bench_attention.py [--repeat 5] [--peer-python PATH]

The torch side runs in its own process, in an interpreter that has torch 2.13 (``--peer-python``
defaults to /work/peervenv/bin/python when it exists, else this interpreter); its column is left
out when that interpreter cannot import torch. ``--side rlpipe`` or ``--side torch`` measures one
library in this process and prints JSON. Times are CPU time per call (the machine is shared).
"""
import one_thread  # noqa: F401 - first: pins BLAS to one thread before NumPy loads

import numpy as np
from peer_process import side_by_side_main

D_MODEL, HEADS, FEEDFORWARD, BATCH, STEPS = 128, 4, 512, 32, 60


def workloads(lib):
    """name -> (callable, calls per timing) for one library (rlpipe or torch, same names)."""
    lib.manual_seed(0)
    layer = lib.nn.TransformerEncoderLayer(D_MODEL, HEADS, FEEDFORWARD, dropout=0.0, batch_first=True)
    rng = np.random.default_rng(0)
    tokens = lib.tensor(rng.standard_normal((BATCH, STEPS, D_MODEL)).astype(np.float32))
    one = tokens[:1]
    causal = lib.nn.Transformer.generate_square_subsequent_mask(STEPS)
    q, k, v = (lib.tensor(rng.standard_normal((BATCH, HEADS, STEPS, D_MODEL // HEADS)).astype(np.float32),
                          requires_grad=True) for _ in range(3))

    def train_layer():
        for p in layer.parameters():
            p.grad = None
        layer(tokens, src_mask=causal, is_causal=True).sum().backward()

    def act_batch_1():
        with lib.no_grad():
            return layer(one, src_mask=causal, is_causal=True)

    def sdpa_fwd_bwd():
        lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()

    return {f"encoder layer fwd+bwd, [B={BATCH}, T={STEPS}]": (train_layer, 3),
            f"encoder layer fwd, no grad, [B=1, T={STEPS}]": (act_batch_1, 50),
            f"sdpa causal fwd+bwd, [B={BATCH}, H={HEADS}, T={STEPS}]": (sdpa_fwd_bwd, 5)}


if __name__ == "__main__":
    side_by_side_main(__file__, workloads, "attention, rlpipe vs torch",
                      f"TransformerEncoderLayer({D_MODEL}, {HEADS}, {FEEDFORWARD}), float32, one thread, us per call")
