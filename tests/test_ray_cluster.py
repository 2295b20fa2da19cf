"""``RayCollector`` across two Ray nodes, for real: a head and a second node started with ``ray start``
on this machine (each its own raylet with one CPU and a resource naming it), actors placed on both.

Slow (about a minute, most of it Ray starting and stopping), run by CI like every test.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from test_ray_collector import Counter, arr, check_rows, row

import rlpipe
from rlpipe import nn
from rlpipe.collectors.distributed import RayCollector
from rlpipe.envs import GymEnv
from rlpipe.tensordict import TensorDictModule

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
ray.cloudpickle.register_pickle_by_value(sys.modules["test_ray_collector"])

pytestmark = pytest.mark.slow


def make_counter():
    return GymEnv(Counter())


class SignPolicy(nn.Module):
    """Action 1 (one-hot) where the weight is positive, else 0 (Counter's reward is ``t + 10 * action``)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(rlpipe.tensor([-1.0]))

    def forward(self, observation):
        return nn.functional.one_hot((self.weight > 0).long()[0], 2)  # GymEnv's one-hot actions


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sessions(sids):
    """Pids of the live processes whose session id is in ``sids``."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) in sids and fields[0] != "Z":
                pids.append(int(name))
    return pids


def _stop(nodes, seconds=60):
    """Stops the ``ray start --block`` sessions (and every process they started); returns the
    processes still alive after ``seconds``."""
    for node in nodes:
        if node.poll() is None:
            os.killpg(node.pid, signal.SIGTERM)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and _sessions({n.pid for n in nodes}):
        if time.monotonic() > deadline - seconds / 2:  # not gone after a while: no more asking
            for pid in _sessions({n.pid for n in nodes}):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    for node in nodes:
        node.wait(10)
    return _sessions({n.pid for n in nodes})


@pytest.fixture
def two_nodes(tmp_path):
    """A head (resource ``node_a``) and a second node (``node_b``), one CPU each, this test's process
    connected as the driver; everything stopped afterwards."""
    if ray.is_initialized():
        ray.shutdown()
    # without token authentication, which `ray start --head` turns on but this process read as off
    # when it imported Ray: a cluster on loopback, for this test only
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    port = _free_port()
    # a temp dir of its own: Ray's default one would record the cluster as "current", which a later
    # plain ray.init() (other tests) would then try to join
    temp_dir = tempfile.mkdtemp(prefix="rlray", dir="/tmp")  # short: Ray puts unix sockets in it
    common = ["--block", "--num-cpus=1", "--disable-usage-stats", "--node-ip-address=127.0.0.1",
              f"--temp-dir={temp_dir}"]
    log = open(tmp_path / "ray.log", "w")  # noqa: SIM115  closed below
    start = dict(stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    ray_cli = [sys.executable, "-m", "ray.scripts.scripts"]  # the `ray` command of this Python
    nodes = [subprocess.Popen([*ray_cli, "start", "--head", f"--port={port}", "--include-dashboard=false",
                               '--resources={"node_a": 1}', *common], **start)]
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                assert nodes[0].poll() is None and time.monotonic() < deadline, (tmp_path / "ray.log").read_text()
                time.sleep(0.2)
        nodes.append(subprocess.Popen([*ray_cli, "start", f"--address=127.0.0.1:{port}", '--resources={"node_b": 1}',
                                       *common], **start))
        ray.init(address=f"127.0.0.1:{port}", log_to_driver=False)
        while sum(n["Alive"] for n in ray.nodes()) < 2:
            assert time.monotonic() < deadline, (tmp_path / "ray.log").read_text()
            time.sleep(0.5)
        yield {name: n["NodeID"] for n in ray.nodes() if n["Alive"] for name in ("node_a", "node_b")
               if name in n["Resources"]}
    finally:
        ray.shutdown()
        left = _stop(nodes)
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert not left, f"Ray processes left after stopping the cluster: {left}"


def test_collector_spans_two_nodes(two_nodes):
    policy = TensorDictModule(SignPolicy(), in_keys=["observation"], out_keys=["action"])
    collector = RayCollector(make_counter, policy, num_collectors=2, frames_per_batch=20, total_frames=-1, sync=True,
                             remote_config=[{"resources": {"node_a": 1}}, {"resources": {"node_b": 1}}], timeout=60)
    try:
        assert [where["node_id"] for where in collector.actor_locations] == [two_nodes["node_a"],
                                                                              two_nodes["node_b"]]
        it = iter(collector)
        before = [next(it) for _ in range(3)]
        # frames exact: every batch is [2 actors, 10 steps]; each actor's steps chain across batches
        assert all(tuple(b.batch_size) == (2, 10) for b in before)
        for actor in range(2):
            check_rows([row(b, actor) for b in before])
        ids = [set(arr(b["collector", "traj_ids"])[actor].ravel()) for b in before for actor in range(2)]
        assert set.union(*ids[0::2]).isdisjoint(set.union(*ids[1::2])), "trajectory ids must differ across nodes"
        np.testing.assert_array_equal(np.concatenate([arr(b["action"]) for b in before])[..., 1], 0)
        # a weight update reaches the actors on both nodes
        with rlpipe.no_grad():
            policy.module.weight.fill_(1.0)
        collector.update_policy_weights_()
        after = next(it)
        np.testing.assert_array_equal(arr(after["action"])[..., 1], 1)
        obs = arr(after["observation"])[..., 0]
        np.testing.assert_allclose(arr(after["next", "reward"])[..., 0], obs + 1 + 10)
        # the second node's actor dies: the error names it and where it ran
        victim = collector.actor_locations[1]
        os.kill(victim["pid"], signal.SIGKILL)
        with pytest.raises(RuntimeError, match=rf"collector actor 1 \(pid {victim['pid']} on node "
                                               rf"{two_nodes['node_b'][:12]} at [\d.]+\) failed while"):
            for _ in range(5):
                next(it)
    finally:
        collector.shutdown()
