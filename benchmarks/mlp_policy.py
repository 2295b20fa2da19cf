"""The benchmarks' CartPole policy: an MLP 4-64-64-2 (tanh) taking the greedy action, with the same
weights in NumPy, rlpipe and torch (``lib`` is the ``rlpipe`` or ``torch`` module)."""
import numpy as np


def numpy_weights(seed=0):
    """[(weight [in, out], bias [out])] of the three layers, float32, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    sizes = [(4, 64), (64, 64), (64, 2)]
    return [((rng.uniform(-1, 1, (i, o)) / np.sqrt(i)).astype(np.float32), np.zeros(o, np.float32)) for i, o in sizes]


def numpy_policy(weights):
    """The policy in NumPy: observations [n, 4] -> greedy actions [n]."""
    (w1, b1), (w2, b2), (w3, b3) = weights
    assert all(a.dtype == np.float32 for pair in weights for a in pair)  # as the modules' parameters

    def act(obs):
        h = np.tanh(obs @ w1 + b1)
        h = np.tanh(h @ w2 + b2)
        return (h @ w3 + b3).argmax(-1)
    return act


def load_linear(layer, w, b, lib):
    """Copies ``w`` (NumPy's [in, out] layout) and ``b`` into ``lib``'s Linear ``layer``."""
    layer.weight.data[...] = lib.as_tensor(np.ascontiguousarray(w.T))
    layer.bias.data[...] = lib.as_tensor(b)


def mlp(lib, weights):
    """The MLP as ``lib.nn`` modules (rlpipe or torch), returning the greedy action."""
    nn = lib.nn
    net = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))
    for layer, (w, b) in zip([net[0], net[2], net[4]], weights):
        load_linear(layer, w, b, lib)

    class Greedy(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, observation):
            return self.net(observation).argmax(-1)
    return Greedy()
