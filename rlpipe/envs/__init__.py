"""Layer 5: environment specs, Gymnasium environments, and transforms."""
from .common import EnvBase
from .specs import TensorSpec, Bounded, Unbounded, Categorical, OneHot, MultiCategorical, MultiOneHot, Binary, Composite
from .gym import GymEnv, GymWrapper, from_gym_space
from .libs.envpool import MultiThreadedEnv, MultiThreadedEnvWrapper
from .libs.dm_control import DMControlEnv
from .libs.gym import gym_backend, set_gym_backend
from .batched_envs import *  # noqa: F403 - SerialEnv, ParallelEnv, EnvCreator, env_creator
from .batched_envs import __all__ as _batched_all
from .transformed_env import Transform, TransformedEnv, Compose
from .transforms import CheckFinite, StepCounter, RewardSum, DoubleToFloat, ObservationNorm, RenameTransform
from .transforms_episodes import *  # noqa: F403 - TargetReturn, ActionScaling, ...
from .transforms_episodes import __all__ as _episodes_all
from .transforms_keys import *  # noqa: F401,F403
from .transforms_tensors import *  # noqa: F401,F403
from .transforms_vecnorm import *  # noqa: F401,F403
from .transforms_image import *  # noqa: F401,F403
from .transforms_image import __all__ as _image_all
from .transforms_misc import *  # noqa: F401,F403
from .transforms_misc import __all__ as _misc_all
from .transforms_data import *  # noqa: F401,F403
from .transforms_data import __all__ as _data_all
from .transforms_batch import *  # noqa: F401,F403
from .transforms_batch import __all__ as _batch_all
from .autoreset import AutoResetEnv, AutoResetTransform
from .custom import PendulumEnv
from .transformed_env import auto_unwrap_transformed_env, set_auto_unwrap_transformed_env
from . import transforms_keys as _keys_t, transforms_tensors as _tensors, transforms_vecnorm as _vecnorm
from .utils import check_env_specs, step_mdp, ExplorationType, exploration_type, set_exploration_type

__all__ = ["EnvBase", "TensorSpec", "Bounded", "Unbounded", "Categorical", "OneHot", "MultiCategorical", "MultiOneHot",
           "Binary", "Composite", "GymEnv", "GymWrapper", "from_gym_space", "MultiThreadedEnv",
           "MultiThreadedEnvWrapper", "DMControlEnv", "gym_backend", "set_gym_backend", "Transform", "TransformedEnv",
           "Compose",
           "CheckFinite", "StepCounter", "RewardSum", "DoubleToFloat", "ObservationNorm", "RenameTransform",
           "check_env_specs", "step_mdp", "ExplorationType", "exploration_type", "set_exploration_type",
           "auto_unwrap_transformed_env", "set_auto_unwrap_transformed_env", "PendulumEnv", "AutoResetEnv",
           "AutoResetTransform"]
__all__ += _episodes_all
__all__ += _batched_all
__all__ += _keys_t.__all__ + _tensors.__all__ + _vecnorm.__all__
__all__ += _image_all
__all__ += _misc_all
__all__ += _data_all
__all__ += _batch_all
