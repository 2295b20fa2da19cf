"""torchrl 0.14's ``Collector(..., backend=..., num_collectors=..., sync=...)`` dispatch."""
import pytest

from rlpipe.collectors import Collector, MultiaSyncDataCollector, MultiSyncDataCollector, SyncDataCollector
from rlpipe.envs import GymEnv
from test_collector import COUNTER, constant_policy


def _make():
    return GymEnv(COUNTER)


def test_direct_is_the_single_process_collector():
    collector = Collector(_make(), constant_policy(1), frames_per_batch=4, total_frames=4, backend="direct")
    assert type(collector) is SyncDataCollector
    assert next(iter(collector))["observation"][:, 0].tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("sync, cls", [(None, MultiSyncDataCollector), (False, MultiaSyncDataCollector)])
def test_process_backend_gives_a_multi_process_collector(sync, cls):
    collector = Collector(_make, constant_policy(1), frames_per_batch=4, total_frames=4, num_collectors=2, sync=sync)
    try:
        assert type(collector) is cls and collector.num_workers == 2
    finally:
        collector.shutdown()


@pytest.mark.parametrize("kwargs, message", [
    ({"backend": "submitit"}, "Collector does not support backend='submitit' in rlpipe"),
    ({"num_collectors": 0}, "num_collectors must be a positive integer, got 0"),
    ({"create_env_fn": [_make, _make], "num_collectors": 3}, "num_collectors does not match"),
])
def test_bad_backend_arguments(kwargs, message):
    kwargs = {"create_env_fn": _make, **kwargs}
    with pytest.raises(ValueError, match=message):
        Collector(policy=constant_policy(1), frames_per_batch=4, total_frames=4, **kwargs)


def test_parallel_env_serial_for_single():
    """torchrl's serial_for_single: one worker runs in this process; more still get worker processes."""
    from rlpipe.envs import ParallelEnv, SerialEnv
    single = ParallelEnv(1, _make, serial_for_single=True, mp_start_method="fork", timeout=30.0)
    assert type(single) is SerialEnv
    assert single.rollout(3, constant_policy(1))["next", "observation"][0, :, 0].tolist() == [1, 2, 3]
    single.close()
    several = ParallelEnv(2, _make, serial_for_single=True)
    assert type(several) is ParallelEnv and tuple(several.batch_size) == (2,)
    several.close(raise_if_closed=False)
