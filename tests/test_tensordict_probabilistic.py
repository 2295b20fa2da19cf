"""tensordict.nn's probabilistic side: interaction types, NormalParamExtractor and the scale mappings.

Constants measured with tensordict 0.14.3 / torch 2.13 in a separate environment.
"""
import numpy as np
import pytest

import rlpipe as r
from rlpipe.autograd import gradcheck
from rlpipe.tensordict.nn import InteractionType, interaction_type, mappings, set_interaction_type
from rlpipe.tensordict.nn.distributions import NormalParamExtractor

# NormalParamExtractor(mapping)(x).scale for x = [[-2, 0, .5, -30, 0, 3]], from tensordict 0.14.3
SCALES = {
    "biased_softplus_1.0": [0.009999999776482582, 1.0, 3.564472198486328],
    "biased_softplus_2.0_0.5": [0.5, 2.0, 4.761715888977051],
    "softplus": [9.999999747378752e-05, 0.6931471824645996, 3.0485873222351074],
    "exp": [9.999999747378752e-05, 1.0, 20.08553695678711],
    "expln": [9.999999747378752e-05, 1.0, 2.386294364929199],
    "biased_softplus": [0.009999999776482582, 1.0, 3.564472198486328],
    "none": [9.999999747378752e-05, 9.999999747378752e-05, 3.0],
}


@pytest.mark.parametrize("mapping", sorted(SCALES))
def test_normal_param_extractor_matches_tensordict(mapping):
    x = r.tensor([[-2.0, 0.0, 0.5, -30.0, 0.0, 3.0]])
    loc, scale = NormalParamExtractor(mapping)(x)
    np.testing.assert_array_equal(loc.numpy(), [[-2.0, 0.0, 0.5]])
    np.testing.assert_allclose(scale.numpy(), [SCALES[mapping]], rtol=1e-6)


def test_normal_param_extractor_passes_extra_inputs_and_is_differentiable():
    loc, scale, other = NormalParamExtractor()(r.ones(4), r.zeros(2))
    assert tuple(loc.shape) == (2,) and tuple(other.shape) == (2,)
    x = r.tensor([[-1.0, 0.3, 0.2, -0.7]], dtype=r.float64, requires_grad=True)
    assert gradcheck(lambda t: NormalParamExtractor()(t)[1], (x,))
    assert gradcheck(lambda t: NormalParamExtractor("expln")(t)[1], (x,))


def test_unknown_mappings():
    with pytest.raises(NotImplementedError, match="Unknown mapping foo"):
        NormalParamExtractor("foo")
    with pytest.raises(ValueError, match="Invalid number of args"):
        mappings("biased_softplus_1_2_3")


def test_interaction_type_context():
    assert interaction_type() is None
    with set_interaction_type("MODE"):
        assert interaction_type() is InteractionType.MODE
        with set_interaction_type(InteractionType.RANDOM):
            assert interaction_type() is InteractionType.RANDOM
        assert interaction_type() == "mode"
    assert interaction_type() is None
    with set_interaction_type():
        assert interaction_type() is InteractionType.DETERMINISTIC

    @set_interaction_type("mean")
    def inside():
        return interaction_type()

    assert inside() is InteractionType.MEAN and interaction_type() is None
    assert InteractionType.from_str("Median") is InteractionType.MEDIAN
    assert [t.value for t in InteractionType] == ["mode", "median", "mean", "random", "deterministic"]


def test_interaction_type_bad_values():
    with pytest.raises(ValueError, match="'bogus' is not a valid InteractionType"):
        set_interaction_type("bogus")
    with pytest.raises(ValueError, match="3 is not a valid InteractionType"):
        set_interaction_type(3)
    assert interaction_type() is None


def test_exploration_names_are_the_interaction_names():
    from rlpipe.envs import utils
    assert utils.ExplorationType is InteractionType
    assert utils.set_exploration_type is set_interaction_type
    assert utils.exploration_type is interaction_type


# ---- ProbabilisticTensorDictModule / Sequential and ProbabilisticActor ----
import math  # noqa: E402
import warnings  # noqa: E402

from rlpipe.distributions import Categorical, Normal  # noqa: E402
from rlpipe.modules import ProbabilisticActor, TanhNormal  # noqa: E402
from rlpipe.tensordict import TensorDict, TensorDictModule  # noqa: E402
from rlpipe.tensordict.nn import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential  # noqa: E402


def _params(n=3):
    return TensorDict(loc=r.tensor([[0.5], [-1.0], [2.0]][:n]), scale=r.tensor([[1.0], [2.0], [0.5]][:n]),
                      batch_size=[n])


def normal_log_prob(x, loc, scale):
    return -((x - loc) ** 2) / (2 * scale ** 2) - math.log(scale) - 0.5 * math.log(2 * math.pi)


def test_module_keys_and_log_prob_naming_as_tensordict_0_14():
    m = ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"], distribution_class=Normal,
                                      return_log_prob=True)
    assert m.out_keys == ["action", "action_log_prob"] and m.log_prob_key == "action_log_prob"
    nested = ProbabilisticTensorDictModule(in_keys={"loc": ("p", "mu"), "scale": ("p", "sigma")},
                                           out_keys=[("agent", "action")], distribution_class=Normal,
                                           return_log_prob=True)
    assert nested.log_prob_key == ("agent", "action_log_prob") and nested.in_keys == [("p", "mu"), ("p", "sigma")]
    assert ProbabilisticTensorDictModule(in_keys=["param"]).out_keys == ["_"]


@pytest.mark.parametrize("mode", [InteractionType.MEAN, InteractionType.MODE])
def test_mean_and_mode_give_the_location_with_its_log_prob(mode):
    m = ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"], distribution_class=Normal,
                                      return_log_prob=True)
    with set_interaction_type(mode):
        td = m(_params())
    np.testing.assert_array_equal(td["action"].numpy(), td["loc"].numpy())
    expected = [[normal_log_prob(0, 0, s)] for s in (1.0, 2.0, 0.5)]
    np.testing.assert_allclose(td["action_log_prob"].numpy(), expected, rtol=1e-6)


def test_default_deterministic_falls_back_on_the_mean_with_a_warning():
    m = ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"], distribution_class=Normal)
    with pytest.warns(UserWarning, match="deterministic_sample wasn't found"):
        td = m(_params())
    np.testing.assert_array_equal(td["action"].numpy(), td["loc"].numpy())
    # TanhNormal has a deterministic_sample: no warning
    t = ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"], distribution_class=TanhNormal)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        td = t(_params())
    assert (td["action"].abs() < 1).all()


def test_random_samples_and_the_log_prob_is_of_the_sample():
    r.manual_seed(0)
    m = ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"], distribution_class=Normal,
                                      return_log_prob=True)
    with set_interaction_type("random"):
        samples = [m(_params()) for _ in range(2000)]
    actions = np.stack([s["action"].numpy() for s in samples])
    np.testing.assert_allclose(actions.mean(0), [[0.5], [-1.0], [2.0]], atol=0.15)
    np.testing.assert_allclose(actions.std(0), [[1.0], [2.0], [0.5]], rtol=0.1)
    s = samples[0]
    expected = [[normal_log_prob(float(s["action"][i, 0]), float(s["loc"][i, 0]), float(s["scale"][i, 0]))]
                for i in range(3)]
    np.testing.assert_allclose(s["action_log_prob"].numpy(), expected, rtol=1e-5)


def test_categorical_mode_and_mismatched_keywords():
    m = ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"], distribution_class=Categorical)
    with set_interaction_type("mode"):
        td = m(TensorDict(logits=r.tensor([[0.1, 2.0, -1.0], [3.0, 0.0, 0.0]]), batch_size=[2]))
    assert td["action"].tolist() == [1, 0]
    bad = ProbabilisticTensorDictModule(in_keys=["observation"], distribution_class=Normal)
    with pytest.raises(TypeError, match="dist_keys must match"):
        bad(TensorDict(observation=r.ones(2), batch_size=[2]))


def test_probabilistic_actor_as_torchrl():
    r.manual_seed(0)
    net = TensorDictModule(r.nn.Sequential(r.nn.Linear(3, 2), NormalParamExtractor()), in_keys=["observation"],
                           out_keys=["loc", "scale"])
    actor = ProbabilisticActor(net, in_keys=["loc", "scale"], distribution_class=Normal, return_log_prob=True)
    assert actor.in_keys == ["observation"] and actor.out_keys == ["loc", "scale", "action", "action_log_prob"]
    assert isinstance(actor, ProbabilisticTensorDictSequential)
    td = TensorDict(observation=r.randn(4, 3), batch_size=[4])
    with set_interaction_type("mean"):
        out = actor(td.clone())
    np.testing.assert_array_equal(out["action"].detach().numpy(), out["loc"].detach().numpy())
    dist = actor.get_dist(td.clone())
    assert isinstance(dist, Normal) and tuple(dist.loc.shape) == (4, 1)
    np.testing.assert_allclose(actor.log_prob(out).detach().numpy(), out["action_log_prob"].detach().numpy())
    with pytest.raises(TypeError, match="must be an instance of ProbabilisticTensorDictModule"):
        ProbabilisticTensorDictSequential(net)


def test_distributions_by_name_and_the_default_delta():
    import rlpipe.modules
    default = ProbabilisticTensorDictModule(in_keys=["param"], out_keys=["action"])
    assert default.distribution_class is rlpipe.modules.Delta  # tensordict's Delta, which torchrl's modules export
    named = {name: ProbabilisticTensorDictModule(in_keys=["loc", "scale"], distribution_class=name).distribution_class
             for name in ("normal", "TanhNormal", "tanhnormal", "IndependentNormal", "delta")}
    assert named == {"normal": Normal, "TanhNormal": TanhNormal, "tanhnormal": TanhNormal,
                     "IndependentNormal": rlpipe.modules.IndependentNormal, "delta": rlpipe.modules.Delta}
    with pytest.raises(ValueError, match="unknown distribution name 'Zipf'"):
        ProbabilisticTensorDictModule(in_keys=["loc"], distribution_class="Zipf")
