"""``rlpipe.utils.tensorboard``: torch.utils.tensorboard's ``SummaryWriter`` over the ``tensorboard``
package (the optional extra ``rlpipe[tensorboard]``), for scripts that log to TensorBoard.

It writes the same event files as torch's writer: scalars as ``simple_value``, histograms as
``HistogramProto`` (torch's buckets), text for TensorBoard's text plugin, hparams for its hparams
plugin. Values may be rlpipe tensors (copied to the host), NumPy arrays or Python numbers.
"""
try:
    import tensorboard.summary.writer.event_file_writer  # noqa: F401 - the part the writer stands on
except ImportError as e:  # torch raises at import too: the writer is useless without the package
    raise ImportError("rlpipe.utils.tensorboard needs the tensorboard package: "
                      f"pip install 'rlpipe[tensorboard]' (or pip install tensorboard) ({e})") from None

from .writer import SummaryWriter  # noqa: E402

__all__ = ["SummaryWriter"]
