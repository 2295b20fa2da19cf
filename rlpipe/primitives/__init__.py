"""Every built-in op: its differentiable ``Function`` (forward and backward), its public function and
the Tensor methods and operators it answers to, together in one module per family.

``base`` holds ``Op`` and the gradient helpers; ``common`` what the public ops share (operand
promotion, casts, views and in-place writes, the decorators that declare Tensor methods and
operators). The families: ``elementwise`` (arithmetic and math), ``comparison`` (comparisons,
logic, bit operations, the is* tests), ``activations``, ``reductions``, ``sorting``, ``shape``
(views, joins and splits), ``indexing``, ``linalg``, ``decompositions`` (factorizations and solvers),
``matrix_functions`` (norms, pinv, matrix_exp), ``lu``, ``conversion`` (dtypes, devices, copies),
``special``, and the Function-only ``windows``, ``normalization`` and ``losses`` (their public
functions are in ``nn.functional``). Everything is importable from here by name:
``from rlpipe import primitives as P; P.Add.apply(x, y)``, ``P.add(x, y)``.

How to add an op, say ``foo``, to a family's module:

1. its ``Function``: ``class Foo(Op)`` with ``forward(ctx, ...)`` over backend arrays (``ctx.xp``)
   and ``backward(ctx, grad)``, next to its kin;
2. below the Functions, its public function ``def foo(input, ...)``: argument checks and promotion
   (``common._operands``, ``_float_input``...), then ``Foo.apply(...)``; an elementwise float
   function is one line: ``foo = _unary_float(Foo)``;
3. decorators declare the rest: ``@tensor_method`` makes it ``x.foo()`` (``@tensor_method("foo",
   "alias")`` for several names), ``@inplace_variant`` adds ``x.foo_()``, ``@tensor_operator("add",
   Add)`` the operators, and ``@torch_function("input")`` (outermost) lets a container such as
   TensorDict answer ``rlpipe.foo(td)`` through its ``__torch_function__``; ``@with_out("input")``
   in its place does that and gives ``rlpipe.foo`` torch's ``out=`` (``common._write_out``);
4. if it belongs to the functional API (``rlpipe.foo``), add it to its family's import in
   ``rlpipe/__init__.py``.
"""
from .base import Op, unbroadcast, shape_of, along_dim, expand_reduced, sign_of  # noqa: F401
from .common import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .comparison import *  # noqa: F401,F403
from .activations import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .conversion import *  # noqa: F401,F403
from .windows import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .losses import *  # noqa: F401,F403
from .special import *  # noqa: F401,F403
from .decompositions import *  # noqa: F401,F403
from .matrix_functions import *  # noqa: F401,F403
from .lu import *  # noqa: F401,F403
from .pointwise import *  # noqa: F401,F403
from .segments import *  # noqa: F401,F403
from .products import *  # noqa: F401,F403
from .searching import *  # noqa: F401,F403
from .index_ops import *  # noqa: F401,F403
from .splits import *  # noqa: F401,F403
from .scans import *  # noqa: F401,F403
from .gamma import *  # noqa: F401,F403
# the helpers the layers above share (TensorDict's shapes and in-place math, nn.functional's checks)
from .common import (_LEGACY_TYPE_NAMES, _check_writable, _check_write, _inplace,  # noqa: F401
                     _require_float, _write)
from .shape import _infer_shape, _shape_arg  # noqa: F401
from .attention import *  # noqa: F401,F403
from .transposed import *  # noqa: F401,F403
from . import double_backward, double_backward_shape  # noqa: F401,E402 - attach each op's backward_graph
