"""rlpipe.record: CSVLogger's files (torchrl's layout), generate_exp_name/get_logger, GymEnv(from_pixels=True)
and VideoRecorder writing an mp4 that is read back (frame count, size). Frame counts per rollout were measured
with torchrl 0.14.1 (14 steps -> 7 frames at the default skip of 2)."""
import os
import re

import numpy as np
import pytest

import rlpipe as r
from rlpipe.record import CSVLogger, VideoRecorder, generate_exp_name, get_logger


def test_csv_logger_layout_and_contents(tmp_path):
    logger = CSVLogger(exp_name="exp", log_dir=str(tmp_path))
    logger.log_scalar("loss", 0.5)
    logger.log_scalar("loss", r.tensor(0.25))
    logger.log_scalar("loss", 1, step=10)
    logger.log_hparams({"lr": 0.01, "batch": 32})
    root = tmp_path / "exp"
    assert sorted(os.listdir(root)) == ["scalars", "texts", "videos"]
    assert (root / "scalars" / "loss.csv").read_text() == "0,0.5\n1,0.25\n10,1.0\n"
    assert (root / "texts" / "hparams0.txt").read_text() == "batch: 32\nlr: 0.01"
    assert logger.exp_name == "exp" and logger.log_dir == str(tmp_path)
    with pytest.raises(NotImplementedError, match="histograms"):
        logger.log_histogram("h", [1, 2])


def test_csv_logger_videos_pt_and_bad_inputs(tmp_path):
    logger = CSVLogger(exp_name="exp", log_dir=str(tmp_path))
    video = r.zeros(1, 4, 3, 8, 10, dtype=r.uint8)
    logger.log_video("clip", video)
    logger.log_video("clip", video)
    loaded = r.load(str(tmp_path / "exp" / "videos" / "clip_1.pt"))
    assert tuple(loaded.shape) == (1, 4, 3, 8, 10)
    with pytest.raises(Exception, match=r"Should be \(\(N\), T, C, H, W\)"):
        logger.log_video("clip", r.zeros(4, 3, 8, 10, dtype=r.uint8))
    with pytest.raises(ValueError, match="Unknown video format gif"):
        CSVLogger(exp_name="x", log_dir=str(tmp_path), video_format="gif")


def test_generate_exp_name_and_get_logger(tmp_path):
    name = generate_exp_name("DQN", "cartpole")
    assert re.fullmatch(r"DQN_cartpole_[0-9a-f]{8}_\d\d_\d\d_\d\d-\d\d_\d\d_\d\d", name)
    assert isinstance(get_logger("csv", str(tmp_path), "e"), CSVLogger)
    assert get_logger("", str(tmp_path), "e") is None
    with pytest.raises(ValueError, match="'wandb' is not supported"):
        get_logger("wandb", str(tmp_path), "e")


def test_video_recorder_frames_outside_an_env():
    rec = VideoRecorder(None, "v")
    assert rec.skip == 1
    rec._call({("pixels",): np.full((5, 6, 3), 7, dtype=np.uint8)})
    rec._call({("pixels",): np.zeros((3, 5, 6), dtype=np.uint8)})  # channels first
    rec._call({("pixels",): np.zeros((5, 6), dtype=np.uint8)})  # grey
    assert [f.shape for f in rec.obs] == [(3, 5, 6)] * 3 and rec.obs[0][0, 0, 0] == 7
    with pytest.raises(RuntimeError, match="Invalid observation shape"):
        rec._call({("pixels",): np.zeros((5, 6, 4), dtype=np.uint8)})
    with pytest.raises(ValueError, match="max_frames must be a positive integer"):
        VideoRecorder(None, "v", max_frames=0)
    rec.dump()  # no logger: the buffer is emptied
    assert rec.obs == [] and rec.iter == 1


@pytest.fixture
def pixels_env(monkeypatch):
    pytest.importorskip("gymnasium")
    pytest.importorskip("pygame")
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    from rlpipe.envs import GymEnv
    return lambda **kw: GymEnv("CartPole-v1", from_pixels=True, **kw)


def test_gym_env_from_pixels(pixels_env):
    env = pixels_env(pixels_only=False)
    spec = env.observation_spec["pixels"]
    assert tuple(spec.shape) == (400, 600, 3) and spec.dtype is r.uint8  # torchrl: UnboundedDiscrete uint8
    env.set_seed(0)  # random actions 0, 1, 0 (after some other tests' draws) bring back the first frame
    rollout = env.rollout(3, break_when_any_done=False)
    assert tuple(rollout["pixels"].shape) == (3, 400, 600, 3) and tuple(rollout["observation"].shape) == (3, 4)
    assert tuple(rollout["next", "pixels"].shape) == (3, 400, 600, 3)
    assert int(rollout["pixels"].max()) == 255 and not (rollout["pixels"][0] == rollout["next", "pixels"][2]).all()
    assert list(pixels_env().observation_spec.keys()) == ["pixels"]


def test_video_recorder_writes_an_mp4(pixels_env, tmp_path):
    imageio = pytest.importorskip("imageio")
    pytest.importorskip("imageio_ffmpeg")
    from rlpipe.envs import TransformedEnv
    logger = CSVLogger(exp_name="dqn", log_dir=str(tmp_path), video_format="mp4", video_fps=10)
    recorder = VideoRecorder(logger, tag="video")
    env = TransformedEnv(pixels_env(pixels_only=False), recorder)
    env.set_seed(0)
    rollout = env.rollout(max_steps=9, break_when_any_done=False)
    assert tuple(rollout.batch_size) == (9,)
    assert len(recorder.obs) == 5  # 10 frames (reset + 9 steps), one in two kept
    recorder.dump()
    path = tmp_path / "dqn" / "videos" / "video_0.mp4"
    reader = imageio.get_reader(str(path))
    assert reader.count_frames() == 5
    meta = reader.get_meta_data()
    assert meta["size"] == (600, 400) and meta["fps"] == 10
    first = reader.get_data(0)
    assert first.shape == (400, 600, 3) and first.mean() > 100  # CartPole's white background
    assert recorder.obs == [] and recorder.iter == 1


def test_tensorboard_logger_event_file(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from rlpipe.record import TensorboardLogger
    logger = TensorboardLogger(exp_name="tb", log_dir=str(tmp_path))
    logger.log_scalar("reward", 1.5, step=3)
    logger.log_scalar("reward", 2.5, step=4)
    logger.log_hparams({"lr": 0.1})
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("reward")] == [(3, 1.5), (4, 2.5)]
