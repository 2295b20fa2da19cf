"""Module behaviour that PyTorch's own nn test files check, as torch 2.13 behaves (measured there):
rlpipe.__future__'s conversion switches, ParameterDict's dict methods and update rules."""
from collections import OrderedDict

import pytest

import rlpipe as r
from rlpipe import nn


@pytest.fixture(autouse=True)
def _reset_future():
    yield
    r.__future__.set_overwrite_module_params_on_conversion(False)
    r.__future__.set_swap_module_params_on_conversion(False)


def test_future_switches_default_off_and_store_what_they_are_given():
    assert r.__future__.get_overwrite_module_params_on_conversion() is False
    assert r.__future__.get_swap_module_params_on_conversion() is False
    r.__future__.set_swap_module_params_on_conversion(0)  # torch stores the value as given
    assert r.__future__.get_swap_module_params_on_conversion() == 0
    r.__future__.set_overwrite_module_params_on_conversion(True)
    assert r.__future__.get_overwrite_module_params_on_conversion() is True


def test_conversion_keeps_parameter_objects_by_default():
    m = nn.Linear(2, 3)
    w = m.weight
    m.double()
    assert m.weight is w and m.weight.dtype == r.float64


def test_overwrite_switch_gives_new_parameters_with_converted_grads():
    m = nn.Linear(2, 3)
    w = m.weight
    m.weight.grad = r.ones(3, 2)
    r.__future__.set_overwrite_module_params_on_conversion(True)
    m.double()
    assert m.weight is not w and type(m.weight) is nn.Parameter
    assert m.weight.dtype == r.float64 and m.weight.grad.dtype == r.float64
    assert m.weight.requires_grad
    assert w.dtype == r.float32  # the old object is left as it was
    assert r.equal(m.weight.float(), w.detach())


def test_swap_switch_wins_over_overwrite():
    m = nn.Linear(2, 3)
    w = m.weight
    r.__future__.set_overwrite_module_params_on_conversion(True)
    r.__future__.set_swap_module_params_on_conversion(True)
    m.double()
    assert m.weight is w and m.weight.dtype == r.float64


def test_swap_with_assign_keeps_the_parameter_and_shares_the_checkpoint_data():
    r.__future__.set_swap_module_params_on_conversion(True)
    m = nn.Linear(2, 3)
    w = m.weight
    sd = nn.Linear(2, 3).state_dict()
    m.load_state_dict(sd, assign=True)
    assert m.weight is w and w.requires_grad
    assert r.equal(m.weight, sd["weight"])
    with r.no_grad():
        sd["weight"].add_(1)
    assert r.equal(m.weight, sd["weight"])  # shared, as torch's swap of the detached checkpoint tensor


def test_assign_without_swap_replaces_the_parameter():
    m = nn.Linear(2, 3)
    w = m.weight
    sd = nn.Linear(2, 3).state_dict()
    m.load_state_dict(sd, assign=True)
    assert m.weight is not w and type(m.weight) is nn.Parameter and m.weight.requires_grad
    assert r.equal(m.weight, sd["weight"])


def _pd(*names):
    return nn.ParameterDict(OrderedDict((n, nn.Parameter(r.zeros(1))) for n in names))


def test_parameter_dict_update_sorts_a_plain_dict_but_keeps_ordered_inputs():
    pd = _pd("z")
    pd.update({"b": r.ones(1), "a": r.ones(1)})
    assert list(pd) == ["z", "a", "b"]
    pd.update(OrderedDict([("d", r.ones(1)), ("c", r.ones(1))]))
    pd.update([("f", r.ones(1)), ("e", r.ones(1))])
    pd.update(_pd("h", "g"))
    assert list(pd) == ["z", "a", "b", "d", "c", "f", "e", "h", "g"]


@pytest.mark.parametrize("bad, error, message", [
    (1, TypeError, "ParametersDict.update should be called with an iterable of key/value pairs, but got int"),
    ([1], TypeError, "ParameterDict update sequence element #0 should be Iterable; isint"),
    ([("a", r.ones(1)), ("b",)], ValueError, "ParameterDict update sequence element #1 has length 1; 2 is required"),
])
def test_parameter_dict_update_errors_name_the_bad_element(bad, error, message):
    pd = _pd("x")
    with pytest.raises(error, match=message):
        pd.update(bad)
    assert list(pd)[0] == "x"


def test_parameter_dict_popitem_setdefault_reversed():
    pd = _pd("a", "b", "c")
    last = pd["c"]
    assert list(reversed(pd)) == ["c", "b", "a"]
    key, value = pd.popitem()
    assert key == "c" and value is last and list(pd) == ["a", "b"]
    p = nn.Parameter(r.ones(2))
    assert pd.setdefault("d", p) is p and pd["d"] is p
    assert pd.setdefault("d", nn.Parameter(r.zeros(2))) is p
    assert pd.setdefault("e") is None and "e" in pd
    with pytest.raises(KeyError):
        nn.ParameterDict().popitem()


def test_parameter_dict_copy_fromkeys_and_union_share_parameters():
    pd = _pd("a", "b")
    cp = pd.copy()
    assert type(cp) is nn.ParameterDict and list(cp) == ["a", "b"] and cp["a"] is pd["a"]
    cp["c"] = r.ones(1)
    assert "c" not in pd
    p = nn.Parameter(r.ones(1))
    fk = pd.fromkeys(["x", "y"], p)
    assert type(fk) is nn.ParameterDict and fk["x"] is p and fk["y"] is p
    other = _pd("b", "z")
    both = pd | other
    assert list(both) == ["a", "b", "z"] and both["b"] is other["b"] and pd["b"] is not other["b"]
    back = other | pd
    assert list(back) == ["b", "z", "a"] and back["b"] is pd["b"]
    same = pd
    pd |= other
    assert pd is same and list(pd) == ["a", "b", "z"]


@pytest.mark.parametrize("make", [
    lambda: nn.ParameterList([nn.Parameter(r.randn(2, 2)), nn.Parameter(r.randn(2))]),
    lambda: nn.ParameterDict({"a": nn.Parameter(r.randn(2, 2)), "b": nn.Parameter(r.randn(2))}),
    lambda: nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)),
])
def test_replicate_for_data_parallel_is_a_shallow_replica_without_parameters(make):
    m = make()
    rep = m._replicate_for_data_parallel()
    assert type(rep) is type(m) and rep is not m and rep._is_replica is True
    assert not hasattr(m, "_is_replica")
    assert rep._parameters == {} and len(m._parameters) == len(dict(m.named_parameters(recurse=False)))
    assert rep._modules == m._modules and rep._modules is not m._modules
    assert rep._buffers == m._buffers and rep._buffers is not m._buffers
    assert all(a is b for a, b in zip(rep.children(), m.children()))
    for name, p in m.named_parameters(recurse=False):
        setattr(rep, name, p.view_as(p))
        got = getattr(rep, name)
        assert got._base is p and got.grad_fn is not None and r.equal(got, p)
    assert len(list(rep.parameters(recurse=False))) == 0  # views are plain attributes there


class _Identity(r.autograd.Function):
    @staticmethod
    def forward(ctx, *args):
        return args

    @staticmethod
    def backward(ctx, *grads):
        return grads


def test_inplace_on_an_input_returned_as_is_names_the_function_class():
    x = r.rand(3, requires_grad=True).clone()
    y, = _Identity.apply(x)
    with pytest.raises(RuntimeError, match="^Output 0 of _Identity is a view and is being modified inplace. This view "
                       "was created inside a custom Function"):
        y += 1
    a, b = _Identity.apply(x.clone(), x.clone())
    multi = ("^Output 0 of _Identity is a view and is being modified inplace. This view is the output of a function "
             "that returns multiple views. Such functions do not allow the output views to be modified inplace. You "
             "should replace the inplace operation by an out-of-place one.$")
    with pytest.raises(RuntimeError, match=multi):
        a.add_(1)
    x2 = r.rand(3, requires_grad=True).clone()
    y2, = _Identity.apply(x2)
    x2.mul_(2)
    with pytest.raises(RuntimeError, match="^Output 0 of _Identity is a view and its base or another view of its base "
                       "has been modified inplace. This view was created inside a custom Function .* You can fix this "
                       "by cloning the output of the custom Function.$"):
        y2 * 3


def test_inplace_on_a_hooked_module_input_names_backward_hook_function():
    class AddsInPlace(nn.Module):
        def forward(self, a):
            a += 1
            return a

    m = AddsInPlace()
    m.register_full_backward_hook(lambda *a: None)
    x = r.rand(2, requires_grad=True).clone()
    with pytest.raises(RuntimeError, match="^Output 0 of BackwardHookFunction is a view and is being modified inplace"):
        m(x)
    m2 = nn.Linear(2, 2)
    m2.register_full_backward_hook(lambda *a: None)
    assert m2(x).grad_fn.name() == "BackwardHookFunctionBackward"


def test_using_an_input_returned_as_is_after_its_base_changed_raises_in_grad_mode_only():
    x = r.rand(3, requires_grad=True).clone()
    w = r.rand(3, requires_grad=True).clone()
    a, b = _Identity.apply(x, w)
    assert r.equal((a * 2).detach(), x.detach() * 2)  # unchanged base: usable
    w.mul_(2)
    with pytest.raises(RuntimeError, match="^Output 1 of _Identity is a view and its base or another view of its base "
                       "has been modified inplace. This view is the output of a function that returns multiple views. "
                       "Such functions do not allow the output views to be modified inplace."):
        b + 1
    a + 1  # the other output's base is unchanged
    with r.no_grad():
        b + 1  # torch checks only when it records the op
    b.detach() + 1


def test_hooked_module_input_cannot_be_used_after_its_base_changed():
    class KeepsInput(nn.Module):
        def forward(self, a):
            self.inp = a
            return a.clone()

    m = KeepsInput()
    m.register_full_backward_pre_hook(lambda *a: None)
    x = r.rand(4, requires_grad=True).clone()
    m(x).sum().backward()
    m.inp + 2  # fine while x is unchanged
    x[0] *= 1
    with pytest.raises(RuntimeError, match="^Output 0 of BackwardHookFunction is a view and its base or another view"):
        m.inp + 2
