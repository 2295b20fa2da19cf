"""What torchrl's sota-implementations call beyond the core API: env ``is_closed``/``eval``/``train``/
``apply`` (torchrl's EnvBase is an nn.Module), the collectors' ``max_frames_per_traj <= 0``,
``compile_policy``/``cudagraph_policy`` and ``AsyncCollector``, and tensordict's ``CudaGraphModule``
and ``AddStateIndependentNormalScale``. Expected values recorded from torchrl 0.14.1 / tensordict 0.14.3."""
import numpy as np
import pytest

import rlpipe
from rlpipe.collectors import AsyncCollector, SyncDataCollector
from rlpipe.envs import Compose, GymEnv, ObservationNorm, SerialEnv, StepCounter, TransformedEnv
from rlpipe.tensordict import TensorDict
from rlpipe.tensordict.nn import AddStateIndependentNormalScale, CudaGraphModule, TensorDictModule


def _transformed():
    return TransformedEnv(GymEnv("CartPole-v1"),
                          Compose(StepCounter(), ObservationNorm(loc=0.0, scale=1.0, in_keys=["observation"])))


def test_is_closed_property_and_setter():
    env = GymEnv("CartPole-v1")
    assert env.is_closed is False
    env.close()
    assert env.is_closed is True
    wrapped = _transformed()
    assert wrapped.is_closed is False
    wrapped.is_closed = True  # torchrl: the base env's flag
    assert wrapped.is_closed is True and wrapped.base_env.is_closed is True


def test_batched_env_is_closed_until_started():
    env = SerialEnv(2, lambda: GymEnv("CartPole-v1"))
    assert env.is_closed is True
    env.reset()
    assert env.is_closed is False
    env.close()
    assert env.is_closed is True


def test_eval_train_reach_the_transforms_only():
    env = _transformed()
    assert env.eval() is env
    # torchrl: the transforms' flags change; the env's own and the base env's stay True
    assert env.training is True and env.base_env.training is True
    assert env.transform.training is False and env.transform[0].training is False
    assert env.train() is env and env.transform[1].training is True
    plain = GymEnv("CartPole-v1")
    assert plain.eval() is plain and plain.training is False
    with pytest.raises(TypeError, match="train: mode must be a bool, got str 'yes'"):
        env.train("yes")
    assert env.transform.training is True  # unchanged by the refused call


def test_apply_visits_base_env_transforms_then_env():
    env = _transformed()
    seen = []
    assert env.apply(lambda m: seen.append(type(m).__name__)) is env
    assert seen == ["GymEnv", "StepCounter", "ObservationNorm", "ModuleList", "Compose", "TransformedEnv"]


@pytest.mark.parametrize("limit", [-1, 0, None])
def test_max_frames_per_traj_non_positive_means_no_limit(limit):
    collector = SyncDataCollector(GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=8,
                                  max_frames_per_traj=limit, compile_policy=False, cudagraph_policy=False)
    assert collector.max_frames_per_traj == (0 if limit is None else limit)  # torchrl stores these
    assert "step_count" not in next(iter(collector)).keys()
    collector.shutdown()


def test_max_frames_per_traj_type_error():
    with pytest.raises(TypeError, match="max_frames_per_traj must be an integer or None, got str 'x'"):
        SyncDataCollector(GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=8, max_frames_per_traj="x")


def test_async_collector_is_one_worker():
    with AsyncCollector(lambda: GymEnv("CartPole-v1"), None, frames_per_batch=8, total_frames=16,
                        max_frames_per_traj=-1, compile_policy={"mode": "default"}) as collector:
        assert collector.num_workers == 1
        sizes = [batch.numel() for batch in collector]
    assert sizes == [8, 8]
    with pytest.raises(TypeError, match="AsyncCollector runs a single worker: it takes no num_workers argument "
                                        r"\(got num_workers=2\)"):
        AsyncCollector(lambda: GymEnv("CartPole-v1"), None, num_workers=2, frames_per_batch=8, total_frames=16)


def test_async_collector_create_env_kwargs():
    """torchrl's AsyncCollector(create_env_fn=..., create_env_kwargs={...}): the worker's env is built with them."""
    def make_env(max_steps):
        return TransformedEnv(GymEnv("CartPole-v1"), StepCounter(max_steps=max_steps))

    with AsyncCollector(create_env_fn=make_env, create_env_kwargs={"max_steps": 2}, policy=None, frames_per_batch=6,
                        total_frames=6) as collector:
        batch = next(iter(collector))
    assert batch["next", "step_count"].reshape(-1).tolist() == [1, 2, 1, 2, 1, 2]
    with pytest.raises(TypeError, match="AsyncCollector: create_env_kwargs must be a dict, got list"):
        AsyncCollector(make_env, None, create_env_kwargs=[{}], frames_per_batch=6, total_frames=6)


def test_cuda_graph_module_runs_the_module():
    module = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
    graph = CudaGraphModule(module, warmup=3, device="cpu")
    assert graph.in_keys == ["x"] and graph.out_keys == ["y"] and graph.device == "cpu"
    for _ in range(5):  # past the warmup: still the module's result
        out = graph(TensorDict(x=rlpipe.zeros(2)))
    assert out["y"].tolist() == [1.0, 1.0] and graph.counter == 5
    update = CudaGraphModule(lambda a, b: a * b, in_keys=[], out_keys=[])
    assert update(rlpipe.tensor(2.0), b=rlpipe.tensor(3.0)).item() == 6.0
    plain = CudaGraphModule(lambda a: a)
    assert plain.in_keys is None and plain.out_keys is None and plain.state_dict() == {}
    assert CudaGraphModule(lambda a: a, in_keys=["a"]).out_keys == []  # tensordict's default then
    with pytest.raises(ValueError, match="warmup must be an integer greater than 0, got 0"):
        CudaGraphModule(module, warmup=0)
    with pytest.raises(TypeError, match="CudaGraphModule: module must be callable, got int"):
        CudaGraphModule(3)


def test_cuda_graph_module_state_dict_is_the_modules():
    linear = rlpipe.nn.Linear(2, 1)
    graph = CudaGraphModule(linear)
    assert list(graph.state_dict()) == ["weight", "bias"]
    other = rlpipe.nn.Linear(2, 1)
    CudaGraphModule(other).load_state_dict(graph.state_dict())
    np.testing.assert_array_equal(other.weight.detach().numpy(), linear.weight.detach().numpy())


def test_add_state_independent_normal_scale_values():
    x = rlpipe.tensor([[0.1, 0.2, 0.3], [1.0, 2.0, 3.0]])
    module = AddStateIndependentNormalScale(3, scale_mapping="biased_softplus_1.0", init_value=0.5)
    loc, scale = module(x)
    assert loc is x and [n for n, _ in module.named_parameters()] == ["state_independent_scale"]
    np.testing.assert_allclose(scale.detach().numpy(), np.full((2, 3), 1.3419369459152222), rtol=1e-6)
    scale.sum().backward()
    np.testing.assert_allclose(module.state_independent_scale.grad.numpy(), [1.4720690250396729] * 3, rtol=1e-6)
    buffered = AddStateIndependentNormalScale(3, make_param=False, init_value=-20.0)
    assert list(buffered.parameters()) == [] and [n for n, _ in buffered.named_buffers()] == ["state_independent_scale"]
    np.testing.assert_allclose(buffered(x)[1].numpy(), np.full((2, 3), 1e-4), rtol=1e-6)  # held at scale_lb
    loc, scale, other = AddStateIndependentNormalScale((2, 3))(x, x)
    assert other is x and scale.tolist() == [[1.0] * 3] * 2
    assert AddStateIndependentNormalScale()(rlpipe.tensor(2.0))[1].item() == 1.0


def test_add_state_independent_normal_scale_shape_mismatch():
    x = rlpipe.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"Last dimensions of loc \(.*\[3\]\)\) do not match the number of "
                                           r"dimensions in scale \(.*\[4\]\)\)"):
        AddStateIndependentNormalScale(4)(x)
    with pytest.raises(RuntimeError, match=r"Last dimensions of loc \(.*\[2, 3\]\)"):  # a () scale wants a () loc
        AddStateIndependentNormalScale()(x)


def test_dm_control_env_name_imports_and_refuses():
    """torchrl's sota SAC imports DMControlEnv beside GymEnv; rlpipe has no dm_control wrapper."""
    from rlpipe.envs import DMControlEnv
    try:
        import dm_control  # noqa: F401
        error, message = NotImplementedError, "DMControlEnv\\('cheetah', 'run'\\): rlpipe does not wrap dm_control yet"
    except ImportError:
        error, message = ImportError, "dm_control python package was not found. Please install this dependency."
    with pytest.raises(error, match=message):
        DMControlEnv("cheetah", "run")
