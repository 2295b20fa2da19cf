"""The parts of ``torch.testing._internal`` (PyTorch's private test helpers) that PyTorch's test files for
the ops rlpipe has import: ``common_utils`` (``TestCase`` and its tensor-aware ``assertEqual``,
``parametrize``, ``run_tests``, skips and constants), ``common_device_type`` (``...CPU`` test classes and
the ``@dtypes`` family), ``common_dtype``, ``common_cuda`` and ``common_nn`` (``NNTestCase``).

Private, as in torch: it exists so that those test files run against rlpipe through an import alias
that maps ``torch`` to ``rlpipe``. Decorators about features rlpipe lacks (CUDA-only tests, MPS, XLA)
skip their tests with the reason instead of running them."""
