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
