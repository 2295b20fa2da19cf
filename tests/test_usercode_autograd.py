"""``torch.autograd.functional`` (vjp, jvp, jacobian) and the graph's shape as PyTorch's autograd tutorial
prints it (``2 * b`` lists ``b`` first; a leaf's ``AccumulateGrad`` ends the walk). Values recorded from
torch 2.13.0."""
import numpy as np
import pytest

import rlpipe
from rlpipe.autograd.functional import jacobian, jvp, vjp


def exp_adder(x, y):
    return 2 * x.exp() + 3 * y


def doubling(x):
    y = x * 2
    while y.data.norm() < 1000:
        y = y * 2
    return y


def test_jacobian_of_two_inputs():
    jx, jy = jacobian(exp_adder, (rlpipe.tensor([0.5]), rlpipe.tensor([0.2])))
    assert jx.tolist() == [[pytest.approx(3.2974425)]] and jy.tolist() == [[3.0]]
    jx, jy = jacobian(exp_adder, (rlpipe.tensor([0.1, 0.2, 0.3]), rlpipe.tensor([1.0, 2, 3])))
    np.testing.assert_allclose(jx.numpy(), np.diag([2.2103418, 2.4428055, 2.6997175]), rtol=1e-6)
    assert jy.tolist() == [[3.0, 0, 0], [0, 3.0, 0], [0, 0, 3.0]]


def test_jacobian_shapes_for_tuple_outputs_matrix_inputs_and_unused_inputs():
    square, total = jacobian(lambda x: (x ** 2, x.sum()), rlpipe.tensor([1.0, 2.0]))
    assert square.tolist() == [[2.0, 0.0], [0.0, 4.0]] and total.tolist() == [1.0, 1.0]
    j = jacobian(lambda x: x[0] * x[1], rlpipe.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert j.tolist() == [[[3.0, 0.0], [1.0, 0.0]], [[0.0, 4.0], [0.0, 2.0]]]
    jx, jy = jacobian(lambda x, y: x * 2, (rlpipe.tensor([1.0]), rlpipe.tensor([1.0])))
    assert jx.tolist() == [[2.0]] and jy.tolist() == [[0.0]]


def test_vjp():
    out, product = vjp(doubling, rlpipe.tensor([1.0, -2.0, 0.5]), v=rlpipe.tensor([0.1, 1.0, 0.0001]))
    assert out.tolist() == [512.0, -1024.0, 256.0] and not out.requires_grad
    np.testing.assert_allclose(product.numpy(), [51.2, 512.0, 0.0512], rtol=1e-6)
    out, product = vjp(lambda x: (x ** 2).sum(), rlpipe.tensor([1.0, 2.0]))
    assert out.item() == 5.0 and product.tolist() == [2.0, 4.0]
    out, (ga, gb) = vjp(lambda a, b: a * b, (rlpipe.tensor([1.0, 2.0]), rlpipe.tensor([3.0, 4.0])),
                        v=rlpipe.tensor([1.0, 1.0]))
    assert out.tolist() == [3.0, 8.0] and ga.tolist() == [3.0, 4.0] and gb.tolist() == [1.0, 2.0]


def test_jvp():
    out, product = jvp(lambda x: x ** 2, rlpipe.tensor([1.0, 2.0]), v=rlpipe.tensor([1.0, 0.5]))
    assert out.tolist() == [1.0, 4.0] and product.tolist() == [2.0, 2.0]


def test_bad_calls():
    with pytest.raises(RuntimeError, match="The vector v can only be None if the user-provided function returns a "
                                           "single Tensor with a single element."):
        vjp(lambda x: x ** 2, rlpipe.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors but the given outputs of the "
                                        "user-provided function has type <class 'int'>"):
        jacobian(lambda x: 3, rlpipe.tensor([1.0]))
    with pytest.raises(RuntimeError, match=r"vjp: v has shapes \[\[3\]\] but the outputs have shapes \[\[2\]\]"):
        vjp(lambda x: x * 2, rlpipe.tensor([1.0, 2.0]), v=rlpipe.zeros(3))


def test_reflected_add_and_mul_list_the_tensor_first_and_leaves_end_the_walk():
    a = rlpipe.linspace(0.0, 1.0, steps=5, requires_grad=True)
    d = 2 * rlpipe.sin(a) + 1
    # torch 2.13: ((MulBackward0, 0), (None, 0)), then ((SinBackward0, 0), (None, 0)), then AccumulateGrad, then ()
    mul, none = d.grad_fn.next_functions
    assert mul[0].name() == "MulBackward0" and none == (None, 0)
    sin, none = mul[0].next_functions
    assert sin[0].name() == "SinBackward0" and none == (None, 0)
    (leaf, _), = sin[0].next_functions
    assert leaf.name() == "AccumulateGrad" and leaf.next_functions == ()
    assert (3.0 * a).tolist() == (a * 3.0).tolist()
    assert isinstance(np.ones(5) + a, rlpipe.Tensor)  # an ndarray on the left still defers to the tensor


def _work(z, x, y, steps=10):
    for _ in range(steps):
        with rlpipe.autograd.profiler.record_function("step"):
            z = (z / x) * y
    return z


def test_profiler_counts_ops_and_labels_and_nests_self_time():
    from rlpipe.autograd.profiler import profile
    x, y = rlpipe.randn(2, 3, requires_grad=True), rlpipe.rand(2, 3, requires_grad=True)
    with profile() as prof:
        _work(rlpipe.ones(2, 3, requires_grad=True), x, y)
    events = {e.key: e for e in prof.key_averages()}
    # the tutorial's loop: torch 2.13 counts 10 divisions and 10 multiplications (aten::div, aten::mul)
    assert events["rlpipe::Div"].count == 10 and events["rlpipe::Mul"].count == 10 and events["step"].count == 10
    step = events["step"]
    children = events["rlpipe::Div"].cpu_time_total + events["rlpipe::Mul"].cpu_time_total
    assert step.cpu_time_total >= children
    assert step.self_cpu_time_total == pytest.approx(step.cpu_time_total - children)
    table = prof.key_averages().table(sort_by="self_cpu_time_total")
    assert "rlpipe::Div" in table and "# of Calls" in table and "Self CPU time total:" in table


def test_profiler_records_nothing_outside_and_restores_apply_after_an_error():
    from rlpipe.autograd import Function
    from rlpipe.autograd.profiler import profile, record_function
    plain = Function.__dict__["apply"]
    with pytest.raises(RuntimeError):
        with profile() as prof:
            rlpipe.ones(2) @ rlpipe.ones(3)  # a failing op still closes its event
    assert Function.__dict__["apply"] is plain
    assert [e.count for e in prof.key_averages()] == [1]
    rlpipe.ones(2) * 2  # after the profile: not recorded
    assert [e.count for e in prof.key_averages()] == [1]

    @record_function("labelled")
    def double(t):
        return t * 2
    with profile() as prof:
        double(rlpipe.ones(2))
    assert {e.key for e in prof.key_averages()} == {"labelled", "rlpipe::Mul"}


def test_profiler_bad_use():
    from rlpipe.autograd.profiler import profile
    with profile() as prof:
        with pytest.raises(RuntimeError, match="Profiler is already enabled on this thread"):
            with profile():
                pass
    with pytest.raises(ValueError, match="sort_by must be one of"):
        prof.key_averages().table(sort_by="self_cuda_time_total")
