"""rlpipe.nn.Module and the containers, checked against torch 2.x's documented behaviour.

Every expected value here was written by hand from torch's documentation and source semantics
(registration order, dotted names, hook order in ``_call_impl``, error messages with ``torch``
spelled ``rlpipe``); rlpipe is never compared with itself. The modules are small classes defined
in this file, so the tests do not depend on the layer implementations.
"""
import copy
import re
import warnings
from collections import OrderedDict

import pytest

import rlpipe
from rlpipe import nn
from rlpipe.nn import Buffer, Parameter
from rlpipe.nn.modules import module as module_mod

# ---------------------------------------------------------------------------------------------
# helpers and small modules
# ---------------------------------------------------------------------------------------------
_GLOBAL_HOOK_TABLES = ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_backward_pre_hooks",
                       "_global_backward_hooks")


@pytest.fixture(autouse=True)
def no_leaked_global_hooks():
    """Global module hooks apply to every module: a test that forgets to remove one must fail here
    (and must not break the tests that follow)."""
    yield
    leaked = []
    for name in _GLOBAL_HOOK_TABLES:
        table = getattr(module_mod, name, None)
        if table:
            leaked.append(name)
            table.clear()
    assert not leaked, f"global hooks left registered: {leaked}"


def t(values, dtype=None, requires_grad=False):
    return rlpipe.tensor(values, dtype=dtype, requires_grad=requires_grad)


def keyerror_message(excinfo):
    """KeyError's str() is the repr of its message; compare the message itself."""
    return excinfo.value.args[0]


class Leaf(nn.Module):
    """y = x * w, with one persistent buffer."""

    def __init__(self, n=2):
        super().__init__()
        self.w = Parameter(rlpipe.ones(n))
        self.register_buffer("running", rlpipe.zeros(n))

    def forward(self, x):
        return x * self.w


class Affine(nn.Module):
    """y = 2 * x + w: dy/dx = 2, dy/dw = 1."""

    def __init__(self, n=3):
        super().__init__()
        self.w = Parameter(rlpipe.zeros(n))

    def forward(self, x):
        return 2 * x + self.w


class Parent(nn.Module):
    """Registers, in this order: parameter a, buffer count, child, parameter b."""

    def __init__(self):
        super().__init__()
        self.a = Parameter(t([1.0]))
        self.register_buffer("count", t([0], dtype=rlpipe.int64))
        self.child = Leaf()
        self.b = Parameter(t([2.0]))

    def forward(self, x):
        return self.child(x) * self.a + self.b


class Empty(nn.Module):
    def forward(self, x):
        return x


# ---------------------------------------------------------------------------------------------
# registration by attribute assignment
# ---------------------------------------------------------------------------------------------
def test_attribute_assignment_registers_parameters_modules_and_buffers():
    m = Parent()
    assert list(m._parameters) == ["a", "b"]
    assert list(m._modules) == ["child"]
    assert list(m._buffers) == ["count"]
    assert isinstance(m.a, Parameter) and m.a.requires_grad
    assert m.child.__class__ is Leaf
    # registered members live in their tables, not in the instance __dict__
    for name in ("a", "b", "child", "count"):
        assert name not in m.__dict__
    assert m.training is True


def test_plain_tensor_attribute_is_not_registered():
    m = Empty()
    m.cache = rlpipe.zeros(2)
    assert "cache" in m.__dict__
    assert list(m.parameters()) == [] and list(m.buffers()) == []
    assert "cache" not in m.state_dict()


def test_buffer_wrapper_registers_buffers():
    m = Empty()
    data = t([1.0, 2.0])
    m.keep = Buffer(data)
    m.scratch = Buffer(rlpipe.zeros(3), persistent=False)
    assert list(m._buffers) == ["keep", "scratch"]
    assert m._non_persistent_buffers_set == {"scratch"}
    assert isinstance(m.keep, rlpipe.Tensor) and not isinstance(m.keep, Parameter)
    assert [name for name, _ in m.named_buffers()] == ["keep", "scratch"]
    assert list(m.state_dict()) == ["keep"]
    # the buffer shares memory with the tensor it wraps (Buffer detaches, it does not copy)
    data.add_(1.0)
    assert m.keep.tolist() == [2.0, 3.0]


def test_assigning_tensor_to_existing_buffer_keeps_its_persistence():
    m = Empty()
    m.register_buffer("tmp", rlpipe.zeros(2), persistent=False)
    m.tmp = rlpipe.ones(2)
    assert m.tmp.tolist() == [1.0, 1.0]
    assert "tmp" in m._buffers and "tmp" in m._non_persistent_buffers_set
    assert "tmp" not in m.__dict__
    m.tmp = None
    assert "tmp" in m._buffers and m.tmp is None
    assert list(m.buffers()) == []


def test_assigning_before_super_init_raises_attribute_error():
    class ParamFirst(nn.Module):
        def __init__(self):
            self.w = Parameter(rlpipe.zeros(1))
            super().__init__()

    class ModuleFirst(nn.Module):
        def __init__(self):
            self.sub = Empty()
            super().__init__()

    class BufferFirst(nn.Module):
        def __init__(self):
            self.buf = Buffer(rlpipe.zeros(1))
            super().__init__()

    class RegisterBufferFirst(nn.Module):
        def __init__(self):
            self.register_buffer("buf", rlpipe.zeros(1))
            super().__init__()

    class RegisterParameterFirst(nn.Module):
        def __init__(self):
            self.register_parameter("w", Parameter(rlpipe.zeros(1)))
            super().__init__()

    with pytest.raises(AttributeError, match=re.escape("cannot assign parameters before Module.__init__() call")):
        ParamFirst()
    with pytest.raises(AttributeError, match=re.escape("cannot assign module before Module.__init__() call")):
        ModuleFirst()
    with pytest.raises(AttributeError, match=re.escape("cannot assign buffer before Module.__init__() call")):
        BufferFirst()
    with pytest.raises(AttributeError, match=re.escape("cannot assign buffer before Module.__init__() call")):
        RegisterBufferFirst()
    with pytest.raises(AttributeError, match=re.escape("cannot assign parameter before Module.__init__() call")):
        RegisterParameterFirst()


def test_assigning_plain_tensor_to_parameter_slot_raises_type_error():
    m = Affine()
    # torch names the tensor type ('torch.FloatTensor'); rlpipe says 'rlpipe.Tensor': either spelling is fine
    with pytest.raises(TypeError, match=r"cannot assign 'rlpipe\.\w*Tensor' as parameter 'w' "
                                        r"\(rlpipe\.nn\.Parameter or None expected\)"):
        m.w = rlpipe.zeros(3)
    assert isinstance(m.w, Parameter)  # unchanged
    # None is allowed: the parameter stays declared but absent
    m.w = None
    assert "w" in m._parameters and m.w is None
    assert list(m.parameters()) == [] and list(m.state_dict()) == []


def test_assigning_wrong_types_to_module_and_buffer_slots():
    m = Parent()
    with pytest.raises(TypeError, match=r"cannot assign 'int' as child module 'child'"):
        m.child = 3
    with pytest.raises(TypeError, match=r"cannot assign 'int' as buffer 'count'"):
        m.count = 3
    m.child = None
    assert "child" in m._modules and m.child is None
    assert list(m.children()) == []


def test_reassignment_moves_a_name_between_tables():
    m = Parent()
    m.count = Parameter(t([5.0]))  # was a buffer
    assert "count" not in m._buffers and "count" in m._parameters
    m.child = Parameter(t([1.0]))  # was a module
    assert "child" not in m._modules and "child" in m._parameters
    assert [n for n, _ in m.named_parameters()] == ["a", "b", "count", "child"]
    # a parameter slot only takes a Parameter or None: even a Module is refused until it is deleted
    with pytest.raises(TypeError, match="as parameter 'a'"):
        m.a = Empty()
    del m.a
    m.a = Empty()
    assert "a" not in m._parameters and m._modules["a"] is m.a


def test_getattr_and_delattr():
    m = Parent()
    assert m.a is m._parameters["a"]
    assert m.count is m._buffers["count"]
    assert m.child is m._modules["child"]
    with pytest.raises(AttributeError, match="'Parent' object has no attribute 'nope'"):
        _ = m.nope
    del m.a
    assert "a" not in m._parameters and not hasattr(m, "a")
    m.register_buffer("tmp", rlpipe.zeros(1), persistent=False)
    del m.tmp
    assert "tmp" not in m._buffers and "tmp" not in m._non_persistent_buffers_set
    del m.count
    del m.child
    assert list(m._buffers) == [] and list(m._modules) == []
    m.plain = 1
    del m.plain
    assert not hasattr(m, "plain")
    with pytest.raises(AttributeError):
        del m.never_existed
    # a name freed by del can be reused for any kind of member
    m.a = Empty()
    assert list(m._modules) == ["a"]


def test_dir_lists_members_and_skips_numeric_names():
    m = Parent()
    m.plain = 1
    names = dir(m)
    for expected in ("a", "b", "child", "count", "plain", "forward", "state_dict", "training", "_parameters"):
        assert expected in names
    assert names == sorted(names)
    seq = nn.Sequential(Empty(), Empty())
    assert "0" not in dir(seq) and "1" not in dir(seq)
    assert "append" in dir(seq)


# ---------------------------------------------------------------------------------------------
# add_module / register_module / register_parameter / register_buffer
# ---------------------------------------------------------------------------------------------
def test_add_module_and_register_module():
    m = Empty()
    a, b = Empty(), Empty()
    m.add_module("a", a)
    m.register_module("b", b)
    m.add_module("none", None)
    assert m.a is a and m.b is b and m.none is None
    assert list(m._modules) == ["a", "b", "none"]
    assert list(m.children()) == [a, b]
    m.add_module("a", b)  # re-adding an existing child name replaces it
    assert m.a is b


def test_add_module_errors():
    m = Empty()
    m.plain = 1
    with pytest.raises(KeyError) as e:
        m.add_module("a.b", Empty())
    assert keyerror_message(e) == 'module name can\'t contain ".", got: a.b'
    with pytest.raises(KeyError) as e:
        m.add_module("", Empty())
    assert keyerror_message(e) == 'module name can\'t be empty string ""'
    with pytest.raises(KeyError) as e:
        m.add_module("plain", Empty())
    assert keyerror_message(e) == "attribute 'plain' already exists"
    with pytest.raises(KeyError) as e:
        m.add_module("forward", Empty())
    assert keyerror_message(e) == "attribute 'forward' already exists"
    with pytest.raises(TypeError, match="module name should be a string. Got int"):
        m.add_module(1, Empty())
    with pytest.raises(TypeError, match="int is not a Module subclass"):
        m.add_module("x", 3)
    with pytest.raises(TypeError, match="is not a Module subclass"):
        m.register_module("x", rlpipe.zeros(1))
    assert list(m._modules) == []


def test_register_parameter():
    m = Empty()
    p = Parameter(t([1.0]))
    m.register_parameter("p", p)
    m.register_parameter("absent", None)
    assert m.p is p and m.absent is None
    assert list(m.parameters()) == [p]
    assert list(m.state_dict()) == ["p"]


def test_register_parameter_errors():
    m = Empty()
    m.plain = 1
    with pytest.raises(KeyError) as e:
        m.register_parameter("a.b", Parameter(rlpipe.zeros(1)))
    assert keyerror_message(e) == 'parameter name can\'t contain "."'
    with pytest.raises(KeyError) as e:
        m.register_parameter("", Parameter(rlpipe.zeros(1)))
    assert keyerror_message(e) == 'parameter name can\'t be empty string ""'
    with pytest.raises(KeyError) as e:
        m.register_parameter("plain", Parameter(rlpipe.zeros(1)))
    assert keyerror_message(e) == "attribute 'plain' already exists"
    with pytest.raises(TypeError, match="parameter name should be a string. Got int"):
        m.register_parameter(3, Parameter(rlpipe.zeros(1)))
    with pytest.raises(TypeError, match=r"cannot assign 'rlpipe\.\w*Tensor' object to parameter 'p' "
                                        r"\(rlpipe\.nn\.Parameter or None required\)"):
        m.register_parameter("p", rlpipe.zeros(1))
    assert list(m._parameters) == []


def test_register_buffer_persistence():
    m = Empty()
    m.register_buffer("kept", t([1.0]))
    m.register_buffer("dropped", t([2.0]), persistent=False)
    m.register_buffer("absent", None)
    assert [n for n, _ in m.named_buffers()] == ["kept", "dropped"]
    assert list(m.state_dict()) == ["kept"]
    assert m.absent is None
    # registering again under the same name may switch persistence
    m.register_buffer("dropped", t([3.0]), persistent=True)
    assert list(m.state_dict()) == ["kept", "dropped"]
    m.register_buffer("kept", t([4.0]), persistent=False)
    assert list(m.state_dict()) == ["dropped"]


def test_register_buffer_errors():
    m = Empty()
    m.plain = 1
    with pytest.raises(KeyError) as e:
        m.register_buffer("a.b", rlpipe.zeros(1))
    assert keyerror_message(e) == 'buffer name can\'t contain "."'
    with pytest.raises(KeyError) as e:
        m.register_buffer("", rlpipe.zeros(1))
    assert keyerror_message(e) == 'buffer name can\'t be empty string ""'
    with pytest.raises(KeyError) as e:
        m.register_buffer("plain", rlpipe.zeros(1))
    assert keyerror_message(e) == "attribute 'plain' already exists"
    with pytest.raises(TypeError, match="buffer name should be a string. Got int"):
        m.register_buffer(3, rlpipe.zeros(1))
    with pytest.raises(TypeError, match=r"cannot assign 'int' object to buffer 'b'"):
        m.register_buffer("b", 5)
    assert list(m._buffers) == []


# ---------------------------------------------------------------------------------------------
# get_submodule / set_submodule / get_parameter / get_buffer
# ---------------------------------------------------------------------------------------------
class NetC(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = Leaf(3)


class NetB(nn.Module):
    def __init__(self):
        super().__init__()
        self.net_c = NetC()
        self.linear = Leaf(4)
        self.w = Parameter(rlpipe.zeros(1))
        self.register_buffer("buf", rlpipe.zeros(1))
        self.plain = 5


class A(nn.Module):
    def __init__(self):
        super().__init__()
        self.net_b = NetB()


def test_get_submodule():
    a = A()
    assert a.get_submodule("") is a
    assert a.get_submodule("net_b") is a.net_b
    assert a.get_submodule("net_b.linear") is a.net_b.linear
    assert a.get_submodule("net_b.net_c.conv") is a.net_b.net_c.conv
    with pytest.raises(AttributeError) as e:
        a.get_submodule("net_b.missing")
    assert str(e.value) == "NetB has no attribute `missing`"
    with pytest.raises(AttributeError) as e:
        a.get_submodule("nope.linear")
    assert str(e.value) == "A has no attribute `nope`"
    with pytest.raises(AttributeError) as e:
        a.get_submodule("net_b.w")
    assert str(e.value) == "`w` is not an nn.Module"
    with pytest.raises(AttributeError) as e:
        a.get_submodule("net_b.plain.x")
    assert str(e.value) == "`plain` is not an nn.Module"


def test_set_submodule():
    a = A()
    new_c = NetC()
    a.set_submodule("net_b.net_c", new_c)
    assert a.net_b.net_c is new_c
    new_conv = Leaf(5)
    a.set_submodule("net_b.net_c.conv", new_conv, strict=True)
    assert a.get_submodule("net_b.net_c.conv") is new_conv
    added = Empty()
    a.set_submodule("net_b.extra", added)  # strict=False may add a new child
    assert a.net_b.extra is added and list(a.net_b._modules)[-1] == "extra"
    with pytest.raises(AttributeError) as e:
        a.set_submodule("net_b.other", Empty(), strict=True)
    assert str(e.value) == "NetB has no attribute `other`"
    with pytest.raises(AttributeError) as e:
        a.set_submodule("net_b.w", Empty())
    assert str(e.value) == "`w` is not an nn.Module"
    with pytest.raises(AttributeError) as e:
        a.set_submodule("nope.x", Empty())
    assert str(e.value) == "A has no attribute `nope`"
    with pytest.raises(ValueError, match="Cannot set the submodule without a target name!"):
        a.set_submodule("", Empty())
    with pytest.raises(ValueError, match="is not an nn.Module"):
        a.set_submodule("net_b.linear", 3)


def test_get_parameter():
    a = A()
    assert a.get_parameter("net_b.w") is a.net_b.w
    assert a.get_parameter("net_b.net_c.conv.w") is a.net_b.net_c.conv.w
    with pytest.raises(AttributeError) as e:
        a.get_parameter("net_b.nope")
    assert str(e.value) == "NetB has no attribute `nope`"
    with pytest.raises(AttributeError) as e:
        a.get_parameter("net_b.buf")
    assert str(e.value) == "`buf` is not an nn.Parameter"
    with pytest.raises(AttributeError) as e:
        a.get_parameter("net_b.net_c")
    assert str(e.value) == "`net_c` is not an nn.Parameter"
    with pytest.raises(AttributeError) as e:
        a.get_parameter("missing.w")
    assert str(e.value) == "A has no attribute `missing`"


def test_get_buffer():
    a = A()
    assert a.get_buffer("net_b.buf") is a.net_b.buf
    assert a.get_buffer("net_b.linear.running") is a.net_b.linear.running
    with pytest.raises(AttributeError) as e:
        a.get_buffer("net_b.nope")
    assert str(e.value) == "NetB has no attribute `nope`"
    with pytest.raises(AttributeError) as e:
        a.get_buffer("net_b.w")
    assert str(e.value) == "`w` is not a buffer"
    with pytest.raises(AttributeError) as e:
        a.get_buffer("net_b.plain")
    assert str(e.value) == "`plain` is not a buffer"


# ---------------------------------------------------------------------------------------------
# iteration
# ---------------------------------------------------------------------------------------------
def test_parameters_and_named_parameters_in_registration_order():
    m = Parent()
    # own parameters first (a, b), then the child's, whatever the interleaving of registrations
    assert [n for n, _ in m.named_parameters()] == ["a", "b", "child.w"]
    assert list(m.parameters()) == [m.a, m.b, m.child.w]
    assert [n for n, _ in m.named_parameters(recurse=False)] == ["a", "b"]
    assert list(m.parameters(recurse=False)) == [m.a, m.b]
    assert [n for n, _ in m.named_parameters(prefix="model")] == ["model.a", "model.b", "model.child.w"]
    assert [n for n, _ in m.named_parameters(prefix="model", recurse=False)] == ["model.a", "model.b"]


def test_buffers_and_named_buffers():
    m = Parent()
    m.register_buffer("scratch", rlpipe.zeros(1), persistent=False)
    assert [n for n, _ in m.named_buffers()] == ["count", "scratch", "child.running"]
    assert list(m.buffers()) == [m.count, m.scratch, m.child.running]
    assert [n for n, _ in m.named_buffers(recurse=False)] == ["count", "scratch"]
    assert list(m.buffers(recurse=False)) == [m.count, m.scratch]
    assert [n for n, _ in m.named_buffers(prefix="p")] == ["p.count", "p.scratch", "p.child.running"]


class Shared(nn.Module):
    """Ties: the same Parameter under two names, the same Module under two names."""

    def __init__(self):
        super().__init__()
        self.p1 = Parameter(t([1.0]))
        self.p2 = self.p1
        self.c1 = Leaf()
        self.c2 = self.c1
        self.c3 = Empty()
        self.register_buffer("b1", t([0.0]))
        self.b2 = self.b1  # assigning a registered buffer to a new plain name does not register it

    def forward(self, x):
        return x


def test_shared_parameters_and_modules_are_yielded_once():
    m = Shared()
    assert [n for n, _ in m.named_parameters()] == ["p1", "c1.w"]
    assert list(m.parameters()) == [m.p1, m.c1.w]
    assert [n for n, _ in m.named_children()] == ["c1", "c3"]
    assert list(m.children()) == [m.c1, m.c3]
    assert [n for n, _ in m.named_modules()] == ["", "c1", "c3"]
    assert list(m.modules()) == [m, m.c1, m.c3]


def test_remove_duplicate_false_yields_every_name():
    m = Shared()
    assert [n for n, _ in m.named_parameters(remove_duplicate=False)] == ["p1", "p2", "c1.w", "c2.w"]
    assert [n for n, _ in m.named_modules(remove_duplicate=False)] == ["", "c1", "c2", "c3"]
    assert [n for n, _ in m.named_buffers(remove_duplicate=False)] == ["b1", "c1.running", "c2.running"]


def test_named_modules_memo_and_prefix():
    m = Shared()
    assert [n for n, _ in m.named_modules(prefix="root")] == ["root", "root.c1", "root.c3"]
    # modules already in memo (and their subtrees) are skipped
    assert [n for n, _ in m.named_modules(memo={m.c1})] == ["", "c3"]
    memo = set()
    list(m.named_modules(memo=memo))
    assert memo == {m, m.c1, m.c3}
    assert list(m.named_modules(memo={m})) == []


def test_deep_named_modules_order():
    a = A()
    assert [n for n, _ in a.named_modules()] == ["", "net_b", "net_b.net_c", "net_b.net_c.conv", "net_b.linear"]
    assert [n for n, _ in a.named_parameters()] == ["net_b.w", "net_b.net_c.conv.w", "net_b.linear.w"]


# ---------------------------------------------------------------------------------------------
# modes and gradients
# ---------------------------------------------------------------------------------------------
def test_train_and_eval_recurse_and_return_self():
    a = A()
    assert all(m.training for m in a.modules())
    assert a.eval() is a
    assert not any(m.training for m in a.modules())
    assert a.train() is a
    assert all(m.training for m in a.modules())
    assert a.train(False) is a
    assert not any(m.training for m in a.modules())
    a.net_b.train()
    assert a.training is False and a.net_b.training and a.net_b.net_c.conv.training
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        a.train("yes")


def test_requires_grad_():
    m = Parent()
    assert m.requires_grad_(False) is m
    assert [p.requires_grad for p in m.parameters()] == [False, False, False]
    m.child.requires_grad_()
    assert [p.requires_grad for p in m.parameters()] == [False, False, True]
    # buffers are not touched
    assert m.count.requires_grad is False


def _backward_once(m):
    m(rlpipe.ones(2)).sum().backward()


def test_zero_grad_set_to_none_default():
    m = Parent()
    _backward_once(m)
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad()
    assert [p.grad for p in m.parameters()] == [None, None, None]
    m.zero_grad()  # no gradient at all: nothing to do


def test_zero_grad_set_to_none_false_zeroes_in_place():
    m = Parent()
    _backward_once(m)
    old = m.child.w.grad
    m.zero_grad(set_to_none=False)
    for p in m.parameters():
        assert p.grad is not None and p.grad.tolist() == [0.0] * p.numel()
        assert p.grad.requires_grad is False
    assert old.tolist() == [0.0, 0.0]  # the same storage was zeroed


def test_zero_grad_set_to_none_false_keeps_the_grad_tensor_object():
    # torch zeroes p.grad in place (p.grad.zero_()), so a reference to it stays p.grad
    m = Parent()
    _backward_once(m)
    old = m.child.w.grad
    m.zero_grad(set_to_none=False)
    assert m.child.w.grad is old


def test_apply_visits_children_first_and_returns_self():
    a = A()
    order = []
    assert a.apply(lambda mod: order.append(type(mod).__name__)) is a
    # post-order: net_b's children (net_c's child first), then net_b, then a
    assert order == ["Leaf", "NetC", "Leaf", "NetB", "A"]


# ---------------------------------------------------------------------------------------------
# moving and casting
# ---------------------------------------------------------------------------------------------
class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = Parameter(t([1.0, 2.0]))
        self.register_buffer("steps", t([3], dtype=rlpipe.int64))
        self.register_buffer("stat", t([0.5]))
        self.register_buffer("scratch", t([0.25]), persistent=False)
        self.sub = Leaf()

    def forward(self, x):
        return self.sub(x * self.w)


def _dtypes(m):
    return {name: v.dtype for name, v in (*m.named_parameters(), *m.named_buffers())}


def test_to_dtype_changes_only_floating_tensors():
    m = Mixed()
    w = m.w
    assert m.to(rlpipe.float64) is m
    assert _dtypes(m) == {"w": rlpipe.float64, "steps": rlpipe.int64, "stat": rlpipe.float64,
                          "scratch": rlpipe.float64, "sub.w": rlpipe.float64, "sub.running": rlpipe.float64}
    assert m.w is w and isinstance(m.w, Parameter) and m.w.requires_grad
    assert m.w.tolist() == [1.0, 2.0] and m.steps.tolist() == [3]
    m.to(dtype=rlpipe.float16)
    assert m.w.dtype == rlpipe.float16 and m.steps.dtype == rlpipe.int64


def test_to_tensor_and_device_dtype_forms():
    m = Mixed()
    assert m.to(rlpipe.zeros(1, dtype=rlpipe.float64)) is m
    assert m.w.dtype == rlpipe.float64 and m.steps.dtype == rlpipe.int64
    assert m.to("cpu", rlpipe.float32, True) is m
    assert m.w.dtype == rlpipe.float32 and m.w.device == rlpipe.device("cpu")
    assert m.to(device="cpu", dtype=rlpipe.float64, non_blocking=True) is m
    assert m.sub.w.dtype == rlpipe.float64
    assert m.to(rlpipe.device("cpu")) is m
    assert m.w.dtype == rlpipe.float64  # a device alone keeps dtypes
    assert m.to(rlpipe.float32, non_blocking=False) is m
    assert m.stat.dtype == rlpipe.float32


def test_to_integer_dtype_raises_type_error():
    m = Mixed()
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point or complex dtypes, but got "
                                        r"desired dtype=rlpipe\.int64"):
        m.to(rlpipe.int64)
    assert m.w.dtype == rlpipe.float32


def test_cast_methods():
    m = Mixed()
    assert m.double() is m
    assert _dtypes(m)["w"] == rlpipe.float64 and _dtypes(m)["steps"] == rlpipe.int64
    assert m.half() is m
    assert m.w.dtype == rlpipe.float16 and m.sub.running.dtype == rlpipe.float16
    assert m.bfloat16() is m
    assert m.w.dtype == rlpipe.bfloat16 and m.steps.dtype == rlpipe.int64
    assert m.float() is m
    assert set(_dtypes(m).values()) == {rlpipe.float32, rlpipe.int64}
    # type() casts every parameter and buffer, integer ones included
    assert m.type(rlpipe.float64) is m
    assert set(_dtypes(m).values()) == {rlpipe.float64}
    assert isinstance(m.w, Parameter)


def test_cpu_returns_self():
    m = Mixed()
    w = m.w
    assert m.cpu() is m
    assert m.w is w and m.w.device.type == "cpu"


def test_casting_converts_gradients_too():
    m = Affine(2)
    m(rlpipe.ones(2)).sum().backward()
    m.double()
    assert m.w.grad.dtype == rlpipe.float64 and m.w.grad.tolist() == [1.0, 1.0]


def test_parameter_identity_survives_double_so_an_optimizer_stays_valid():
    m = Affine(2)
    held = list(m.parameters())  # what an optimizer would hold
    m.double()
    assert held[0] is m.w and held[0].dtype == rlpipe.float64
    m(rlpipe.ones(2, dtype=rlpipe.float64)).sum().backward()
    with rlpipe.no_grad():
        for p in held:  # one hand-written SGD step on the held references
            p.sub_(0.5 * p.grad)
    assert m.w.tolist() == [-0.5, -0.5]
    assert m(rlpipe.zeros(2, dtype=rlpipe.float64)).tolist() == [-0.5, -0.5]


def test_to_empty():
    m = Mixed()
    w = m.w
    assert m.to_empty(device="cpu") is m
    assert m.w is w and isinstance(m.w, Parameter) and m.w.requires_grad
    assert m.w.shape == (2,) and m.steps.shape == (1,) and m.sub.w.shape == (2,)
    assert m.steps.dtype == rlpipe.int64 and m.w.dtype == rlpipe.float32
    with pytest.raises(TypeError):
        m.to_empty("cpu")  # device is keyword-only


def test_share_memory():
    m = Mixed()
    assert m.share_memory() is m
    assert all(v.is_shared() for v in (*m.parameters(), *m.buffers()))


@pytest.mark.parametrize("method, device", [("ipu", "IPU"), ("xpu", "XPU"), ("mtia", "MTIA")])
def test_unsupported_devices_raise_runtime_error(method, device):
    m = Mixed()
    with pytest.raises(RuntimeError, match=device):
        getattr(m, method)()


# ---------------------------------------------------------------------------------------------
# state_dict
# ---------------------------------------------------------------------------------------------
def test_state_dict_keys_order_and_type():
    m = Parent()
    m.register_buffer("scratch", rlpipe.zeros(1), persistent=False)
    m.register_parameter("absent", None)
    sd = m.state_dict()
    assert type(sd) is OrderedDict
    # own parameters, then own persistent buffers, then each child in order
    assert list(sd) == ["a", "b", "count", "child.w", "child.running"]


def test_state_dict_values_are_detached_views_unless_keep_vars():
    m = Parent()
    sd = m.state_dict()
    assert type(sd["a"]) is rlpipe.Tensor and not isinstance(sd["a"], Parameter)
    assert sd["a"].requires_grad is False and sd["a"].grad_fn is None
    sd["child.w"].add_(1.0)  # detached but sharing memory
    assert m.child.w.tolist() == [2.0, 2.0]
    kept = m.state_dict(keep_vars=True)
    assert kept["a"] is m.a and kept["child.w"] is m.child.w and kept["count"] is m.count


def test_state_dict_prefix_destination_and_metadata():
    m = Parent()
    sd = m.state_dict(prefix="model.")
    assert list(sd) == ["model.a", "model.b", "model.count", "model.child.w", "model.child.running"]
    assert list(sd._metadata) == ["model", "model.child"]
    sd = m.state_dict()
    assert sd._metadata == OrderedDict([("", {"version": 1}), ("child", {"version": 1})])
    dest = {}
    assert m.state_dict(destination=dest) is dest
    assert list(dest) == ["a", "b", "count", "child.w", "child.running"]


def test_state_dict_metadata_records_each_module_version():
    class Versioned(nn.Module):
        _version = 3

        def __init__(self):
            super().__init__()
            self.inner = Leaf()

    sd = Versioned().state_dict()
    assert sd._metadata[""] == {"version": 3}
    assert sd._metadata["inner"] == {"version": 1}


def test_state_dict_positional_arguments_are_deprecated():
    m = Leaf()
    dest = OrderedDict()
    with pytest.warns(FutureWarning, match="Positional args are being deprecated"):
        out = m.state_dict(dest, "p.")
    assert out is dest and list(dest) == ["p.w", "p.running"]


# ---------------------------------------------------------------------------------------------
# load_state_dict
# ---------------------------------------------------------------------------------------------
def _source_state():
    return OrderedDict([("a", t([10.0])), ("b", t([20.0])), ("count", t([7], dtype=rlpipe.int64)),
                        ("child.w", t([3.0, 4.0])), ("child.running", t([5.0, 6.0]))])


def test_load_state_dict_strict_all_keys_match():
    m = Parent()
    a_before, running_before = m.a, m.child.running
    result = m.load_state_dict(_source_state())
    assert repr(result) == "<All keys matched successfully>"
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert m.a.tolist() == [10.0] and m.b.tolist() == [20.0] and m.count.tolist() == [7]
    assert m.child.w.tolist() == [3.0, 4.0] and m.child.running.tolist() == [5.0, 6.0]
    # copied in place: the same Parameter and buffer objects
    assert m.a is a_before and m.child.running is running_before
    assert m.a.requires_grad and m.a.grad_fn is None


def test_load_state_dict_round_trip_between_instances():
    src, dst = Parent(), Parent()
    with rlpipe.no_grad():
        src.child.w.mul_(3.0)
        src.count.add_(2)
    dst.load_state_dict(src.state_dict())
    assert dst.child.w.tolist() == [3.0, 3.0] and dst.count.tolist() == [2]


def test_load_state_dict_non_strict_reports_keys():
    m = Parent()
    state = _source_state()
    del state["b"]
    del state["child.running"]
    state["extra"] = t([1.0])
    state["child.extra"] = t([1.0])
    state["ghost.w"] = t([1.0])
    result = m.load_state_dict(state, strict=False)
    assert result.missing_keys == ["b", "child.running"]
    assert result.unexpected_keys == ["extra", "ghost.w", "child.extra"]
    missing, unexpected = result  # a namedtuple
    assert (missing, unexpected) == (["b", "child.running"], ["extra", "ghost.w", "child.extra"])
    assert repr(result) == ("_IncompatibleKeys(missing_keys=['b', 'child.running'], "
                            "unexpected_keys=['extra', 'ghost.w', 'child.extra'])")
    assert m.a.tolist() == [10.0] and m.b.tolist() == [2.0]  # what was there was loaded, the rest kept


def test_load_state_dict_strict_error_lists_everything():
    m = Parent()
    state = _source_state()
    del state["b"]
    state["extra"] = t([1.0])
    state["child.w"] = t([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError) as e:
        m.load_state_dict(state)
    assert str(e.value) == (
        "Error(s) in loading state_dict for Parent:\n"
        "\tMissing key(s) in state_dict: \"b\". \n"
        "\tUnexpected key(s) in state_dict: \"extra\". \n"
        "\tsize mismatch for child.w: copying a param with shape rlpipe.Size([3]) from checkpoint, "
        "the shape in current model is rlpipe.Size([2]).")


def test_load_state_dict_size_mismatch_raises_even_when_not_strict():
    m = Leaf()
    with pytest.raises(RuntimeError) as e:
        m.load_state_dict({"w": rlpipe.zeros(2, 2)}, strict=False)
    assert str(e.value) == (
        "Error(s) in loading state_dict for Leaf:\n"
        "\tsize mismatch for w: copying a param with shape rlpipe.Size([2, 2]) from checkpoint, "
        "the shape in current model is rlpipe.Size([2]).")


def test_load_state_dict_key_of_none_parameter_or_non_persistent_buffer_is_unexpected():
    m = Empty()
    m.register_parameter("absent", None)
    m.register_buffer("scratch", rlpipe.zeros(1), persistent=False)
    result = m.load_state_dict({"absent": rlpipe.zeros(1), "scratch": rlpipe.ones(1)}, strict=False)
    assert result.unexpected_keys == ["absent", "scratch"]
    assert m.scratch.tolist() == [0.0]
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "absent", "scratch". '):
        m.load_state_dict({"absent": rlpipe.zeros(1), "scratch": rlpipe.ones(1)})


def test_load_state_dict_rejects_non_mapping():
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like, got <class 'list'>."):
        Leaf().load_state_dict([("w", rlpipe.zeros(2))])


def test_load_state_dict_assign_replaces_parameter_objects():
    m = Leaf()
    m.w.requires_grad_(False)
    old_w, old_running = m.w, m.running
    new_w, new_running = t([7.0, 8.0]), t([1.0, 1.0])
    result = m.load_state_dict({"w": new_w, "running": new_running}, assign=True)
    assert repr(result) == "<All keys matched successfully>"
    assert m.w is not old_w and isinstance(m.w, Parameter)
    assert m.w.requires_grad is False  # keeps the requires_grad of the parameter it replaces
    assert m.w.tolist() == [7.0, 8.0] and old_w.tolist() == [1.0, 1.0]
    assert m.running is new_running and m.running is not old_running
    new_w.add_(1.0)  # the new Parameter shares memory with the loaded tensor
    assert m.w.tolist() == [8.0, 9.0]
    assert list(m.parameters()) == [m.w]


def test_load_state_dict_into_buffer_copies_in_place():
    m = Leaf()
    buf = m.running
    m.load_state_dict({"w": t([1.0, 1.0]), "running": t([0.5, 1.5])})
    assert m.running is buf and buf.tolist() == [0.5, 1.5]


class WithExtraState(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = Parameter(rlpipe.zeros(1))
        self.counter = 0
        self.received = None

    def get_extra_state(self):
        return {"counter": self.counter}

    def set_extra_state(self, state):
        self.received = state
        self.counter = state["counter"]


def test_extra_state_round_trip():
    outer = nn.Module()
    outer.inner = WithExtraState()
    outer.inner.counter = 41
    sd = outer.state_dict()
    assert list(sd) == ["inner.w", "inner._extra_state"]
    assert sd["inner._extra_state"] == {"counter": 41}
    fresh = nn.Module()
    fresh.inner = WithExtraState()
    assert repr(fresh.load_state_dict(sd)) == "<All keys matched successfully>"
    assert fresh.inner.counter == 41 and fresh.inner.received == {"counter": 41}
    # the extra state is required under strict loading
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "inner._extra_state"'):
        fresh.load_state_dict({"inner.w": rlpipe.zeros(1)})


def test_default_extra_state_methods_are_not_used():
    m = Leaf()
    assert "_extra_state" not in m.state_dict()
    with pytest.raises(RuntimeError):
        m.get_extra_state()
    result = m.load_state_dict({"w": rlpipe.zeros(2), "running": rlpipe.zeros(2), "_extra_state": 1}, strict=False)
    assert result.unexpected_keys == ["_extra_state"]


# ---------------------------------------------------------------------------------------------
# forward hooks
# ---------------------------------------------------------------------------------------------
class Recorder(nn.Module):
    """forward(x, scale=1) -> x * scale, remembering what forward received."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x, scale=1):
        self.seen.append((x.tolist(), scale))
        return x * scale


def test_forward_pre_hook_can_replace_args():
    m = Recorder()
    h = m.register_forward_pre_hook(lambda mod, args: args[0] * 10)  # a single value is wrapped in a tuple
    assert m(t([1.0])).tolist() == [10.0]
    h.remove()
    h = m.register_forward_pre_hook(lambda mod, args: (args[0] + 1, 3))
    assert m(t([1.0])).tolist() == [6.0]
    h.remove()
    assert m(t([1.0])).tolist() == [1.0]
    assert m.seen == [([10.0], 1), ([2.0], 3), ([1.0], 1)]


def test_forward_pre_hook_gets_positional_args_only_unless_with_kwargs():
    m = Recorder()
    got = []
    m.register_forward_pre_hook(lambda mod, args: got.append(("plain", mod, len(args))))

    def with_kwargs(mod, args, kwargs):
        got.append(("kw", dict(kwargs)))
        return args, {**kwargs, "scale": 5}

    m.register_forward_pre_hook(with_kwargs, with_kwargs=True)
    assert m(t([2.0]), scale=2).tolist() == [10.0]
    assert got == [("plain", m, 1), ("kw", {"scale": 2})]


def test_forward_pre_hook_with_kwargs_must_return_a_pair():
    m = Recorder()
    m.register_forward_pre_hook(lambda mod, args, kwargs: args, with_kwargs=True)
    with pytest.raises(RuntimeError, match=re.escape("forward pre-hook must return None or a tuple of (new_args, "
                                                     "new_kwargs)")):
        m(t([1.0]))


def test_forward_hook_can_replace_output():
    m = Recorder()
    got = []

    def hook(mod, args, output):
        got.append((mod, [a.tolist() for a in args], output.tolist()))
        return output + 100

    m.register_forward_hook(hook)
    assert m(t([1.0]), scale=3).tolist() == [103.0]
    assert got == [(m, [[1.0]], [3.0])]  # keyword arguments are not passed to a plain hook


def test_forward_hook_with_kwargs():
    m = Recorder()
    got = []

    def hook(mod, args, kwargs, output):
        got.append((len(args), dict(kwargs), output.tolist()))
        return output * 2

    m.register_forward_hook(hook, with_kwargs=True)
    assert m(t([1.0]), scale=3).tolist() == [6.0]
    assert got == [(1, {"scale": 3}, [3.0])]


def test_hook_prepend_ordering():
    m = Recorder()
    order = []
    m.register_forward_pre_hook(lambda mod, args: order.append("pre1"))
    m.register_forward_pre_hook(lambda mod, args: order.append("pre2"))
    m.register_forward_pre_hook(lambda mod, args: order.append("pre0"), prepend=True)
    m.register_forward_hook(lambda mod, args, out: order.append("fwd1"))
    m.register_forward_hook(lambda mod, args, out: order.append("fwd0"), prepend=True)
    m(t([1.0]))
    assert order == ["pre0", "pre1", "pre2", "fwd0", "fwd1"]


def test_forward_hook_always_call_runs_when_forward_raises():
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    m = Boom()
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append("normal"))
    m.register_forward_hook(lambda mod, args, out: seen.append(("always", out)), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        m(t([1.0]))
    assert seen == [("always", None)]
    # without an exception an always_call hook runs exactly once, in order
    seen.clear()
    ok = Recorder()
    ok.register_forward_hook(lambda mod, args, out: seen.append("normal"))
    ok.register_forward_hook(lambda mod, args, out: seen.append("always"), always_call=True)
    ok(t([1.0]))
    assert seen == ["normal", "always"]


def test_handles_remove_hooks_and_work_as_context_managers():
    m = Recorder()
    calls = []
    with m.register_forward_hook(lambda mod, args, out: calls.append("fwd")) as handle:
        with m.register_forward_pre_hook(lambda mod, args: calls.append("pre")):
            m(t([1.0]))
        m(t([1.0]))
    m(t([1.0]))
    assert calls == ["pre", "fwd", "fwd"]
    assert len(m._forward_hooks) == 0 and len(m._forward_pre_hooks) == 0
    handle.remove()  # removing twice is harmless


def test_calling_forward_directly_skips_hooks():
    m = Recorder()
    calls = []
    m.register_forward_pre_hook(lambda mod, args: calls.append("pre"))
    m.register_forward_hook(lambda mod, args, out: calls.append("fwd"))
    m.forward(t([1.0]))
    assert calls == []
    m(t([1.0]))
    assert calls == ["pre", "fwd"]


def test_hook_call_order_across_parent_and_child_with_global_hooks():
    log = []

    class Child(nn.Module):
        def forward(self, x):
            log.append("child.forward")
            return x + 1

    class Par(nn.Module):
        def __init__(self):
            super().__init__()
            self.child = Child()

        def forward(self, x):
            log.append("parent.forward:start")
            y = self.child(x)
            log.append("parent.forward:end")
            return y

    p = Par()

    def who(mod):
        return "parent" if mod is p else "child"

    handles = [
        module_mod.register_module_forward_pre_hook(lambda mod, args: log.append("global_pre:" + who(mod))),
        module_mod.register_module_forward_hook(lambda mod, args, out: log.append("global_fwd:" + who(mod))),
        p.register_forward_pre_hook(lambda mod, args: log.append("pre:parent")),
        p.register_forward_hook(lambda mod, args, out: log.append("fwd:parent")),
        p.child.register_forward_pre_hook(lambda mod, args: log.append("pre:child")),
        p.child.register_forward_hook(lambda mod, args, out: log.append("fwd:child")),
    ]
    try:
        p(t([0.0]))
    finally:
        for h in handles:
            h.remove()
    assert log == ["global_pre:parent", "pre:parent", "parent.forward:start",
                   "global_pre:child", "pre:child", "child.forward", "global_fwd:child", "fwd:child",
                   "parent.forward:end", "global_fwd:parent", "fwd:parent"]
    log.clear()
    p(t([0.0]))  # all removed
    assert log == ["parent.forward:start", "child.forward", "parent.forward:end"]


def test_global_forward_hooks_can_modify_values():
    m = Recorder()
    h1 = module_mod.register_module_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    h2 = module_mod.register_module_forward_hook(lambda mod, args, out: out * 10)
    try:
        assert m(t([1.0])).tolist() == [20.0]
    finally:
        h1.remove()
        h2.remove()
    assert m(t([1.0])).tolist() == [1.0]


def test_global_forward_hook_with_kwargs_and_always_call():
    class Boom(nn.Module):
        def forward(self, x, flag=False):
            raise ValueError("boom")

    got = []
    h = module_mod.register_module_forward_hook(lambda mod, args, out: got.append(out), always_call=True)
    try:
        with pytest.raises(ValueError):
            Boom()(t([1.0]))
    finally:
        h.remove()
    assert got == [None]
    h = module_mod.register_module_forward_hook(lambda mod, args, kwargs, out: got.append(dict(kwargs)),
                                                with_kwargs=True)
    try:
        Recorder()(t([1.0]), scale=2)
    finally:
        h.remove()
    assert got == [None, {"scale": 2}]


# ---------------------------------------------------------------------------------------------
# backward hooks
# ---------------------------------------------------------------------------------------------
def _lists(grads):
    return [None if g is None else g.tolist() for g in grads]


def test_full_backward_hook_sees_grad_input_and_grad_output():
    m = Affine(3)
    calls = []
    m.register_full_backward_hook(lambda mod, gin, gout: calls.append((mod, _lists(gin), _lists(gout))))
    x = t([1.0, 2.0, 3.0], requires_grad=True)
    m(x).sum().backward()
    # y = 2x + w: grad_output = dL/dy = 1, grad_input = dL/dx = 2 (only the module's inputs, not w)
    assert calls == [(m, [[2.0, 2.0, 2.0]], [[1.0, 1.0, 1.0]])]
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    assert m.w.grad.tolist() == [1.0, 1.0, 1.0]


def test_full_backward_hook_can_replace_grad_input():
    m = Affine(3)
    m.register_full_backward_hook(lambda mod, gin, gout: (gin[0] * 10,))
    x = t([1.0, 2.0, 3.0], requires_grad=True)
    m(x).sum().backward()
    assert x.grad.tolist() == [20.0, 20.0, 20.0]
    assert m.w.grad.tolist() == [1.0, 1.0, 1.0]  # parameters are not part of grad_input


def test_full_backward_pre_hook_can_replace_grad_output():
    m = Affine(3)
    calls = []

    def pre(mod, gout):
        calls.append(("pre", _lists(gout)))
        return (gout[0] * 3,)

    m.register_full_backward_pre_hook(pre)
    m.register_full_backward_hook(lambda mod, gin, gout: calls.append(("full", _lists(gin), _lists(gout))))
    x = t([1.0, 1.0, 1.0], requires_grad=True)
    m(x).sum().backward()
    assert calls == [("pre", [[1.0, 1.0, 1.0]]), ("full", [[6.0, 6.0, 6.0]], [[3.0, 3.0, 3.0]])]
    # the replaced grad_output flows through the whole module
    assert x.grad.tolist() == [6.0, 6.0, 6.0]
    assert m.w.grad.tolist() == [3.0, 3.0, 3.0]


def test_full_backward_hook_non_tensor_and_no_grad_inputs_are_none():
    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = Parameter(t([1.0, 1.0]))

        def forward(self, x, k, y):
            return x * k + y * self.w

    m = TwoInputs()
    calls = []
    m.register_full_backward_hook(lambda mod, gin, gout: calls.append(_lists(gin)))
    x = t([1.0, 2.0], requires_grad=True)
    y = t([3.0, 4.0])  # does not require grad
    m(x, 3, y).sum().backward()
    assert calls == [[[3.0, 3.0], None, None]]
    # no input requires grad at all: the hook still runs, with grad_input all None
    calls.clear()
    m(t([1.0, 1.0]), 2, t([1.0, 1.0])).sum().backward()
    assert calls == [[None, None, None]]


def test_full_backward_hooks_forward_receives_a_different_tensor_object():
    seen = []

    class Spy(nn.Module):
        def forward(self, x):
            seen.append(x)
            return x * 1

    m = Spy()
    m.register_full_backward_hook(lambda mod, gin, gout: None)
    x = t([1.0], requires_grad=True)
    m(x)
    assert seen[0] is not x and seen[0].tolist() == [1.0]


def test_full_backward_hook_forbids_inplace_change_of_forward_input():
    class InPlace(nn.Module):
        def forward(self, x):
            return x.mul_(2)

    m = InPlace()
    m.register_full_backward_hook(lambda mod, gin, gout: None)
    x = t([1.0], requires_grad=True) * 1  # a non-leaf: in-place would be fine without the hook
    with pytest.raises(RuntimeError):
        m(x)


def test_backward_hook_order_across_parent_and_child():
    log = []

    class Scale(nn.Module):
        def forward(self, x):
            return x * 3

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Scale()

        def forward(self, x):
            return self.inner(x) + 1

    o = Outer()
    o.register_full_backward_pre_hook(lambda mod, gout: log.append(("pre:outer", _lists(gout))))
    o.register_full_backward_hook(lambda mod, gin, gout: log.append(("full:outer", _lists(gin))))
    o.inner.register_full_backward_pre_hook(lambda mod, gout: log.append(("pre:inner", _lists(gout))))
    o.inner.register_full_backward_hook(lambda mod, gin, gout: log.append(("full:inner", _lists(gin))))
    x = t([1.0, 2.0], requires_grad=True)
    o(x).sum().backward()
    assert log == [("pre:outer", [[1.0, 1.0]]), ("pre:inner", [[1.0, 1.0]]),
                   ("full:inner", [[3.0, 3.0]]), ("full:outer", [[3.0, 3.0]])]


def test_full_backward_hook_handle_removes():
    m = Affine(2)
    calls = []
    with m.register_full_backward_hook(lambda mod, gin, gout: calls.append(1)):
        m(t([1.0, 1.0], requires_grad=True)).sum().backward()
    m(t([1.0, 1.0], requires_grad=True)).sum().backward()
    assert calls == [1]


def test_register_backward_hook_deprecated_form_sees_last_operation():
    m = Affine(3)
    calls = []
    m.register_backward_hook(lambda mod, gin, gout: calls.append((mod, _lists(gin), _lists(gout))))
    x = t([1.0, 2.0, 3.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m(x).sum().backward()
    # the hook sits on the last op (2x + w): its grad_input is (d/d(2x), d/dw)
    assert calls == [(m, [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], [[1.0, 1.0, 1.0]])]
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_register_backward_hook_deprecated_form_can_replace_grad_input():
    m = Affine(3)
    m.register_backward_hook(lambda mod, gin, gout: (gin[0] * 10, gin[1]))
    x = t([1.0, 2.0, 3.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m(x).sum().backward()
    assert x.grad.tolist() == [20.0, 20.0, 20.0]
    assert m.w.grad.tolist() == [1.0, 1.0, 1.0]


def test_mixing_backward_hook_kinds_raises():
    message = re.escape("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                        "Please use only one of them.")
    m = Affine()
    m.register_full_backward_hook(lambda mod, gin, gout: None)
    with pytest.raises(RuntimeError, match=message):
        m.register_backward_hook(lambda mod, gin, gout: None)
    m = Affine()
    m.register_backward_hook(lambda mod, gin, gout: None)
    with pytest.raises(RuntimeError, match=message):
        m.register_full_backward_hook(lambda mod, gin, gout: None)


def test_global_full_backward_hook():
    m = Affine(2)
    calls = []
    h = module_mod.register_module_full_backward_hook(
        lambda mod, gin, gout: calls.append((mod, _lists(gin), _lists(gout))))
    try:
        x = t([1.0, 1.0], requires_grad=True)
        m(x).sum().backward()
    finally:
        h.remove()
    assert calls == [(m, [[2.0, 2.0]], [[1.0, 1.0]])]
    calls.clear()
    m(t([1.0, 1.0], requires_grad=True)).sum().backward()
    assert calls == []


# ---------------------------------------------------------------------------------------------
# state_dict and load_state_dict hooks
# ---------------------------------------------------------------------------------------------
def test_state_dict_pre_and_post_hooks():
    m = Parent()
    log = []
    m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(("pre", mod, prefix, keep_vars)))
    m.child.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(("child pre", prefix)))

    def post(mod, sd, prefix, local_metadata):
        log.append(("post", prefix, list(sd), local_metadata))
        sd[prefix + "added"] = rlpipe.zeros(1)

    m.register_state_dict_post_hook(post)
    sd = m.state_dict(prefix="root.", keep_vars=True)
    assert log == [("pre", m, "root.", True), ("child pre", "root.child."),
                   ("post", "root.", ["root.a", "root.b", "root.count", "root.child.w", "root.child.running"],
                    {"version": 1})]
    assert list(sd)[-1] == "root.added"


def test_state_dict_post_hook_must_return_none():
    m = Leaf()
    m.register_state_dict_post_hook(lambda mod, sd, prefix, meta: {})
    with pytest.raises(RuntimeError, match="state_dict post-hook must return None"):
        m.state_dict()


def test_state_dict_hook_handles_remove():
    m = Leaf()
    calls = []
    h = m.register_state_dict_pre_hook(lambda *a: calls.append("pre"))
    with m.register_state_dict_post_hook(lambda *a: calls.append("post")):
        m.state_dict()
    h.remove()
    m.state_dict()
    assert calls == ["pre", "post"]


def test_load_state_dict_pre_hook_can_rename_keys():
    m = Parent()
    got = []

    def rename(mod, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        got.append((mod, prefix))
        if prefix + "old_w" in state_dict:
            state_dict[prefix + "w"] = state_dict.pop(prefix + "old_w")

    m.child.register_load_state_dict_pre_hook(rename)
    state = _source_state()
    state["child.old_w"] = state.pop("child.w")
    assert repr(m.load_state_dict(state)) == "<All keys matched successfully>"
    assert got == [(m.child, "child.")]
    assert m.child.w.tolist() == [3.0, 4.0]


def test_load_state_dict_post_hooks_see_and_may_fix_incompatible_keys():
    m = Parent()
    order = []

    def child_post(mod, incompatible):
        order.append(("child", list(incompatible.missing_keys)))

    def root_post(mod, incompatible):
        order.append(("root", list(incompatible.missing_keys), list(incompatible.unexpected_keys)))
        incompatible.missing_keys.clear()  # edited in place: strict loading no longer fails

    m.child.register_load_state_dict_post_hook(child_post)
    m.register_load_state_dict_post_hook(root_post)
    state = _source_state()
    del state["child.running"]
    result = m.load_state_dict(state)
    assert order == [("child", ["child.running"]), ("root", ["child.running"], [])]
    assert repr(result) == "<All keys matched successfully>"


def test_load_state_dict_post_hook_adding_keys_makes_strict_loading_fail():
    m = Leaf()
    m.register_load_state_dict_post_hook(lambda mod, inc: inc.unexpected_keys.append("bogus"))
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "bogus"'):
        m.load_state_dict({"w": rlpipe.zeros(2), "running": rlpipe.zeros(2)})
    result = m.load_state_dict({"w": rlpipe.zeros(2), "running": rlpipe.zeros(2)}, strict=False)
    assert result.unexpected_keys == ["bogus"]


# ---------------------------------------------------------------------------------------------
# repr
# ---------------------------------------------------------------------------------------------
class Plain(nn.Module):
    pass


class OneLine(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.n = n

    def extra_repr(self):
        return f"n={self.n}"


class TwoLines(nn.Module):
    def extra_repr(self):
        return "a=1\nb=2"


def test_repr_leaf_forms():
    assert repr(Plain()) == "Plain()"
    assert repr(OneLine()) == "OneLine(n=3)"
    assert repr(TwoLines()) == "TwoLines(\n  a=1\n  b=2\n)"


def test_repr_nesting():
    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.leaf = OneLine(5)
            self.two = TwoLines()

    class Outer(OneLine):
        def __init__(self):
            super().__init__(1)
            self.inner = Inner()
            self.other = Plain()

    assert repr(Outer()) == (
        "Outer(\n"
        "  n=1\n"
        "  (inner): Inner(\n"
        "    (leaf): OneLine(n=5)\n"
        "    (two): TwoLines(\n"
        "      a=1\n"
        "      b=2\n"
        "    )\n"
        "  )\n"
        "  (other): Plain()\n"
        ")")
    assert str(Outer()) == repr(Outer())


def test_repr_of_module_with_only_parameters_has_no_body():
    assert repr(Leaf()) == "Leaf()"


def test_parameter_repr():
    p = Parameter(t([1.0, 2.0]))
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    q = Parameter(t([[1.0, 2.0], [3.0, 4.0]]), requires_grad=False)
    assert repr(q) == "Parameter containing:\ntensor([[1., 2.],\n        [3., 4.]])"


def test_parameter_basics():
    data = t([1.0, 2.0])
    p = Parameter(data)
    assert isinstance(p, rlpipe.Tensor) and p.requires_grad and p.is_leaf
    data.add_(1.0)
    assert p.tolist() == [2.0, 3.0]  # shares memory with data
    empty = Parameter()
    assert empty.shape == (0,) and empty.requires_grad


# ---------------------------------------------------------------------------------------------
# Sequential
# ---------------------------------------------------------------------------------------------
class AddConst(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c

    def forward(self, x):
        return x + self.c

    def extra_repr(self):
        return f"c={self.c}"


def _seq3():
    a, b, c = AddConst(1), AddConst(2), AddConst(3)
    return nn.Sequential(a, b, c), (a, b, c)


def test_sequential_forward_and_indexing():
    seq, (a, b, c) = _seq3()
    assert seq(t([0.0])).tolist() == [6.0]
    assert len(seq) == 3 and list(seq) == [a, b, c]
    assert seq[0] is a and seq[2] is c and seq[-1] is c and seq[-3] is a
    assert list(seq._modules) == ["0", "1", "2"]
    with pytest.raises(IndexError, match="index 3 is out of range"):
        seq[3]
    with pytest.raises(IndexError, match="index -4 is out of range"):
        seq[-4]


def test_sequential_slicing_returns_sequential_keeping_keys():
    seq, (a, b, c) = _seq3()
    tail = seq[1:]
    assert type(tail) is nn.Sequential
    assert list(tail) == [b, c]
    assert list(tail._modules) == ["1", "2"]
    assert list(seq[::2]) == [a, c]
    assert tail(t([0.0])).tolist() == [5.0]


def test_sequential_setitem_append_insert_extend():
    seq, (a, _, c) = _seq3()
    d = AddConst(4)
    seq[1] = d
    assert list(seq) == [a, d, c]
    e = AddConst(5)
    assert seq.append(e) is seq
    assert list(seq) == [a, d, c, e] and list(seq._modules) == ["0", "1", "2", "3"]
    f = AddConst(6)
    assert seq.insert(1, f) is seq
    assert list(seq) == [a, f, d, c, e] and list(seq._modules) == ["0", "1", "2", "3", "4"]
    with pytest.raises(IndexError, match="Index out of range: 10"):
        seq.insert(10, AddConst(0))
    with pytest.raises(AssertionError):
        seq.insert(0, 3)
    h, i = AddConst(8), AddConst(9)
    assert seq.extend([h, i]) is seq
    assert list(seq)[-2:] == [h, i] and len(seq) == 7


def test_sequential_insert_negative_index_goes_before_that_position():
    seq, (a, b, c) = _seq3()
    d = AddConst(4)
    seq.insert(-1, d)  # like list.insert: before the last module
    assert list(seq) == [a, b, d, c] and list(seq._modules) == ["0", "1", "2", "3"]
    e = AddConst(5)
    seq.insert(-4, e)
    assert list(seq) == [e, a, b, d, c]
    with pytest.raises(IndexError, match="Index out of range: -6"):
        seq.insert(-6, AddConst(0))


def test_sequential_pop_and_del_renumber():
    seq, (a, b, c) = _seq3()
    assert seq.pop(1) is b
    assert list(seq) == [a, c] and list(seq._modules) == ["0", "1"]
    seq.append(b)
    del seq[0]
    assert list(seq) == [c, b] and list(seq._modules) == ["0", "1"]
    seq.extend([a, AddConst(0)])
    del seq[1:3]
    assert len(seq) == 2 and seq[0] is c and list(seq._modules) == ["0", "1"]
    del seq[-1]
    assert list(seq) == [c]


def test_sequential_from_ordered_dict():
    conv, act = AddConst(1), AddConst(2)
    seq = nn.Sequential(OrderedDict([("conv", conv), ("act", act)]))
    assert seq.conv is conv and seq.act is act
    assert seq[1] is act and seq[-1] is act
    assert [n for n, _ in seq.named_children()] == ["conv", "act"]
    assert list(seq[1:]._modules) == ["act"]
    assert repr(seq) == "Sequential(\n  (conv): AddConst(c=1)\n  (act): AddConst(c=2)\n)"


def test_sequential_add_and_mul():
    seq, (a, b, c) = _seq3()
    other = nn.Sequential(AddConst(10))
    combined = seq + other
    assert type(combined) is nn.Sequential and combined is not seq
    assert list(combined) == [a, b, c, other[0]] and list(combined._modules) == ["0", "1", "2", "3"]
    assert len(seq) == 3
    with pytest.raises(ValueError, match="add operator supports only objects of Sequential class"):
        seq + [AddConst(1)]
    doubled = seq * 2
    assert list(doubled) == [a, b, c, a, b, c] and list(doubled._modules) == [str(i) for i in range(6)]
    assert len(seq) == 3
    with pytest.raises(ValueError, match="Non-positive multiplication factor 0"):
        seq * 0
    # a shared module is one child for iteration over modules and parameters
    assert list(doubled.modules()) == [doubled, a, b, c]


def test_sequential_rmul_and_non_integer_factor():
    seq, (a, b, c) = _seq3()
    assert list(2 * seq) == [a, b, c, a, b, c]
    with pytest.raises(TypeError, match="unsupported operand type"):
        seq * 1.5


def test_sequential_inplace_add_and_mul():
    seq, _ = _seq3()
    same = seq
    seq += nn.Sequential(AddConst(4))
    assert seq is same and len(seq) == 4
    seq2, (x, y, z) = _seq3()
    same2 = seq2
    seq2 *= 2
    assert seq2 is same2 and list(seq2) == [x, y, z, x, y, z]


def test_sequential_repr_does_not_fold_repeats():
    seq = nn.Sequential(Plain(), Plain())
    assert repr(seq) == "Sequential(\n  (0): Plain()\n  (1): Plain()\n)"
    assert repr(nn.Sequential()) == "Sequential()"


def test_sequential_registers_parameters():
    seq = nn.Sequential(Leaf(), Affine(2))
    assert [n for n, _ in seq.named_parameters()] == ["0.w", "1.w"]
    assert list(seq.state_dict()) == ["0.w", "0.running", "1.w"]


# ---------------------------------------------------------------------------------------------
# ModuleList
# ---------------------------------------------------------------------------------------------
def test_module_list_basics():
    a, b, c = Plain(), OneLine(), TwoLines()
    ml = nn.ModuleList([a, b])
    assert len(ml) == 2 and list(ml) == [a, b]
    assert ml[0] is a and ml[-1] is b
    assert ml.append(c) is ml
    assert list(ml._modules) == ["0", "1", "2"]
    d, e = Plain(), Plain()
    assert ml.extend([d, e]) is ml
    assert list(ml) == [a, b, c, d, e]
    with pytest.raises(IndexError, match="index 5 is out of range"):
        ml[5]
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable, but got int"):
        ml.extend(3)
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2", "3", "4"]


def test_module_list_insert_slice_del_pop_setitem():
    a, b, c, d = Plain(), OneLine(), TwoLines(), Plain()
    ml = nn.ModuleList([a, b, c])
    ml.insert(1, d)
    assert list(ml) == [a, d, b, c] and list(ml._modules) == ["0", "1", "2", "3"]
    part = ml[1:3]
    assert type(part) is nn.ModuleList and list(part) == [d, b]
    assert list(part._modules) == ["0", "1"]  # a sliced ModuleList is renumbered
    del ml[1]
    assert list(ml) == [a, b, c] and list(ml._modules) == ["0", "1", "2"]
    del ml[0:2]
    assert list(ml) == [c] and list(ml._modules) == ["0"]
    ml.extend([a, b])
    assert ml.pop(1) is a
    assert list(ml) == [c, b]
    ml[-1] = d
    assert list(ml) == [c, d]


def test_module_list_add_and_iadd():
    a, b, c = Plain(), OneLine(), TwoLines()
    ml = nn.ModuleList([a])
    combined = ml + nn.ModuleList([b, c])
    assert type(combined) is nn.ModuleList and list(combined) == [a, b, c]
    assert list(combined._modules) == ["0", "1", "2"] and len(ml) == 1
    same = ml
    ml += [b]
    assert ml is same and list(ml) == [a, b]


def test_module_list_registers_parameters():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Affine(2) for _ in range(3)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    net = Net()
    assert [n for n, _ in net.named_parameters()] == ["layers.0.w", "layers.1.w", "layers.2.w"]
    assert net(t([1.0, 1.0])).tolist() == [8.0, 8.0]


def test_module_list_repr_folds_identical_children():
    ml = nn.ModuleList([OneLine(3), OneLine(3), OneLine(3), Plain(), OneLine(3)])
    assert repr(ml) == ("ModuleList(\n"
                        "  (0-2): 3 x OneLine(n=3)\n"
                        "  (3): Plain()\n"
                        "  (4): OneLine(n=3)\n"
                        ")")
    blocks = nn.ModuleList([TwoLines(), TwoLines()])
    assert repr(blocks) == ("ModuleList(\n"
                            "  (0-1): 2 x TwoLines(\n"
                            "    a=1\n"
                            "    b=2\n"
                            "  )\n"
                            ")")
    assert repr(nn.ModuleList()) == "ModuleList()"


def test_module_list_has_no_forward():
    with pytest.raises(NotImplementedError):
        nn.ModuleList([Plain()])(t([1.0]))


# ---------------------------------------------------------------------------------------------
# ModuleDict
# ---------------------------------------------------------------------------------------------
def test_module_dict_mapping_protocol():
    a, b, c = Plain(), OneLine(), TwoLines()
    md = nn.ModuleDict({"b": b, "a": a})
    assert list(md.keys()) == ["b", "a"]  # a dict keeps its insertion order
    assert list(md.values()) == [b, a]
    assert list(md.items()) == [("b", b), ("a", a)]
    assert list(md) == ["b", "a"] and len(md) == 2
    assert "a" in md and "z" not in md
    assert md["a"] is a and md.a is a
    md["c"] = c
    assert list(md.keys()) == ["b", "a", "c"]
    assert md.pop("b") is b
    assert list(md.keys()) == ["a", "c"] and "b" not in md
    del md["a"]
    assert list(md.keys()) == ["c"]
    md.clear()
    assert len(md) == 0
    with pytest.raises(KeyError):
        md["a.b"] = Plain()


def test_module_dict_update_from_pairs_mapping_and_module_dict():
    a, b, c = Plain(), OneLine(), TwoLines()
    md = nn.ModuleDict([("x", a), ["y", b]])
    assert list(md.keys()) == ["x", "y"]
    md.update({"z": c, "x": b})
    assert list(md.keys()) == ["x", "y", "z"] and md["x"] is b
    md.update(OrderedDict([("w", a)]))
    md.update(nn.ModuleDict({"v": Plain()}))
    assert list(md.keys()) == ["x", "y", "z", "w", "v"]
    with pytest.raises(ValueError):
        md.update([("only-one",)])


def test_module_dict_registers_modules():
    md = nn.ModuleDict({"first": Affine(2), "second": Leaf()})
    assert [n for n, _ in md.named_parameters()] == ["first.w", "second.w"]
    assert repr(md) == "ModuleDict(\n  (first): Affine()\n  (second): Leaf()\n)"


# ---------------------------------------------------------------------------------------------
# ParameterList / ParameterDict
# ---------------------------------------------------------------------------------------------
def test_parameter_list_wraps_and_registers():
    p0 = Parameter(t([1.0]))
    plain = t([2.0, 3.0])
    pl = nn.ParameterList([p0, plain])
    assert len(pl) == 2
    assert pl[0] is p0
    assert isinstance(pl[1], Parameter) and pl[1].requires_grad and pl[1].tolist() == [2.0, 3.0]
    assert pl[-1] is pl[1]
    pl.append(t([4.0]))
    pl.extend([t([5.0])])
    assert all(isinstance(p, Parameter) for p in pl)
    assert [p.tolist() for p in pl] == [[1.0], [2.0, 3.0], [4.0], [5.0]]
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2", "3"]
    assert list(pl.parameters()) == list(pl)
    pl[0] = t([9.0])
    assert isinstance(pl[0], Parameter) and pl[0].tolist() == [9.0]
    part = pl[1:3]
    assert type(part) is nn.ParameterList and [p.tolist() for p in part] == [[2.0, 3.0], [4.0]]
    assert part[0] is pl[1]

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.params = nn.ParameterList([rlpipe.zeros(2), rlpipe.ones(1)])

    assert [n for n, _ in Holder().named_parameters()] == ["params.0", "params.1"]
    assert list(Holder().state_dict()) == ["params.0", "params.1"]


def test_parameter_list_repr():
    pl = nn.ParameterList([rlpipe.zeros(3), rlpipe.zeros(2, 2)])
    assert repr(pl) == ("ParameterList(\n"
                        "    (0): Parameter containing: [rlpipe.float32 of size 3]\n"
                        "    (1): Parameter containing: [rlpipe.float32 of size 2x2]\n"
                        ")")


def test_parameter_dict_wraps_and_registers():
    pd = nn.ParameterDict(OrderedDict([("b", t([1.0])), ("a", Parameter(t([2.0])))]))
    assert list(pd.keys()) == ["b", "a"] and len(pd) == 2
    assert all(isinstance(v, Parameter) for v in pd.values())
    assert pd["b"].tolist() == [1.0] and pd.a.tolist() == [2.0]
    assert "a" in pd and "c" not in pd
    pd["c"] = t([3.0])
    assert isinstance(pd["c"], Parameter)
    assert [n for n, _ in pd.named_parameters()] == ["b", "a", "c"]
    assert list(pd.parameters()) == [pd["b"], pd["a"], pd["c"]]
    assert [(k, v.tolist()) for k, v in pd.items()] == [("b", [1.0]), ("a", [2.0]), ("c", [3.0])]
    assert pd.get("zzz") is None and pd.get("a") is pd["a"]
    popped = pd.pop("b")
    assert popped.tolist() == [1.0] and list(pd.keys()) == ["a", "c"]
    assert [n for n, _ in pd.named_parameters()] == ["a", "c"]
    pd.update([("d", t([4.0]))])
    assert list(pd) == ["a", "c", "d"]
    del pd["a"]
    assert list(pd.keys()) == ["c", "d"]

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = nn.ParameterDict({"left": rlpipe.zeros(2)})

    assert [n for n, _ in Holder().named_parameters()] == ["table.left"]


def test_parameter_dict_repr():
    pd = nn.ParameterDict(OrderedDict([("a", rlpipe.zeros(3)), ("b", rlpipe.zeros(2, 2))]))
    assert repr(pd) == ("ParameterDict(\n"
                        "    (a): Parameter containing: [rlpipe.FloatTensor of size 3]\n"
                        "    (b): Parameter containing: [rlpipe.FloatTensor of size 2x2]\n"
                        ")")


# ---------------------------------------------------------------------------------------------
# copying, calling
# ---------------------------------------------------------------------------------------------
def test_deepcopy_gives_independent_parameters():
    m = Shared()
    c = copy.deepcopy(m)
    assert c.p1 is not m.p1 and isinstance(c.p1, Parameter) and c.p1.requires_grad
    assert c.p1.tolist() == [1.0]
    assert c.p2 is c.p1  # ties survive inside the copy
    assert c.c2 is c.c1 and c.c1 is not m.c1
    assert c.b1 is not m.b1 and c.b1.tolist() == [0.0]
    with rlpipe.no_grad():
        c.p1.add_(10.0)
        c.c1.w.add_(10.0)
        c.b1.add_(1.0)
    assert m.p1.tolist() == [1.0] and m.c1.w.tolist() == [1.0, 1.0] and m.b1.tolist() == [0.0]
    assert [n for n, _ in c.named_parameters()] == ["p1", "c1.w"]


def test_deepcopy_does_not_copy_gradients():
    # torch's Parameter.__deepcopy__ builds a fresh Parameter from a clone of the data: no .grad
    m = Affine(2)
    m(rlpipe.ones(2)).sum().backward()
    assert m.w.grad is not None
    c = copy.deepcopy(m)
    assert c.w.grad is None
    assert m.w.grad.tolist() == [1.0, 1.0]


def test_module_without_forward_raises_not_implemented_error():
    class NoForward(nn.Module):
        pass

    with pytest.raises(NotImplementedError, match=r'Module \[NoForward\] is missing the required "forward" function'):
        NoForward()(t([1.0]))


def test_call_passes_args_and_kwargs_to_forward():
    m = Recorder()
    assert m(t([2.0]), scale=4).tolist() == [8.0]
    assert m(t([2.0]), 5).tolist() == [10.0]
    assert m.seen == [([2.0], 4), ([2.0], 5)]
