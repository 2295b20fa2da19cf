"""How probabilistic modules turn a distribution into a value: the interaction type, as
tensordict.nn.probabilistic (torchrl calls it the exploration type).

``RANDOM`` samples (``rsample`` where the distribution has it), ``MODE``/``MEDIAN``/``MEAN`` read the
distribution's property of that name, ``DETERMINISTIC`` reads ``deterministic_sample`` (the mean when a
distribution has none). ``interaction_type()`` is None outside any ``set_interaction_type`` block: each
module then uses its own default. The setting is process-wide, not per thread.
"""
import enum
import warnings
from textwrap import indent

from ... import distributions
from ..._utils import ScopedSetting
from ..keys import unravel_key
from ._delta import Delta
from .common import TensorDictModuleBase, TensorDictSequential

__all__ = ["InteractionType", "set_interaction_type", "interaction_type", "ProbabilisticTensorDictModule",
           "ProbabilisticTensorDictSequential"]


class InteractionType(enum.StrEnum):
    """What a probabilistic module returns: the distribution's mode, median, mean, a random sample, or its
    deterministic sample (torchrl's ExplorationType is this enum)."""
    MODE = "mode"
    MEDIAN = "median"
    MEAN = "mean"
    RANDOM = "random"
    DETERMINISTIC = "deterministic"

    @classmethod
    def from_str(cls, type_str):
        """The member named ``type_str``, case-insensitively."""
        return cls(type_str.lower())

    @classmethod
    def _missing_(cls, value):
        if isinstance(value, str):
            for member in cls:
                if member.value == value.lower():
                    return member
        return None


_current = [None]


def interaction_type():
    """The interaction type set by the innermost ``set_interaction_type`` block, or None."""
    return _current[0]


class set_interaction_type(ScopedSetting):
    """Context manager (and decorator) setting the interaction type of every probabilistic and
    exploration module called inside it. ``type`` is an ``InteractionType``, its name as a string
    (any case), or None (each module's default)."""
    _store = _current

    def __init__(self, type=InteractionType.DETERMINISTIC):
        if not isinstance(type, InteractionType) and type is not None:
            if not isinstance(type, str):
                raise ValueError(f"{type} is not a valid InteractionType")
            type = InteractionType(type.lower())
        self.type = type

    def _setting(self):
        return self.type


def _log_prob_key_for(key):
    key = unravel_key(key)
    return key + "_log_prob" if isinstance(key, str) else key[:-1] + (key[-1] + "_log_prob",)


def _sample(dist, interaction, n_empirical_estimate, owner):
    """The value ``interaction`` asks of ``dist`` (see the module docstring)."""
    if interaction is InteractionType.DETERMINISTIC:
        if hasattr(dist, "deterministic_sample"):
            return dist.deterministic_sample
        try:
            from rlpipe.distributions import constraints  # absolute: see rlpipe.tensordict.TensorDict.pad
            real = isinstance(dist.support, type(constraints.real))
        except (NotImplementedError, AttributeError, ImportError):
            real = True
        interaction = InteractionType.MEAN if real else InteractionType.MODE
        warnings.warn(f"deterministic_sample wasn't found when queried on {type(dist)}. {owner} is falling back on "
                      f"{interaction.value} instead. For better code quality and efficiency, make sure to either "
                      "provide a distribution with a deterministic_sample attribute or to change the InteractionMode "
                      "to the desired value.", UserWarning, stacklevel=4)
    if interaction is InteractionType.MODE:
        return dist.mode
    if interaction is InteractionType.MEDIAN:
        return dist.median
    if interaction is InteractionType.MEAN:
        try:
            return dist.mean
        except (AttributeError, NotImplementedError):
            draw = dist.rsample if dist.has_rsample else dist.sample
            return draw((n_empirical_estimate,)).mean(0)
    if interaction is InteractionType.RANDOM:
        return dist.rsample() if dist.has_rsample else dist.sample()
    raise NotImplementedError(f"unknown interaction_type {interaction}")


class ProbabilisticTensorDictModule(TensorDictModuleBase):
    """Builds a distribution from tensordict entries and writes a value drawn from it.

    ``in_keys`` name the distribution's keyword arguments and the entries they are read from (a list: the
    same names; a dict: ``{dist_kwarg: key}``). ``out_keys`` (default ``["_"]``) receive the value: a
    sample under ``InteractionType.RANDOM``, the distribution's mode / median / mean otherwise, and
    ``deterministic_sample`` (falling back on the mean, with a warning) under ``DETERMINISTIC``, the
    ``default_interaction_type`` used outside any ``set_interaction_type`` block (tensordict 0.14's default).
    With ``return_log_prob`` the log-probability of the value is written under ``log_prob_key`` (default:
    ``"<out_key>_log_prob"``, tensordict 0.14's naming), which then ends ``out_keys``.
    ``distribution_class`` may also be given by name (``"normal"``...) as tensordict's ``distributions_maps``.
    """

    def __init__(self, in_keys, out_keys=None, *, default_interaction_type=InteractionType.DETERMINISTIC,
                 distribution_class=None, distribution_kwargs=None, return_log_prob=False, log_prob_key=None,
                 cache_dist=False, n_empirical_estimate=1000, num_samples=None):
        super().__init__()
        if isinstance(in_keys, (str, tuple)):
            in_keys = [in_keys]
        if isinstance(out_keys, (str, tuple)):
            out_keys = [out_keys]
        elif out_keys is None:
            out_keys = ["_"]
        if isinstance(in_keys, dict):
            dist_keys, in_keys = zip(*in_keys.items())
            if set(map(type, dist_keys)) != {str}:
                raise ValueError(f"If in_keys is dict, its keys must be strings matching to the distribution kwargs."
                                 f"{type(self).__name__} got {dist_keys}")
        else:
            dist_keys = in_keys
        if num_samples is not None:
            raise NotImplementedError("ProbabilisticTensorDictModule: num_samples is not supported by rlpipe")
        if distribution_class is None or isinstance(distribution_class, str):
            distribution_class = _distribution_named("delta" if distribution_class is None else distribution_class)
        self._out_keys = [unravel_key(k) for k in out_keys]
        self.in_keys = list(in_keys)
        self.dist_keys = list(dist_keys)
        self.log_prob_key = log_prob_key if log_prob_key is not None else _log_prob_key_for(self._out_keys[0])
        self.default_interaction_type = InteractionType(default_interaction_type)
        self.distribution_class = distribution_class
        self.distribution_kwargs = distribution_kwargs if distribution_kwargs is not None else {}
        self.n_empirical_estimate = n_empirical_estimate
        self.cache_dist = cache_dist
        self.return_log_prob = return_log_prob
        self.num_samples = None

    @property
    def out_keys(self):
        """The keys the module writes: the sample keys, then the log-prob key when it returns one."""
        return self._out_keys + [self.log_prob_key] if self.return_log_prob else list(self._out_keys)

    @property
    def dist_sample_keys(self):
        """The keys the samples are written to."""
        return list(self._out_keys)

    @property
    def log_prob_keys(self):
        """The keys the log-probabilities are written to."""
        return [self.log_prob_key]

    def get_dist(self, tensordict):
        """The distribution built from the in-keys' entries (and ``distribution_kwargs``)."""
        kwargs = {(k[-1] if isinstance(k, tuple) else k): tensordict.get(key, None)
                  for k, key in zip(self.dist_keys, self.in_keys)}
        try:
            return self.distribution_class(**kwargs, **self.distribution_kwargs)
        except TypeError as err:
            if "an unexpected keyword argument" in str(err):
                raise TypeError("distribution keywords and tensordict keys indicated by "
                                "ProbabilisticTensorDictModule.dist_keys must match. Got this error message: \n"
                                f"{indent(str(err), 4 * ' ')}\nwith dist_keys={self.dist_keys}") from err
            raise

    build_dist_from_params = get_dist

    def log_prob(self, tensordict, *, dist=None):
        """The log-probability of the out-key entries of ``tensordict`` under the distribution it describes."""
        dist = self.get_dist(tensordict) if dist is None else dist
        return dist.log_prob(*(tensordict[key] for key in self._out_keys))

    def forward(self, tensordict, tensordict_out=None, _requires_sample=True):
        """Builds the distribution from the TensorDict's parameters and writes a sample (and its log-probability)."""
        tensordict_out = tensordict if tensordict_out is None else tensordict_out
        dist = self.get_dist(tensordict)
        if _requires_sample:
            interaction = interaction_type() or self.default_interaction_type
            value = _sample(dist, interaction, self.n_empirical_estimate, type(self).__name__)
            tensordict_out.set(self._out_keys[0], value)
        else:
            value = tensordict[self._out_keys[0]]
        if self.return_log_prob:
            tensordict_out.set(self.log_prob_key, dist.log_prob(value))
        return tensordict_out

    def __repr__(self):
        body = indent(f"in_keys={self.in_keys},\nout_keys={self.out_keys},\n"
                      f"distribution_class={self.distribution_class},\n"
                      f"distribution_kwargs={self.distribution_kwargs},\n"
                      f"default_interaction_type={self.default_interaction_type.value}", 4 * " ")
        return f"{type(self).__name__}(\n{body})"


_NAMED_DISTRIBUTIONS = {"Delta": Delta}  # beyond rlpipe.distributions; rlpipe.modules adds torchrl's


def register_distributions(*classes):
    """Lets probabilistic modules take these distribution classes by their name (rlpipe.modules.distributions
    registers torchrl's TanhNormal and others this way, from the layer above)."""
    _NAMED_DISTRIBUTIONS.update({cls.__name__: cls for cls in classes})


def _distribution_named(name):
    """tensordict's ``distributions_maps``, over the distributions rlpipe has: rlpipe.distributions',
    Delta, and the registered ones (torchrl's once rlpipe.modules is imported)."""
    names = {"normal": "Normal", "categorical": "Categorical", "onehotcategorical": "OneHotCategorical",
             "tanhnormal": "TanhNormal", "delta": "Delta", "bernoulli": "Bernoulli"}
    name = names.get(name.lower(), name)
    found = getattr(distributions, name, None) or _NAMED_DISTRIBUTIONS.get(name)
    if found is None:
        raise ValueError(f"unknown distribution name {name!r}; known: {sorted(names)} (torchrl's, such as "
                         "TanhNormal, once rlpipe.modules is imported)")
    return found


class ProbabilisticTensorDictSequential(TensorDictSequential):
    """A ``TensorDictSequential`` whose last module is a ``ProbabilisticTensorDictModule``: the earlier
    modules compute the distribution's parameters, the last one draws from it. ``get_dist(td)`` runs the
    earlier modules and returns the distribution; ``log_prob(td)`` its log-probability of the stored value."""

    def __init__(self, *modules, partial_tolerant=False, return_composite=None, inplace=None):
        if not modules:
            raise ValueError("ProbabilisticTensorDictSequential must consist of zero or more TensorDictModules "
                             "followed by a ProbabilisticTensorDictModule")
        if not isinstance(modules[-1], ProbabilisticTensorDictModule) and not return_composite:
            raise TypeError("The final module passed to ProbabilisticTensorDictSequential must be an instance of "
                            f"ProbabilisticTensorDictModule, got {type(modules[-1]).__name__}")
        super().__init__(*modules, partial_tolerant=partial_tolerant, inplace=inplace)
        self.return_composite = return_composite

    @property
    def det_part(self):
        """The modules before the probabilistic one, as a TensorDictSequential."""
        return TensorDictSequential(*list(self.module)[:-1])

    def get_dist_params(self, tensordict):
        """Runs every module but the last (the distribution parameters written into ``tensordict``)."""
        for module in list(self.module)[:-1]:
            tensordict = self._run_module(module, tensordict)
        return tensordict

    def get_dist(self, tensordict, **kwargs):
        """The distribution built from parameters already in ``tensordict``."""
        """The distribution the last module builds after running the others on ``tensordict``."""
        return self.module[-1].get_dist(self.get_dist_params(tensordict))

    build_dist_from_params = get_dist

    @property
    def log_prob_key(self):
        """The key of the log-probability (of the last probabilistic module)."""
        return self.module[-1].log_prob_key

    @property
    def default_interaction_type(self):
        """The interaction type used when none is set (the last module's)."""
        return self.module[-1].default_interaction_type

    def log_prob(self, tensordict, **kwargs):
        """The log-probability of the samples in ``tensordict`` under the built distribution."""
        return self.module[-1].log_prob(tensordict, dist=self.get_dist(tensordict))
