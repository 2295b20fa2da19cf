"""Module behaviour that PyTorch's own nn test files check, as torch 2.13 behaves (measured there):
rlpipe.__future__'s conversion switches."""
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
