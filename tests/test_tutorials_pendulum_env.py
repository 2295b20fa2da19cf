"""torchrl's PendulumEnv on rlpipe: the same dynamics and rewards as torchrl 0.14.1 (values
recorded there from the same states and actions), the same specs, a valid env."""
import numpy as np
import pytest

import rlpipe
from rlpipe.envs import PendulumEnv, check_env_specs
from rlpipe.envs.utils import step_mdp

# torchrl 0.14.1: (th0, thdot0, actions) -> [(next th, next thdot, reward)] per step
RECORDED = [
    (0.5, -0.3, [1.5, -3.0, 0.2],
     [(0.5142285823822021, 0.2845691442489624, -0.26124998927116394),
      (0.5319018363952637, 0.353466659784317, -0.2765289843082428),
      (0.570094108581543, 0.7638466954231262, -0.29545342922210693)]),
    (3.0, 7.9, [2.0, 2.0],  # speed clamped at max_speed, angle wrapped
     [(-2.883185625076294, 8.0, -15.245001792907715), (-2.4831855297088623, 8.0, -14.716758728027344)]),
]


@pytest.mark.parametrize("th0, thdot0, actions, expected", RECORDED)
def test_steps_match_torchrl(th0, thdot0, actions, expected):
    env = PendulumEnv(seed=0)
    td = env.gen_params()
    td["th"] = rlpipe.tensor(th0)
    td["thdot"] = rlpipe.tensor(thdot0)
    rows = []
    for action in actions:
        td["action"] = rlpipe.tensor([action])
        td = env.step(td)
        rows.append((td["next", "th"].item(), td["next", "thdot"].item(), td["next", "reward"].item()))
        td = step_mdp(td)
    np.testing.assert_allclose(rows, expected, rtol=1e-6, atol=1e-6)


def test_specs_match_torchrl():
    env = PendulumEnv(seed=0)
    keys = {k if isinstance(k, str) else tuple(k) for k in env.observation_spec.keys(True, True)}
    assert keys == {"th", "thdot"} | {("params", name) for name in ("dt", "g", "l", "m", "max_speed", "max_torque")}
    assert env.action_spec.space.low.tolist() == [-2.0] and float(env.observation_spec["thdot"].space.high) == 8.0
    assert env.batch_locked is False
    check_env_specs(env)


def test_seeded_resets_repeat_and_stay_in_range():
    env_a, env_b = PendulumEnv(seed=3), PendulumEnv(seed=3)
    first = [env_a.reset()["th"].item() for _ in range(3)]
    assert first == [env_b.reset()["th"].item() for _ in range(3)] and len(set(first)) == 3
    reset = PendulumEnv(seed=5).reset()
    assert -np.pi <= reset["th"].item() < np.pi and -1.0 <= reset["thdot"].item() < 1.0
    assert PendulumEnv().reset()["params", "g"].item() == 10.0


def test_gen_params_takes_gravity_and_batch():
    params = PendulumEnv.gen_params(g=9.81, batch_size=[3])
    assert tuple(params.batch_size) == (3,)
    np.testing.assert_allclose(params["params", "g"].numpy(), [9.81] * 3, rtol=1e-6)
