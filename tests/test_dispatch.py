"""``rlpipe._dispatch.torch_function``: the one ``__torch_function__`` check the ops declare.

A container type answers an rlpipe function called with it; the hook gets the function's own
arguments, defaults included, positional ones in ``args`` and keyword-only ones in ``kwargs``."""
import inspect

import pytest

import rlpipe
from rlpipe._dispatch import torch_function


class Recorder:
    """A container whose hook answers every call with what it received."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return func, types, args, kwargs


R = Recorder()
X = rlpipe.ones(2, 3)
INDEX = rlpipe.tensor([[0]])

CASES = {  # name: (call, the function the hook should see, its args, its kwargs)
    "sum": (lambda: rlpipe.sum(R), rlpipe.sum, (R, None, False), {"dtype": None, "out": None}),
    "var": (lambda: rlpipe.var(R, 1, correction=0), rlpipe.var, (R, 1, None, False), {"correction": 0}),
    "cat": (lambda: rlpipe.cat([R, R], 1), rlpipe.cat, ([R, R], 1), {"out": None}),
    "permute": (lambda: rlpipe.permute(R, 1, 0), rlpipe.permute, (R, 1, 0), {}),
    "where": (lambda: rlpipe.where(INDEX, R, 0.0), rlpipe.where, (INDEX, R, 0.0), {"out": None}),
    "maximum": (lambda: rlpipe.maximum(X, R), rlpipe.maximum, (X, R), {}),
    "gather": (lambda: rlpipe.gather(R, 0, INDEX), rlpipe.gather, (R, 0, INDEX), {"sparse_grad": False, "out": None}),
    "atleast_2d": (lambda: rlpipe.atleast_2d(R), rlpipe.atleast_2d, (R,), {}),
    "clone": (lambda: rlpipe.clone(R), rlpipe.clone, (R,), {"memory_format": rlpipe.preserve_format}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_hook_gets_the_public_function_and_its_arguments(name):
    call, func, args, kwargs = CASES[name]
    got_func, types, got_args, got_kwargs = call()
    assert got_func is func and types == (Recorder,) and got_kwargs == kwargs
    assert len(got_args) == len(args) and all(a is b or a == b for a, b in zip(got_args, args))


def test_a_method_is_the_function_itself_unless_another_operand_may_be_a_container():
    assert rlpipe.Tensor.sum is rlpipe.sum.__wrapped__
    assert rlpipe.Tensor.unsqueeze is rlpipe.unsqueeze.__wrapped__
    assert X.maximum(R)[0] is rlpipe.maximum  # maximum's other operand goes through the check
    assert X.sum().item() == 6.0 and rlpipe.sum(X, 1).tolist() == [3.0, 3.0]


def test_the_checking_function_keeps_the_signature_name_and_errors():
    assert rlpipe.sum.__name__ == "sum" and rlpipe.sum.__module__ == "rlpipe.primitives.reductions"
    assert inspect.signature(rlpipe.sum) == inspect.signature(rlpipe.sum.__wrapped__)
    with pytest.raises(TypeError, match=r"sum\(\) got an unexpected keyword argument 'axis'"):
        rlpipe.sum(X, axis=0)


def test_torch_function_on_every_kind_of_parameter():
    @torch_function("a", "b")
    def f(a, b=2, *rest, c, d=4, **more):
        return a, b, rest, c, d, more

    assert f(1, c=3) == (1, 2, (), 3, 4, {})
    assert f(1, 5, 6, c=3, e=7) == (1, 5, (6,), 3, 4, {"e": 7})
    assert f(1, R, 6, c=3, e=7) == (f, (Recorder,), (1, R, 6), {"c": 3, "d": 4, "e": 7})
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'c'"):
        f(1)
    with pytest.raises(ValueError, match="f has no argument named 'z'"):
        torch_function("z")(f.__wrapped__)
