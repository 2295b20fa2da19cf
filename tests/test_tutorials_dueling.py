"""torchrl's dueling Q-networks: the same outputs as torchrl 0.14.1 on the same weights and inputs
(tests/fixtures/make_dueling_golden.py), the same parameter names, zeroed biases as torchrl starts them."""
import os

import numpy as np

import rlpipe
from rlpipe.modules import DuelingCnnDQNet, DuelingMlpDQNet

GOLDEN = np.load(os.path.join(os.path.dirname(__file__), "fixtures", "dueling_golden.npz"))
CNN_KWARGS = {"num_cells": [4, 8], "kernel_sizes": [3, 3], "strides": [2, 1]}


def load_and_run(net, prefix):
    """``net``'s output on the recorded input after loading torchrl's recorded weights."""
    x = rlpipe.tensor(GOLDEN[f"{prefix}.input"])
    net(x)  # materialises the lazy first layer
    state = {k.removeprefix(f"{prefix}.state."): rlpipe.tensor(v) for k, v in GOLDEN.items()
             if k.startswith(f"{prefix}.state.")}
    assert set(state) == set(net.state_dict())
    net.load_state_dict(state)
    return net(x).detach().numpy()


def test_cnn_dueling_matches_torchrl():
    net = DuelingCnnDQNet(3, 1, CNN_KWARGS, {"num_cells": 16})
    np.testing.assert_allclose(load_and_run(net, "cnn"), GOLDEN["cnn.output"], rtol=1e-5, atol=1e-6)


def test_mlp_dueling_matches_torchrl():
    net = DuelingMlpDQNet(4, 1, {"num_cells": [8], "out_features": 8}, {"num_cells": 16})
    np.testing.assert_allclose(load_and_run(net, "mlp"), GOLDEN["mlp.output"], rtol=1e-5, atol=1e-6)


def test_advantages_are_centred_around_the_value():
    net = DuelingMlpDQNet(5, mlp_kwargs_feature={"in_features": 3, "num_cells": [8], "out_features": 8},
                          mlp_kwargs_output={"num_cells": 16})
    x = rlpipe.randn(7, 3)
    features = net.features(x)
    q = net(x)
    np.testing.assert_allclose(q.mean(-1).detach().numpy(), net.value(features).squeeze(-1).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    # torchrl zeroes the biases of the layers built eagerly (not the heads' lazy first layers): recorded there
    zeroed = ["features.0.bias", "features.2.bias", "advantage.2.bias", "value.2.bias"]
    parameters = dict(net.named_parameters())
    assert all(float(parameters[name].abs().sum()) == 0.0 for name in zeroed)
    assert float(parameters["advantage.0.bias"].abs().sum()) > 0


def test_defaults_are_torchrls():
    net = DuelingCnnDQNet(6)
    assert net(rlpipe.zeros(1, 4, 84, 84)).shape == (1, 6)
    convs = [m for m in net.features if isinstance(m, (rlpipe.nn.Conv2d, rlpipe.nn.LazyConv2d))]
    assert [c.out_channels for c in convs] == [32, 64, 64] and [c.stride[0] for c in convs] == [4, 2, 1]
    assert net.advantage[0].out_features == 512 and net.value[-1].out_features == 1
    assert DuelingMlpDQNet(2).features[-2].out_features == 256
