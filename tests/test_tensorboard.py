"""rlpipe.utils.tensorboard.SummaryWriter: event files read back with TensorBoard's own reader;
histogram buckets as torch 2.13's writer makes them (pasted); the ImportError without the package."""
import importlib
import sys

import numpy as np
import pytest

import rlpipe as r

tensorboard = pytest.importorskip("tensorboard")
from rlpipe.utils.tensorboard import SummaryWriter  # noqa: E402
from rlpipe.utils.tensorboard.writer import histogram_proto  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def _read(log_dir):
    events = EventAccumulator(str(log_dir), size_guidance={"tensors": 0, "scalars": 0, "histograms": 0})
    events.Reload()
    return events


def test_scalars_of_every_kind_read_back(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("loss", r.tensor(0.25), 0)
        w.add_scalar("loss", r.tensor([1.5], dtype=r.float64), 1)
        w.add_scalar("loss", np.float32(2.0), r.tensor(2))
        w.add_scalar("loss", 3, 3, walltime=123.0)
    points = _read(tmp_path).Scalars("loss")
    assert [(p.step, p.value) for p in points] == [(0, 0.25), (1, 1.5), (2, 2.0), (3, 3.0)]
    assert points[-1].wall_time == 123.0


def test_add_scalars_writes_one_run_per_series(tmp_path):
    w = SummaryWriter(tmp_path)
    w.add_scalars("run/x", {"a": 1.0, "b": r.tensor(2.0)}, 5)
    w.close()
    for tag, value in (("a", 1.0), ("b", 2.0)):
        point, = _read(tmp_path / f"run_x_{tag}").Scalars("run/x")
        assert (point.step, point.value) == (5, value)


def test_histogram_text_and_hparams_read_back(tmp_path):
    values = r.tensor([-2.5, -0.3, 0.0, 0.1, 0.1, 0.7, 3.0, 12.0])
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("weights", values, 7)
        w.add_text("hyperparameters", "|param|value|\n|-|-|\n|lr|0.1|", 0)
        w.add_hparams({"lr": 0.1, "opt": "adam", "double": True, "n": r.tensor(3)}, {"hparam/return": 200.0},
                      run_name="trial")
    events = _read(tmp_path)
    histo = events.Histograms("weights")[0]
    assert histo.step == 7 and histo.histogram_value.num == 8 and histo.histogram_value.max == 12.0
    text = events.Tensors("hyperparameters/text_summary")[0].tensor_proto.string_val
    assert text == [b"|param|value|\n|-|-|\n|lr|0.1|"]
    trial = _read(tmp_path / "trial")
    assert [p.value for p in trial.Scalars("hparam/return")] == [200.0]
    from tensorboard.plugins.hparams import plugin_data_pb2
    content = trial.SummaryMetadata("_hparams_/session_start_info").plugin_data.content
    start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    assert start.hparams["lr"].number_value == 0.1 and start.hparams["opt"].string_value == "adam"
    assert start.hparams["double"].bool_value is True and start.hparams["n"].number_value == 3.0


def test_histogram_buckets_match_torch():
    values = np.array([-2.5, -0.3, 0.0, 0.1, 0.1, 0.7, 3.0, 12.0])
    h = histogram_proto(values)  # torch's default 'tensorflow' edges
    assert len(h.bucket) == 619 and [i for i, c in enumerate(h.bucket) if c] == [1, 23, 302, 568, 589, 604, 618]
    assert (h.bucket_limit[0], h.bucket_limit[-1]) == (-2.6170109961884593, 12.025094832485772)
    assert (h.min, h.max, h.num, h.sum, h.sum_squares) == (-2.5, 12.0, 8, 13.100000000000001, 159.85)
    h = histogram_proto(values, 5)
    np.testing.assert_allclose(h.bucket_limit, [-2.5, 0.4, 3.3, 6.2, 9.1, 12.0], rtol=1e-15)
    assert list(h.bucket) == [0, 5, 2, 0, 0, 1]
    h = histogram_proto(values, "auto", max_bins=3)
    assert list(h.bucket_limit) == [-2.5, 2.333333333333333, 7.166666666666666, 12.0]
    assert list(h.bucket) == [0, 6, 1, 1]


@pytest.mark.parametrize("call, error, message", [
    (lambda w: w.add_scalar("x", r.ones(3)), ValueError, "add_scalar('x'): expected a single number, got 3 values"),
    (lambda w: w.add_histogram("h", r.ones(0)), ValueError, "add_histogram: the values are empty"),
    (lambda w: w.add_hparams({"a": [1]}, {}), ValueError, "value should be one of int, float, str, bool"),
    (lambda w: w.add_hparams([("a", 1)], {}), TypeError, "hparam_dict and metric_dict should be dictionary."),
    (lambda w: w.add_hparams({"a": 1}, {}, hparam_domain_discrete={"a": ["x"]}), TypeError,
     "hparam_domain_discrete[a] should be a list of same type as hparam_dict[a]."),
])
def test_bad_values_raise_and_the_writer_stays_usable(tmp_path, call, error, message):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(error) as e:
            call(w)
        assert message in str(e.value)
        w.add_scalar("ok", 1.0, 0)
    assert [p.value for p in _read(tmp_path).Scalars("ok")] == [1.0]


def test_default_log_dir_and_flush(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_trial")
    w.add_scalar("a", 1.0, 0)
    w.flush()
    assert w.get_logdir().startswith("runs") and w.get_logdir().endswith("_trial")
    assert [p.value for p in _read(tmp_path / w.get_logdir()).Scalars("a")] == [1.0]
    w.close()


def test_missing_tensorboard_names_the_extra(monkeypatch):
    for name in [m for m in sys.modules if m == "tensorboard" or m.startswith("tensorboard.")] + ["tensorboard"]:
        monkeypatch.setitem(sys.modules, name, None)  # importing tensorboard (or a part of it) now fails
    for name in [m for m in sys.modules if m.startswith("rlpipe.utils.tensorboard")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ImportError, match=r"pip install 'rlpipe\[tensorboard\]'"):
        importlib.import_module("rlpipe.utils.tensorboard")
