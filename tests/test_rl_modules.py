"""torchrl.modules on rlpipe: MLP, ConvNet, Actor, ValueOperator, QValueModule/QValueActor, EGreedyModule.

Constants (action choices, chosen values, eps after annealing, structure) measured with torchrl 0.14.1 in a
separate environment.
"""
import numpy as np
import pytest

import rlpipe as r
from rlpipe import nn
from rlpipe.envs import Categorical, OneHot, Unbounded
from rlpipe.envs.utils import ExplorationType, set_exploration_type
from rlpipe.modules import (MLP, Actor, ConvNet, EGreedyModule, QValueActor, QValueModule, RandomPolicy, SafeModule,
                            ValueOperator)
from rlpipe.tensordict import TensorDict, TensorDictSequential

VALUES = [[1.0, 3.0, 3.0], [0.5, -1.0, 0.2]]


def n_params(module):
    return sum(p.numel() for p in module.parameters())


def test_mlp_structure_as_torchrl():
    m = MLP(3, 1, num_cells=[32, 64])
    assert [type(layer).__name__ for layer in m] == ["Linear", "Tanh", "Linear", "Tanh", "Linear"]
    assert n_params(m) == 3 * 32 + 32 + 32 * 64 + 64 + 64 + 1
    single = MLP(in_features=3, out_features=2)  # torchrl's default: no hidden layer
    assert len(single) == 1 and tuple(single[0].weight.shape) == (2, 3)
    deep = MLP(in_features=4, out_features=(2, 3), depth=2, num_cells=8, activation_class=nn.ReLU,
               activate_last_layer=True, dropout=0.5, bias_last_layer=False)
    assert [type(layer).__name__ for layer in deep] == ["Linear", "Dropout", "ReLU", "Linear", "Dropout", "ReLU",
                                                        "Linear", "Dropout", "ReLU"]
    assert deep[6].bias is None
    assert tuple(deep.eval()(r.ones(5, 4)).shape) == (5, 2, 3)


def test_mlp_lazy_input_and_several_inputs():
    m = MLP(out_features=2, num_cells=[16])
    assert isinstance(m[0], nn.LazyLinear)
    assert tuple(m(r.ones(7, 3), r.ones(7, 2)).shape) == (7, 2)  # inputs concatenated: in_features 5
    assert tuple(m[0].weight.shape) == (16, 5)
    m = MLP(in_features=2, out_features=1, num_cells=[4], activation_class=nn.LeakyReLU,
            activation_kwargs={"negative_slope": 0.5})
    assert m[1].negative_slope == 0.5


def test_mlp_bad_arguments():
    with pytest.raises(ValueError, match="out_features must be specified"):
        MLP(in_features=3)
    with pytest.raises(RuntimeError, match="depth must be provided"):
        MLP(in_features=3, out_features=1, num_cells=8)
    with pytest.raises(RuntimeError, match="depth and num_cells length conflict"):
        MLP(in_features=3, out_features=1, num_cells=[8, 8], depth=3)


def test_convnet_as_torchrl():
    c = ConvNet()
    assert [type(layer).__name__ for layer in c] == ["LazyConv2d", "ELU", "Conv2d", "ELU", "Conv2d", "ELU",
                                                     "SquashDims"]
    assert tuple(c(r.ones(2, 3, 3, 8, 8)).shape) == (2, 3, 128)  # 8 -> 6 -> 4 -> 2; 32 * 2 * 2
    c = ConvNet(in_features=3, num_cells=[4, 6], kernel_sizes=[3, 2], strides=[1, 2], paddings=1,
                activation_class=nn.ReLU, bias_last_layer=False)
    assert c[2].bias is None and c[2].stride == (2, 2)
    assert tuple(c(r.ones(1, 3, 5, 5)).shape) == (1, 6 * 3 * 3)  # 5 -> 5 (k3 p1) -> 3 (k2 s2 p1)
    with pytest.raises(ValueError, match="depth=None requires one of the input args"):
        ConvNet(num_cells=32)
    with pytest.raises(RuntimeError, match="depth=3 and num_cells=2 length conflict"):
        ConvNet(num_cells=[8, 8], kernel_sizes=[3, 3, 3])


def test_actor_and_value_operator_keys():
    actor = Actor(nn.Linear(4, 1), spec=OneHot(3))
    assert actor.in_keys == ["observation"] and actor.out_keys == ["action"]
    assert isinstance(actor.spec["action"], OneHot)
    td = actor(TensorDict(observation=r.ones(2, 4), batch_size=[2]))
    assert tuple(td["action"].shape) == (2, 1)
    assert ValueOperator(nn.Linear(4, 1)).out_keys == ["state_value"]
    assert ValueOperator(nn.Linear(5, 1), in_keys=["observation", "action"]).out_keys == ["state_action_value"]


def test_safe_module_projects_into_its_spec():
    from rlpipe.envs import Bounded
    lin = nn.Linear(1, 1)
    with r.no_grad():
        lin.weight.fill_(10.0)
        lin.bias.fill_(0.0)
    safe = SafeModule(lin, ["x"], ["y"], spec=Bounded(-1.0, 1.0, shape=(1,)), safe=True)
    td = safe(TensorDict(x=r.tensor([[0.5], [-0.05]]), batch_size=[2]))
    np.testing.assert_allclose(td["y"].numpy(), [[1.0], [-0.5]])
    with pytest.raises(RuntimeError, match="spec=None, safe=True"):
        SafeModule(lin, ["x"], ["y"], safe=True)


@pytest.mark.parametrize("spec, action, chosen", [
    (OneHot(3), [[0, 1, 1], [1, 0, 0]], [[6.0], [0.5]]),  # torchrl marks every maximum of a one-hot
    (Categorical(3), [1, 0], [[3.0], [0.5]]),
])
def test_qvalue_module_matches_torchrl(spec, action, chosen):
    td = QValueModule(spec=spec)(TensorDict(action_value=r.tensor(VALUES), batch_size=[2]))
    assert td["action"].dtype is r.int64 and td["action"].tolist() == action
    np.testing.assert_allclose(td["chosen_action_value"].numpy(), chosen)
    np.testing.assert_array_equal(td["action_value"].numpy(), np.float32(VALUES))


def test_qvalue_module_mask_and_names():
    q = QValueModule(action_space="categorical", action_mask_key="mask")
    td = q(TensorDict(action_value=r.tensor(VALUES), mask=r.tensor([[True, False, True], [False, True, True]]),
                      batch_size=[2]))
    assert td["action"].tolist() == [2, 2]
    np.testing.assert_allclose(td["chosen_action_value"].numpy(), [[3.0], [0.2]], rtol=1e-6)
    assert QValueModule(action_space="one-hot").action_space == "one_hot"
    with pytest.warns(DeprecationWarning, match="spec passed as action_space"):
        assert QValueModule(action_space=OneHot(2)).action_space == "one_hot"
    with pytest.raises(KeyError, match="Action value key action_value not found"):
        QValueModule(spec=OneHot(3))(TensorDict(batch_size=[]))


def test_qvalue_module_bad_arguments():
    with pytest.raises(ValueError, match="Neither action_space nor spec was defined"):
        QValueModule()
    with pytest.raises(ValueError, match="Got action_space=foo"):
        QValueModule(action_space="foo")
    with pytest.raises(ValueError, match="do not match"):
        QValueModule(action_space="categorical", spec=OneHot(3))
    with pytest.raises(ValueError, match="Got action_space=.*Unbounded"):
        QValueModule(spec=Unbounded(3))


def test_qvalue_actor():
    r.manual_seed(0)
    actor = QValueActor(nn.Linear(4, 3), spec=OneHot(3))
    assert actor.out_keys == ["action", "action_value", "chosen_action_value"] and actor.in_keys == ["observation"]
    td = actor(TensorDict(observation=r.randn(5, 4), batch_size=[5]))
    values = td["action_value"].detach().numpy()
    np.testing.assert_array_equal(td["action"].numpy().argmax(-1), values.argmax(-1))
    with pytest.raises(KeyError, match="not part of the module out-keys"):
        from rlpipe.tensordict import TensorDictModule
        QValueActor(TensorDictModule(nn.Linear(4, 3), ["observation"], ["q"]), spec=OneHot(3))


def test_egreedy_annealing_matches_torchrl():
    e = EGreedyModule(OneHot(3), eps_init=0.5, eps_end=0.1, annealing_num_steps=7)
    e.step(3)
    assert e.eps.item() == pytest.approx(0.3285714387893677, abs=0)
    e.step(10)
    assert e.eps.item() == pytest.approx(0.10000000149011612, abs=0)
    assert list(e.state_dict()) == ["eps_init", "eps_end", "eps"]
    with pytest.raises(RuntimeError, match="eps should decrease over time"):
        EGreedyModule(OneHot(3), eps_init=0.1, eps_end=0.5)


def test_egreedy_explores_only_when_the_exploration_type_is_random_or_unset():
    spec = OneHot(4)
    greedy = r.zeros(200, 4, dtype=r.int64)
    greedy[:, 0] = 1
    e = EGreedyModule(spec, eps_init=1.0, eps_end=1.0)
    for mode in (ExplorationType.MODE, ExplorationType.MEAN, ExplorationType.DETERMINISTIC):
        with set_exploration_type(mode):
            td = e(TensorDict(action=greedy.clone(), batch_size=[200]))
        np.testing.assert_array_equal(td["action"].numpy(), greedy.numpy())
    r.manual_seed(0)
    with set_exploration_type(ExplorationType.RANDOM):
        td = e(TensorDict(action=greedy.clone(), batch_size=[200]))
    chosen = td["action"].numpy()
    assert (chosen.sum(-1) == 1).all() and len(set(chosen.argmax(-1))) == 4  # random one-hots
    e0 = EGreedyModule(spec, eps_init=0.0, eps_end=0.0)
    td = e0(TensorDict(action=greedy.clone(), batch_size=[200]))  # unset: explores, with eps 0 never
    np.testing.assert_array_equal(td["action"].numpy(), greedy.numpy())


def test_egreedy_in_a_sequence_and_without_spec():
    r.manual_seed(1)
    policy = TensorDictSequential(QValueActor(nn.Linear(4, 2), spec=Categorical(2)),
                                  EGreedyModule(Categorical(2), eps_init=0.5))
    td = policy(TensorDict(observation=r.randn(8, 4), batch_size=[8]))
    assert set(td["action"].tolist()) <= {0, 1}
    with pytest.raises(RuntimeError, match="spec must be provided"):
        EGreedyModule(None)(TensorDict(action=r.zeros(2), batch_size=[2]))


def test_random_policy_is_exported_here_and_in_collectors():
    from rlpipe.collectors import RandomPolicy as CollectorsRandomPolicy
    assert RandomPolicy is CollectorsRandomPolicy
    td = RandomPolicy(OneHot(3))(TensorDict(batch_size=[]))
    assert td["action"].sum().item() == 1


@pytest.mark.cuda
@pytest.mark.skipif(not r.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_lazy_mlp_qvalue_and_egreedy_on_cuda_match_the_cpu():
    outputs, state = [], None
    for device in ("cpu", "cuda"):
        net = MLP(out_features=3, num_cells=[8], device=device)  # lazy first layer, materialized on the device
        obs = r.tensor([[0.1, -0.2, 0.3, 0.4], [1.0, 0.5, -0.5, 0.0]], device=device)
        policy = TensorDictSequential(QValueActor(net, spec=OneHot(3)), EGreedyModule(OneHot(3), eps_init=0.0,
                                                                                      eps_end=0.0, device=device))
        policy(TensorDict(observation=obs, batch_size=[2], device=device))
        assert net[0].weight.device.type == device
        if state is None:  # the two devices draw different initial weights: the cuda net takes the cpu ones
            state = {k: v.cpu() for k, v in net.state_dict().items()}
        else:
            net.load_state_dict({k: v.to(device) for k, v in state.items()})
        td = policy(TensorDict(observation=obs, batch_size=[2], device=device))
        assert td["action"].device.type == device
        outputs.append((td["action_value"].cpu().detach().numpy(), td["action"].cpu().numpy()))
    np.testing.assert_allclose(outputs[0][0], outputs[1][0], rtol=1e-5)
    np.testing.assert_array_equal(outputs[0][1], outputs[1][1])
