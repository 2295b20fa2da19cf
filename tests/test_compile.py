"""rlpipe.compile: torch.compile's signature and wrapping (a function unchanged, a Module in an
OptimizedModule whose state_dict keys start with ``_orig_mod.``), running eagerly."""
import inspect

import pytest

import rlpipe as r
from rlpipe.nn._compile import OptimizedModule


def test_signature_is_torch_compiles():
    # torch 2.13's torch.compile, parameter by parameter
    params = inspect.signature(r.compile).parameters
    assert [(p.name, p.kind.name, p.default) for p in params.values()] == [
        ("model", "POSITIONAL_OR_KEYWORD", None), ("fullgraph", "KEYWORD_ONLY", False),
        ("dynamic", "KEYWORD_ONLY", None), ("backend", "KEYWORD_ONLY", "inductor"), ("mode", "KEYWORD_ONLY", None),
        ("options", "KEYWORD_ONLY", None), ("name", "KEYWORD_ONLY", None), ("disable", "KEYWORD_ONLY", False),
        ("recompile_limit", "KEYWORD_ONLY", None), ("isolate_recompiles", "KEYWORD_ONLY", False),
        ("shapes_spec", "KEYWORD_ONLY", None)]
    assert "eager" in r.compile.__doc__


def test_functions_come_back_unchanged_with_or_without_decorator_arguments():
    def double(x):
        return x * 2

    assert r.compile(double) is double
    assert r.compile(double, backend="eager", fullgraph=True, dynamic=False) is double

    @r.compile
    def plus_one(x):
        return x + 1

    @r.compile(mode="max-autotune")
    def times_three(x):
        return x * 3

    assert plus_one(r.tensor([1.0])).tolist() == [2.0]
    assert times_three(r.tensor([2.0])).tolist() == [6.0]
    assert r.compile(options={"epilogue_fusion": True})(double) is double


def test_a_module_is_wrapped_and_works_as_before():
    r.manual_seed(0)
    linear = r.nn.Linear(2, 3)
    compiled = r.compile(linear)
    assert isinstance(compiled, OptimizedModule) and isinstance(compiled, r.nn.Module)
    assert compiled._orig_mod is linear
    x = r.randn(4, 2)
    assert r.equal(compiled(x), linear(x))
    assert list(compiled.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    assert [n for n, _ in compiled.named_parameters()] == ["_orig_mod.weight", "_orig_mod.bias"]
    assert compiled.weight is linear.weight and compiled.in_features == 2  # attributes read through
    compiled.tag = "policy"  # and written through
    assert linear.tag == "policy"
    compiled.eval()
    assert linear.training is False and compiled.training is False
    assert repr(compiled) == "OptimizedModule(\n  (_orig_mod): Linear(in_features=2, out_features=3, bias=True)\n)"


def test_gradients_and_state_dicts_flow_through_the_wrapper():
    r.manual_seed(1)
    compiled = r.compile(r.nn.Sequential(r.nn.Linear(2, 2), r.nn.Tanh()))
    assert len(compiled) == 2
    compiled(r.randn(3, 2)).sum().backward()
    assert compiled._orig_mod[0].weight.grad is not None
    other = r.compile(r.nn.Sequential(r.nn.Linear(2, 2), r.nn.Tanh()))
    other.load_state_dict(compiled.state_dict())
    assert r.equal(other._orig_mod[0].weight, compiled._orig_mod[0].weight)


def test_hooks_on_the_original_module_still_run():
    linear = r.nn.Linear(2, 2)
    seen = []
    linear.register_forward_hook(lambda module, args, out: seen.append(module))
    r.compile(linear)(r.zeros(1, 2))
    assert seen == [linear]


def test_disable_returns_the_module_itself_and_bad_arguments_raise():
    linear = r.nn.Linear(2, 2)
    assert r.compile(linear, disable=True) is linear
    with pytest.raises(RuntimeError, match="Either mode or options can be specified"):
        r.compile(linear, mode="default", options={})
    with pytest.raises(TypeError, match="A callable function is expected, but <class 'int'> is provided"):
        r.compile(3)
    with pytest.raises(RuntimeError, match="Model can't be None"):
        r.compile()(None)
