"""``SummaryWriter``: scalars, histograms, text and hyperparameters into TensorBoard event files."""
import os
import socket
import time
from datetime import datetime

import numpy as np
from google.protobuf import struct_pb2
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.plugins.hparams import api_pb2, metadata as hp_metadata, plugin_data_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from ..._tensor import Tensor, host_array


def _number(value, what):
    """A Python float of a number, a NumPy scalar or a one-element tensor or array."""
    array = host_array(value).reshape(-1) if isinstance(value, (Tensor, np.ndarray)) else np.asarray(value)
    if array.size != 1:
        raise ValueError(f"{what}: expected a single number, got {array.size} values of shape {array.shape}")
    return float(array.reshape(()))


def _tensorflow_bins():
    """torch's default histogram edges ('tensorflow'): 0 and +-1e-12 * 1.1**k up to 1e20."""
    edges, v = [], 1e-12
    while v < 1e20:
        edges.append(v)
        v *= 1.1
    return [-e for e in reversed(edges)] + [0.0] + edges


def histogram_proto(values, bins="tensorflow", max_bins=None):
    """The HistogramProto of ``values`` as torch writes it: NumPy's histogram over ``bins``, at
    most ``max_bins`` buckets (neighbours merged), the empty buckets at both ends dropped but
    for one empty bucket on the left (TensorBoard reads only right edges)."""
    values = host_array(values).astype(np.float64).reshape(-1)
    if values.size == 0:
        raise ValueError("add_histogram: the values are empty")
    counts, edges = np.histogram(values, bins=_tensorflow_bins() if isinstance(bins, str) and
                                 bins == "tensorflow" else bins)
    if max_bins is not None and len(counts) > max_bins:
        group = len(counts) // max_bins
        counts = np.pad(counts, (0, -len(counts) % group)).reshape(-1, group).sum(axis=1)
        edges = np.append(edges[:-1:group], edges[-1])
    used = np.flatnonzero(counts)
    first, last = used[0], used[-1] + 1
    return HistogramProto(min=values.min(), max=values.max(), num=values.size, sum=values.sum(),
                          sum_squares=values.dot(values), bucket_limit=edges[first:last + 1].tolist(),
                          bucket=[0.0] + counts[first:last].tolist())


def _plugin_metadata(name, content=b""):
    return SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=name, content=content))


class SummaryWriter:
    """Writes TensorBoard event files under ``log_dir`` (default ``runs/<date>_<host><comment>``),
    as torch.utils.tensorboard.SummaryWriter: ``add_scalar``, ``add_scalars``, ``add_histogram``,
    ``add_text``, ``add_hparams``, ``flush``, ``close``, and ``with SummaryWriter() as w:``."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        self.purge_step = purge_step
        self.max_queue, self.flush_secs, self.filename_suffix = max_queue, flush_secs, filename_suffix
        self._writers = {}  # log dir -> its EventFileWriter (add_scalars writes one per series)
        self.file_writer = self._writer(self.log_dir)
        if purge_step is not None:  # tells TensorBoard to drop what an earlier run logged from this step on
            self.file_writer.add_event(Event(step=purge_step, file_version="brain.Event:2"))
            self.file_writer.add_event(Event(step=purge_step, session_log=dict(status=1)))

    def _writer(self, log_dir):
        if log_dir not in self._writers:
            self._writers[log_dir] = EventFileWriter(log_dir, self.max_queue, self.flush_secs, self.filename_suffix)
        return self._writers[log_dir]

    def get_logdir(self):
        """The directory the event files are written to."""
        return self.log_dir

    def _add(self, summary, global_step, walltime, writer=None):
        step = None if global_step is None else int(_number(global_step, "global_step"))
        event = Event(summary=summary, wall_time=time.time() if walltime is None else walltime)
        if step is not None:
            event.step = step
        (writer or self.file_writer).add_event(event)

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """One point of the series ``tag``; ``new_style`` stores it as a tensor (float or double)."""
        value = _number(scalar_value, f"add_scalar({tag!r})")
        if new_style:
            tensor = (TensorProto(double_val=[value], dtype="DT_DOUBLE") if double_precision
                      else TensorProto(float_val=[value], dtype="DT_FLOAT"))
            entry = Summary.Value(tag=tag, tensor=tensor, metadata=_plugin_metadata("scalars"))
        else:
            entry = Summary.Value(tag=tag, simple_value=value)
        self._add(Summary(value=[entry]), global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Several series in one chart: each ``tag`` goes to its own run ``<log_dir>/<main_tag>_<tag>``."""
        walltime = time.time() if walltime is None else walltime
        for tag, value in tag_scalar_dict.items():
            writer = self._writer(f"{self.log_dir}/{main_tag.replace('/', '_')}_{tag}")
            entry = Summary.Value(tag=main_tag, simple_value=_number(value, f"add_scalars({main_tag!r}, {tag!r})"))
            self._add(Summary(value=[entry]), global_step, walltime, writer)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        """The distribution of ``values`` (any shape); ``bins`` as NumPy's histogram takes them."""
        histo = histogram_proto(values, bins, max_bins)
        self._add(Summary(value=[Summary.Value(tag=tag, histo=histo)]), global_step, walltime)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """Markdown text, shown by TensorBoard's text plugin under ``<tag>/text_summary``."""
        tensor = TensorProto(dtype="DT_STRING", string_val=[str(text_string).encode("utf-8")],
                             tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
        entry = Summary.Value(tag=f"{tag}/text_summary", metadata=_plugin_metadata("text"), tensor=tensor)
        self._add(Summary(value=[entry]), global_step, walltime)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None, global_step=None):
        """One run of a hyperparameter search: its hparams (numbers, strings, bools, one-element
        tensors) and final metrics, written to ``<log_dir>/<run_name>`` (default: the time)."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        summaries = _hparams_summaries(hparam_dict, metric_dict, hparam_domain_discrete or {})
        with SummaryWriter(os.path.join(self.log_dir, run_name or str(time.time()))) as run:
            for summary in summaries:
                run._add(summary, global_step, None)
            for tag, value in metric_dict.items():
                run.add_scalar(tag, value, global_step)

    def flush(self):
        """Writes the pending events of every open event file to disk."""
        for writer in self._writers.values():
            writer.flush()

    def close(self):
        """Flushes and closes every event file."""
        for writer in self._writers.values():
            writer.close()
        self._writers = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


_HPARAM_KINDS = ((bool, "bool_value", "DATA_TYPE_BOOL"), (str, "string_value", "DATA_TYPE_STRING"),
                 ((int, float), "number_value", "DATA_TYPE_FLOAT64"))


def _hparams_summaries(hparam_dict, metric_dict, domains):
    """The hparams plugin's experiment, session-start and session-end summaries (torch's layout)."""
    start = plugin_data_pb2.SessionStartInfo()
    infos = []
    for name, value in hparam_dict.items():
        if value is None:
            continue
        if isinstance(value, Tensor):
            value = _number(value, f"hparam {name!r}")
        kind = next((k for k in _HPARAM_KINDS if isinstance(value, k[0])), None)
        if kind is None:
            raise ValueError("value should be one of int, float, str, bool, or rlpipe.Tensor")
        _, field, data_type = kind
        setattr(start.hparams[name], field, value)
        domain = None
        if name in domains:
            if not isinstance(domains[name], list) or not all(isinstance(d, type(value)) for d in domains[name]):
                raise TypeError(f"parameter: hparam_domain_discrete[{name}] should be a list of same type as "
                                f"hparam_dict[{name}].")
            domain = struct_pb2.ListValue(values=[struct_pb2.Value(**{field: d}) for d in domains[name]])
        infos.append(api_pb2.HParamInfo(name=name, type=api_pb2.DataType.Value(data_type), domain_discrete=domain))
    experiment = api_pb2.Experiment(hparam_infos=infos, metric_infos=[
        api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag)) for tag in metric_dict])
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.Status.Value("STATUS_SUCCESS"))
    parts = [(hp_metadata.EXPERIMENT_TAG, dict(experiment=experiment)),
             (hp_metadata.SESSION_START_INFO_TAG, dict(session_start_info=start)),
             (hp_metadata.SESSION_END_INFO_TAG, dict(session_end_info=end))]
    return [Summary(value=[Summary.Value(tag=tag, metadata=_plugin_metadata(hp_metadata.PLUGIN_NAME, (
        plugin_data_pb2.HParamsPluginData(version=hp_metadata.PLUGIN_DATA_VERSION, **part).SerializeToString())))])
        for tag, part in parts]
