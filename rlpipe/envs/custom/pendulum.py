"""torchrl's stateless pendulum: the state (angle ``th``, speed ``thdot``) and the physical
``params`` travel in the tensordict, so one env instance simulates any batch it is handed."""
import math

from ... import random as _random
from ..._creation import empty, tensor, zeros_like
from ... import _dtypes
from ...tensordict import TensorDict
from ..common import EnvBase
from ..specs import Bounded, Composite, Unbounded
from ..utils import make_composite_from_td


def angle_normalize(x):
    """Wraps an angle (tensor) into [-pi, pi)."""
    return ((x + math.pi) % (2 * math.pi)) - math.pi


class PendulumEnv(EnvBase):
    """torchrl's ``PendulumEnv``: the classic swing-up pendulum as a stateless env.

    ``td_params``: the physical parameters (``gen_params()``'s layout; default g=10); ``seed``: the
    seed of the env's own generator for the random initial states (drawn when None).
    """

    DEFAULT_X = math.pi
    DEFAULT_Y = 1.0
    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 30}
    batch_locked = False
    _supports_set_state = True
    rng = None

    def __init__(self, td_params=None, seed=None, device=None):
        if td_params is None:
            td_params = self.gen_params(device=device)
        super().__init__(device=device)
        self._make_spec(td_params)
        if seed is None:
            seed = empty((), dtype=_dtypes.int64).random_(generator=self.rng).item()
        self.set_seed(seed)

    angle_normalize = staticmethod(angle_normalize)

    @classmethod
    def _step(cls, tensordict):
        th, thdot = tensordict["th"], tensordict["thdot"]
        g_force, mass = tensordict["params", "g"], tensordict["params", "m"]
        length, dt = tensordict["params", "l"], tensordict["params", "dt"]
        max_torque, max_speed = tensordict["params", "max_torque"], tensordict["params", "max_speed"]
        u = tensordict["action"].squeeze(-1).clamp(-max_torque, max_torque)
        costs = cls.angle_normalize(th) ** 2 + 0.1 * thdot ** 2 + 0.001 * (u ** 2)
        new_thdot = thdot + (3 * g_force / (2 * length) * th.sin() + 3.0 / (mass * length ** 2) * u) * dt
        new_thdot = new_thdot.clamp(-max_speed, max_speed)
        new_th = cls.angle_normalize(th + new_thdot * dt)
        reward = -costs.view(*tensordict.shape, 1)
        done = zeros_like(reward, dtype=_dtypes.bool)
        return TensorDict({"th": new_th, "thdot": new_thdot, "params": tensordict["params"], "reward": reward,
                           "done": done}, tensordict.shape)

    def _reset(self, tensordict, **kwargs):
        batch_size = tensordict.batch_size if tensordict is not None else self.batch_size
        if tensordict is None or "params" not in tensordict.keys():
            tensordict = self.gen_params(batch_size=batch_size, device=self.device)
        elif kwargs.get("set_state") and "th" in tensordict.keys() and "thdot" in tensordict.keys():
            return tensordict.copy()
        return self._reset_random_data(tensordict.shape, batch_size, tensordict["params"])

    def _reset_random_data(self, shape, batch_size, params):
        """A fresh state uniform in [-DEFAULT_X, DEFAULT_X) x [-DEFAULT_Y, DEFAULT_Y) for each batch element."""
        th = self._uniform(shape, self.DEFAULT_X)
        thdot = self._uniform(shape, self.DEFAULT_Y)
        return TensorDict({"th": th, "thdot": thdot, "params": params}, batch_size=batch_size)

    def _uniform(self, shape, high):
        """Uniform samples in [-high, high), computed as torchrl does (same float32 rounding)."""
        high = tensor(high, device=self.device)
        return _random.rand(tuple(shape), generator=self.rng, device=self.device) * (high - -high) + -high

    def _make_spec(self, td_params):
        """Specs from the parameters: bounded angle and speed, the params as unbounded entries."""
        max_speed, max_torque = td_params["params", "max_speed"], td_params["params", "max_torque"]
        self.observation_spec = Composite(
            th=Bounded(low=-math.pi, high=math.pi, shape=(), dtype=_dtypes.float32),
            thdot=Bounded(low=-max_speed, high=max_speed, shape=(), dtype=_dtypes.float32),
            params=make_composite_from_td(td_params["params"], unsqueeze_null_shapes=False),
            shape=(),
        )
        self.state_spec = self.observation_spec.clone()
        self.action_spec = Bounded(low=-max_torque, high=max_torque, shape=(1,), dtype=_dtypes.float32)
        self.reward_spec = Unbounded(shape=(*td_params.shape, 1))

    def _set_seed(self, seed):
        rng = _random.Generator(device=self.device if self.device is not None else "cpu")
        rng.manual_seed(seed)
        self.rng = rng

    @staticmethod
    def gen_params(g=10.0, batch_size=None, device=None):
        """The physical parameters under ``"params"`` (max_speed 8, max_torque 2, dt 0.05, g, m 1, l 1),
        expanded to ``batch_size``."""
        params = {"max_speed": 8.0, "max_torque": 2.0, "dt": 0.05, "g": g, "m": 1.0, "l": 1.0}
        td = TensorDict({"params": TensorDict({k: tensor(v, dtype=_dtypes.float32) for k, v in params.items()}, [])},
                        [], device=device)
        if batch_size:
            td = td.expand(batch_size).contiguous()
        return td
