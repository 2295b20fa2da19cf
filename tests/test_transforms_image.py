"""torchrl 0.14's image transforms (rlpipe/envs/transforms_image.py): hand-computed values on small
images, and values recorded with torch 2.13 / torchrl 0.14.1 where rounding matters."""
import os
import sys
import warnings

import numpy as np
import pytest

import rlpipe
from rlpipe.envs import (Bounded, CatFrames, CenterCrop, Composite, Compose, Crop, GrayScale, GymEnv, Resize,
                         ToTensorImage, TransformedEnv, Unbounded, check_env_specs)
from rlpipe.envs._resample import filter_weights, resample
from rlpipe.tensordict import TensorDict


def _img(shape, dtype=np.float32):
    return np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)


# ---- ToTensorImage ------------------------------------------------------------------------------

def test_to_tensor_image_uint8_hwc_to_float_chw():
    image = np.full((2, 3, 3), 51, dtype=np.uint8)
    image[0, 1] = (0, 255, 102)
    out = ToTensorImage()._map(image)
    assert out.shape == (3, 2, 3) and out.dtype == np.float32
    assert out[:, 0, 1].tolist() == [0.0, 1.0, np.float32(0.4)]
    assert out[0, 1, 2] == np.float32(0.2)


def test_to_tensor_image_is_a_permuted_view_as_torchs():
    """torchrl permutes (a view): with nothing to convert, the channels-first image is the input's memory,
    and what follows reads it in place (GrayScale, Resize) with the same values as from a copy."""
    image = np.random.default_rng(0).integers(0, 256, (6, 7, 3)).astype(np.uint8)
    out = ToTensorImage(from_int=False, dtype=rlpipe.uint8)._map(image)
    assert out.shape == (3, 6, 7) and np.shares_memory(out, image)
    np.testing.assert_array_equal(out, np.ascontiguousarray(np.moveaxis(image, -1, 0)))
    np.testing.assert_array_equal(GrayScale()._map(out), GrayScale()._map(np.ascontiguousarray(out)))
    np.testing.assert_array_equal(Resize(3, 4)._map(out), Resize(3, 4)._map(np.ascontiguousarray(out)))


def test_to_tensor_image_options():
    image = np.full((4, 2, 5, 3), 2, dtype=np.uint8)
    assert ToTensorImage(from_int=False)._map(image)[0, 0, 0, 0] == 2.0  # not scaled
    floats = np.full((2, 5, 3), 255.0, dtype=np.float64)
    assert ToTensorImage()._map(floats)[0, 0, 0] == 255.0  # None: a float image is not scaled
    assert ToTensorImage(from_int=True)._map(floats)[0, 0, 0] == 1.0
    assert ToTensorImage(unsqueeze=True)._map(image[0]).shape == (1, 3, 2, 5)
    assert ToTensorImage(unsqueeze=True)._map(image).shape == (4, 3, 2, 5)  # only a 3-dim image
    assert ToTensorImage(dtype=rlpipe.float64)._map(image).dtype == np.float64
    four = np.zeros((2, 5, 4), dtype=np.uint8)
    assert ToTensorImage(shape_tolerant=True)._map(four).shape == (2, 5, 4)
    assert ToTensorImage()._map(four).shape == (4, 2, 5)


def test_to_tensor_image_tensordict_and_spec():
    td = TensorDict({"pixels": rlpipe.tensor(np.full((2, 1, 1, 3), 255, dtype=np.uint8))}, [2])
    ToTensorImage()(td)
    assert td["pixels"].shape == (2, 3, 1, 1) and td["pixels"].dtype is rlpipe.float32
    assert td["pixels"].tolist() == np.ones((2, 3, 1, 1)).tolist()
    spec = Composite(pixels=Bounded(low=0, high=255, shape=(4, 5, 3), dtype=rlpipe.uint8))
    out = ToTensorImage().transform_observation_spec(spec)["pixels"]
    assert isinstance(out, Bounded) and out.shape == (3, 4, 5) and out.dtype is rlpipe.float32
    assert float(out.low.max()) == 0.0 and float(out.high.min()) == 1.0
    unbounded = ToTensorImage(in_keys=["p"]).transform_observation_spec(
        Composite(p=Unbounded(shape=(6, 7, 3), dtype=rlpipe.uint8)))["p"]
    assert unbounded.shape == (3, 6, 7) and unbounded.dtype is rlpipe.float32


def test_image_transform_errors():
    with pytest.raises(ValueError, match=r"ToTensorImage: an image needs at least 3 dims .*got shape \(4, 3\)"):
        ToTensorImage()._map(np.zeros((4, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match="in_keys and out_keys must have the same length, got 1 and 2"):
        GrayScale(in_keys=["a"], out_keys=["b", "c"])
    with pytest.raises(ValueError, match="'reward' is not an image"):
        GrayScale(in_keys=["reward"])
    td = TensorDict({"other": rlpipe.zeros(3, 2, 2)}, [])
    with pytest.raises(KeyError, match="pixels"):
        GrayScale()(td)


# ---- GrayScale --------------------------------------------------------------------------------

def test_grayscale_weights_and_uint8_truncation():
    image = np.zeros((3, 1, 3), dtype=np.uint8)
    image[:, 0, 0] = (10, 200, 30)    # 2.989 + 117.4 + 3.42 = 123.809
    image[:, 0, 1] = (255, 255, 255)  # 0.9999 * 255 = 254.97: torchvision's .to(uint8) truncates
    image[:, 0, 2] = (0, 0, 9)        # 1.026
    out = GrayScale()._map(image)
    assert out.shape == (1, 1, 3) and out.dtype == np.uint8
    assert out.tolist() == [[[123, 254, 1]]]
    floats = np.zeros((2, 3, 1, 1), dtype=np.float32)
    floats[0, :, 0, 0] = (1.0, 0.5, 0.0)
    gray = GrayScale()._map(floats)
    assert gray.shape == (2, 1, 1, 1) and gray.dtype == np.float32
    assert gray[0, 0, 0, 0] == pytest.approx(0.2989 + 0.2935, abs=1e-7)
    one = np.ones((1, 2, 2), dtype=np.float32)
    assert GrayScale()._map(one).tolist() == one.tolist()  # one channel: copied


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64])
def test_grayscale_equals_torchvisions_formula(dtype):
    """torchvision's ``(0.2989 * r + 0.587 * g + 0.114 * b).to(img.dtype)`` written out (each product and sum
    rounded in float32, float64 for float64 images, then truncated) on a random batch of images, to the bit."""
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (2, 3, 21, 16)).astype(dtype)
    if dtype != np.uint8:
        image /= 255
    work = np.float64 if dtype == np.float64 else np.float32
    r, g, b = (image[:, i:i + 1].astype(work) for i in range(3))
    expected = ((work(0.2989) * r + work(0.587) * g) + work(0.114) * b).astype(dtype)
    out = GrayScale()._map(image)
    assert out.dtype == dtype and out.shape == (2, 1, 21, 16)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(GrayScale()._map(np.moveaxis(np.moveaxis(image, 1, -1), -1, 1)), expected)


def test_grayscale_spec_and_errors():
    spec = Composite(p=Bounded(low=0.0, high=1.0, shape=(3, 4, 5), dtype=rlpipe.float32))
    out = GrayScale(in_keys=["p"], out_keys=["g"]).transform_observation_spec(spec)
    assert out["g"].shape == (1, 4, 5) and out["p"].shape == (3, 4, 5)
    assert float(out["g"].high.max()) == pytest.approx(0.9999, abs=1e-6)
    with pytest.raises(ValueError, match=r"GrayScale: images must have 1 or 3 channels at dim -3, got 4"):
        GrayScale()._map(np.zeros((4, 2, 2), dtype=np.float32))


# ---- Crop, CenterCrop -----------------------------------------------------------------------------

def test_crop_height_is_w_and_outside_is_zero():
    image = _img((1, 4, 5))
    out = Crop(2, 3, top=1, left=2)._map(image)  # torchrl: w is the height, h the width
    assert out.tolist() == [[[7, 8, 9], [12, 13, 14]]]
    assert Crop(2)._map(image).tolist() == [[[0, 1], [5, 6]]]
    outside = Crop(2, 2, top=3, left=4)._map(image)
    assert outside.tolist() == [[[19, 0], [0, 0]]]


def test_center_crop():
    image = _img((1, 5, 6))
    assert CenterCrop(3, 2)._map(image).tolist() == [[[8, 9], [14, 15], [20, 21]]]  # top 1, left 2
    four = _img((4, 4))
    assert CenterCrop(1)._map(four).tolist() == [[10]]  # round(1.5) = 2, half to even as Python's
    small = _img((2, 2)) + 1
    padded = CenterCrop(4)._map(small)
    assert padded.tolist() == [[0, 0, 0, 0], [0, 1, 2, 0], [0, 3, 4, 0], [0, 0, 0, 0]]
    odd = CenterCrop(5, 4)._map(_img((2, 3)) + 1)  # one row padded above, two below; one column right
    assert odd.tolist() == [[0, 0, 0, 0], [1, 2, 3, 0], [4, 5, 6, 0], [0, 0, 0, 0], [0, 0, 0, 0]]


def test_crop_spec_and_errors():
    spec = Composite(pixels=Unbounded(shape=(3, 10, 12), dtype=rlpipe.float32))
    assert CenterCrop(4, 6).transform_observation_spec(spec.clone())["pixels"].shape == (3, 4, 6)
    assert Crop(5).transform_observation_spec(spec)["pixels"].shape == (3, 5, 5)
    with pytest.raises(ValueError, match="Crop: w must be a positive int, got 0"):
        Crop(0)
    with pytest.raises(ValueError, match="CenterCrop: h must be a positive int, got -2"):
        CenterCrop(3, -2)


# ---- Resize --------------------------------------------------------------------------------------

# torch 2.13: F.interpolate(x[None], size, mode, align_corners=False, antialias=True)[0] (torchvision's resize of
# a float image, which torchrl's Resize runs) of x = (arange(3*7*9).reshape(3, 7, 9) * 37 % 256) / 255, float32
_TORCH_DOWN_BILINEAR_4x5_CHANNEL0 = [
    [0.2410831, 0.4515640, 0.5895205, 0.4339636, 0.2696812],
    [0.5704426, 0.4921765, 0.3580900, 0.4766079, 0.5614791],
    [0.4032269, 0.4880980, 0.6066159, 0.4725294, 0.3942633],
    [0.6950247, 0.5307423, 0.3751853, 0.5131419, 0.7236227]]


def _resize_input():
    return ((np.arange(3 * 7 * 9).reshape(3, 7, 9) * 37) % 256).astype(np.float32) / 255.0


def test_resize_matches_torch_antialiased_bilinear():
    out = Resize(4, 5)._map(_resize_input())
    assert out.shape == (3, 4, 5) and out.dtype == np.float32
    np.testing.assert_allclose(out[0], _TORCH_DOWN_BILINEAR_4x5_CHANNEL0, atol=1e-6)


def test_resize_hand_computed():
    # a 2x downscale with bilinear antialiasing weighs the 4 nearest pixels 1/8, 3/8, 3/8, 1/8 (clamped at the
    # border: 3/7, 3/7, 1/7 ... renormalised); a constant image stays constant
    flat = np.full((1, 6, 6), 77, dtype=np.uint8)
    assert Resize(3)._map(flat).tolist() == np.full((1, 3, 3), 77).tolist()
    row = np.array([[0, 0, 80, 80, 0, 0]], dtype=np.float32).repeat(2, axis=0)[None]  # [1, 2, 6]
    out = Resize(2, 3)._map(row)
    # output column 1 is centred on input 2.5: weights 1/8 3/8 3/8 1/8 over columns 1..4 -> 80 * 6/8 = 60
    # column 0 is centred on 0.5: columns 0, 1, 2 weigh 3/8, 3/8, 1/8 -> renormalised 80 * (1/8) / (7/8)
    np.testing.assert_allclose(out[0, 0], [80 / 7, 60, 80 / 7], rtol=1e-6)


def test_resize_nearest_and_same_size():
    image = _img((1, 4, 6))
    near = Resize(2, 3, interpolation="nearest")._map(image)
    assert near.tolist() == [[[0, 2, 4], [12, 14, 16]]]  # floor(i * 2)
    exact = Resize(2, 3, interpolation="nearest-exact")._map(image)
    assert exact.tolist() == [[[7, 9, 11], [19, 21, 23]]]  # floor((i + 0.5) * 2)
    assert Resize(4, 6)._map(image) is image  # torchrl returns it unchanged


def test_resize_spec_batch_dims_and_pair():
    spec = Composite(pixels=Bounded(low=0.0, high=1.0, shape=(2, 3, 10, 12), dtype=rlpipe.float32))
    out = Resize((5, 7)).transform_observation_spec(spec)["pixels"]
    assert isinstance(out, Bounded) and out.shape == (2, 3, 5, 7)
    assert float(out.low.min()) == 0.0 and float(out.high.max()) == pytest.approx(1.0)
    batch = np.random.default_rng(0).random((2, 4, 3, 8, 8), dtype=np.float32)
    out = Resize(4)._map(batch)
    assert out.shape == (2, 4, 3, 4, 4)
    np.testing.assert_allclose(out[1, 2], Resize(4)._map(batch[1, 2]))


def test_resize_errors(monkeypatch):
    with pytest.raises(ValueError, match=r"Resize: interpolation must be one of .*got 'area'"):
        Resize(4, interpolation="area")
    with pytest.raises(ValueError, match="Resize: w must be a positive int, got 2.5"):
        Resize(2.5)
    monkeypatch.setitem(sys.modules, "PIL", None)
    assert Resize(2, interpolation="nearest")._map(_img((1, 4, 4))).shape == (1, 2, 2)  # no Pillow needed
    assert Resize(2)._map(_img((1, 4, 4))).shape == (1, 2, 2)  # nor for the antialiased filters


_GOLDEN = np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "resize_golden.npz"))
_GOLDEN_CASES = sorted({name.split("/")[0] for name in _GOLDEN.files})


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("case", _GOLDEN_CASES)
def test_resize_matches_torch_recorded(case, mode):
    """torch 2.13's antialiased interpolate (tests/fixtures/make_resize_golden.py), down, up and mixed: float32
    to float32 rounding; uint8 as torchvision rounds it, equal but where torch's float result is a tie at .5."""
    image = _GOLDEN[f"{case}/input"]
    ref, ref8 = _GOLDEN[f"{case}/{mode}/float32"], _GOLDEN[f"{case}/{mode}/uint8"]
    resize = Resize(*ref.shape[-2:], interpolation=mode)
    out = resize._map(image.astype(np.float32))
    assert out.dtype == np.float32 and out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-3)  # torch's weights are float32: within 4e-6 of 255
    out8 = resize._map(image)
    assert out8.dtype == np.uint8
    differ = out8 != ref8
    assert np.abs(out8.astype(int) - ref8).max() <= 1
    assert np.all(np.abs(ref[differ] % 1 - 0.5) < 1e-3), "uint8 differs from torch away from a rounding tie"
    assert differ.mean() < 0.01


@pytest.mark.parametrize("size_in,size_out", [(210, 84), (160, 84), (84, 210), (7, 3), (3, 7), (5, 1), (1, 4),
                                              (100, 99), (99, 100), (64, 17)])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_blocked_resampling_equals_dense_weights(size_in, size_out, mode):
    """The blocked band products equal the dense weight matrix applied in float64, for shrinking and growing
    sizes (the block layout's strides, windows and paddings), one axis at a time."""
    image = np.random.default_rng(size_in * 7 + size_out).random((3, size_in, 5))
    dense = np.einsum("oi,pic->poc", filter_weights(size_in, size_out, mode), image)
    np.testing.assert_allclose(resample(image, size_out, 5, mode, np.float64), dense, rtol=1e-12, atol=1e-12)
    dense_cols = np.einsum("oi,pci->pco", filter_weights(size_in, size_out, mode), image.transpose(0, 2, 1))
    out_cols = resample(image.transpose(0, 2, 1), 5, size_out, mode, np.float64)
    np.testing.assert_allclose(out_cols, dense_cols, atol=1e-12)


def test_blocked_resampling_many_sizes():
    """Brute force over many size pairs (1 to 60, both ways, both filters): blocked equals dense."""
    rng = np.random.default_rng(11)
    for size_in, size_out in rng.integers(1, 61, (60, 2)):
        image = rng.random((2, size_in, 3))
        for mode in ("bilinear", "bicubic"):
            dense = np.einsum("oi,pic->poc", filter_weights(size_in, size_out, mode), image)
            np.testing.assert_allclose(resample(image, size_out, 3, mode, np.float64), dense, atol=1e-12,
                                       err_msg=f"{size_in} -> {size_out} {mode}")


def test_resize_dtypes_as_torchvision():
    """float64 resampled in float64 (torchvision keeps it), float16 through float32 and back, int16 rounded half
    to even; the values equal the dense weights applied in float64 (rounded for the integer image)."""
    rng = np.random.default_rng(5)
    image = rng.integers(-300, 300, (2, 9, 12)).astype(np.float64)
    dense = np.einsum("oi,pij,qj->poq", filter_weights(9, 4, "bilinear"), image, filter_weights(12, 5, "bilinear"))
    out64 = Resize(4, 5)._map(image)
    assert out64.dtype == np.float64
    np.testing.assert_allclose(out64, dense, atol=1e-11)
    out16 = Resize(4, 5)._map(image.astype(np.float16))
    assert out16.dtype == np.float16
    np.testing.assert_allclose(out16, dense, rtol=2e-3, atol=0.25)
    out_int = Resize(4, 5)._map(image.astype(np.int16))
    assert out_int.dtype == np.int16
    np.testing.assert_array_equal(out_int, np.rint(dense))
    assert Resize(4, 5)._map(np.zeros((0, 3, 9, 12), dtype=np.uint8)).shape == (0, 3, 4, 5)  # an empty batch


def test_filter_weights_hand_computed():
    # 4 -> 2 bilinear: each output is centred between two inputs, stretched triangle of support 2: weights
    # 1/8 3/8 3/8 1/8 clipped at the border and renormalised: [3, 3, 1] / 7
    np.testing.assert_allclose(filter_weights(4, 2, "bilinear"), [[3 / 7, 3 / 7, 1 / 7, 0], [0, 1 / 7, 3 / 7, 3 / 7]])
    # the same size is the identity for both filters
    np.testing.assert_allclose(filter_weights(5, 5, "bicubic"), np.eye(5), atol=1e-15)


# ---- CatFrames in an env ------------------------------------------------------------------------

def test_pixels_pipeline_in_gym_env():
    pytest.importorskip("pygame")
    env = TransformedEnv(GymEnv("CartPole-v1", from_pixels=True, pixels_only=False), Compose(
        ToTensorImage(in_keys=["pixels"], out_keys=["p"]), GrayScale(in_keys=["p"]), Resize(8, 12, in_keys=["p"]),
        CatFrames(N=3, dim=-3, in_keys=["p"], out_keys=["stack"])))
    spec = env.observation_spec
    assert spec["p"].shape == (1, 8, 12) and spec["stack"].shape == (3, 8, 12)
    assert spec["pixels"].shape == (400, 600, 3)
    check_env_specs(env, seed=0)
    data = env.rollout(4)
    p, stack, next_stack = (data[k].numpy() for k in ("p", "stack", ("next", "stack")))
    assert stack.shape == (4, 3, 8, 12) and stack.dtype == np.float32
    np.testing.assert_array_equal(stack[0], np.concatenate([p[0]] * 3))  # "same" padding at the reset
    np.testing.assert_array_equal(stack[2], np.concatenate([p[0], p[1], p[2]]))
    np.testing.assert_array_equal(next_stack[2], np.concatenate([p[1], p[2], data["next", "p"].numpy()[2]]))


def _expected_windows(obs, first, n, padding_value=None):
    """The window of each step of one env's rollout, from its observations and episode starts."""
    windows, start = [], 0
    for t in range(len(obs)):
        if first[t]:
            start = t
        frames = [obs[max(j, start)] if (j >= start or padding_value is None) else np.full_like(obs[t], padding_value)
                  for j in range(t - n + 1, t + 1)]
        windows.append(np.concatenate(frames, -1))
    return np.stack(windows)


@pytest.mark.parametrize("padding", ["same", "constant"])
def test_catframes_partial_resets_of_a_vector_env(padding):
    env = TransformedEnv(GymEnv("CartPole-v1", num_envs=3),
                         CatFrames(N=3, dim=-1, in_keys=["observation"], out_keys=["stack"], padding=padding,
                                   padding_value=-5.0))
    assert env.observation_spec["stack"].shape == (3, 12)
    env.set_seed(1)
    data = env.rollout(40, break_when_any_done=False)
    obs, stack = data["observation"].numpy(), data["stack"].numpy()
    done = data["next", "done"].numpy()[..., 0]
    assert done.any(), "the rollout should end an episode somewhere"
    for e in range(3):
        first = np.concatenate([[True], done[e, :-1]])
        expected = _expected_windows(obs[e], first, 3, None if padding == "same" else -5.0)
        np.testing.assert_array_equal(stack[e], expected)
    nxt = data["next", "stack"].numpy()
    np.testing.assert_array_equal(nxt[..., :8], stack[..., 4:])  # the next window drops the oldest frame
    np.testing.assert_array_equal(nxt[..., 8:], data["next", "observation"].numpy())


def test_catframes_step_path_skips_the_inverse(monkeypatch):
    """In an env CatFrames never changes the action (its inverse is refused there), so the step path does not
    run the inverse's TensorDict round trip: stepping works with ``_inv_call`` broken."""
    env = TransformedEnv(GymEnv("CartPole-v1"), CatFrames(N=2, dim=-1, in_keys=["observation"]))
    assert not env.transform._inverts_actions()

    def broken(self, tensordict):
        raise AssertionError("the step path ran CatFrames' inverse")
    monkeypatch.setattr(CatFrames, "_inv_call", broken)
    env.set_seed(0)
    data = env.rollout(5)
    obs, nxt = data["observation"].numpy(), data["next", "observation"].numpy()
    assert obs.shape == (5, 8)
    np.testing.assert_array_equal(nxt[:-1], obs[1:])
    np.testing.assert_array_equal(nxt[:, :4], obs[:, 4:])  # each step drops the oldest frame


def test_catframes_as_inverse_refuses_an_env_then_works():
    transform = CatFrames(N=2, dim=-1, in_keys=["observation"], as_inverse=True)
    env = TransformedEnv(GymEnv("CartPole-v1"), transform)
    with pytest.raises(RuntimeError, match="CatFrames as inverse is not supported as a transform for environments"):
        env.reset()
    transform.as_inverse = False
    assert env.reset()["observation"].shape == (8,)


# ---- CatFrames outside an env (replay buffers) ----------------------------------------------------

# torchrl 0.14.1: CatFrames(N=3, dim=-1, in_keys=["obs", ("next", "obs")], padding=..., padding_value=-1) on
# obs = arange(12).reshape(2, 6, 1) + 1, next obs = obs + 100, ("next", "done") set at [0, 2] and [1, 3]
_TORCHRL_CAT = {
    "same": (
        [[[1, 1, 1], [1, 1, 2], [1, 2, 3], [4, 4, 4], [4, 4, 5], [4, 5, 6]],
         [[7, 7, 7], [7, 7, 8], [7, 8, 9], [8, 9, 10], [11, 11, 11], [11, 11, 12]]],
        [[[1, 1, 101], [1, 101, 102], [101, 102, 103], [4, 4, 104], [4, 104, 105], [104, 105, 106]],
         [[7, 7, 107], [7, 107, 108], [107, 108, 109], [108, 109, 110], [11, 11, 111], [11, 111, 112]]]),
    "constant": (
        [[[-1, -1, 1], [-1, 1, 2], [1, 2, 3], [-1, -1, 4], [-1, 4, 5], [4, 5, 6]],
         [[-1, -1, 7], [-1, 7, 8], [7, 8, 9], [8, 9, 10], [-1, -1, 11], [-1, 11, 12]]],
        [[[-1, 1, 101], [1, 101, 102], [101, 102, 103], [-1, 4, 104], [4, 104, 105], [104, 105, 106]],
         [[-1, 7, 107], [7, 107, 108], [107, 108, 109], [108, 109, 110], [-1, 11, 111], [11, 111, 112]]]),
}


def _trajectories(names=None):
    obs = np.arange(12, dtype=np.float32).reshape(2, 6, 1) + 1
    done = np.zeros((2, 6, 1), dtype=bool)
    done[0, 2] = done[1, 3] = True
    td = TensorDict({"obs": rlpipe.tensor(obs), "next": {"obs": rlpipe.tensor(obs + 100),
                                                          "done": rlpipe.tensor(done)}}, [2, 6])
    if names:
        td.refine_names(*names)
    return td


@pytest.mark.parametrize("padding", ["same", "constant"])
def test_catframes_forward_matches_torchrl(padding):
    transform = CatFrames(N=3, dim=-1, in_keys=["obs", ("next", "obs")], padding=padding, padding_value=-1)
    with pytest.warns(UserWarning, match="marked as 'time'"):
        out = transform(_trajectories())
    root, nxt = _TORCHRL_CAT[padding]
    assert out["obs"].tolist() == root
    assert out["next", "obs"].tolist() == nxt
    alone = CatFrames(N=3, dim=-1, in_keys=["obs"], padding=padding, padding_value=-1)(_trajectories(["b", "time"]))
    assert alone["obs"].tolist() == root  # torchrl: the same windows without the next key


def test_catframes_forward_time_dim_first_and_image_windows():
    td = _trajectories(["b", "time"])
    swapped = TensorDict({"obs": td["obs"].transpose(0, 1), "next": {"done": td["next", "done"].transpose(0, 1)}},
                         [6, 2])
    swapped.refine_names("time", None)
    out = CatFrames(N=3, dim=-1, in_keys=["obs"])(swapped)
    assert out["obs"].transpose(0, 1).tolist() == _TORCHRL_CAT["same"][0]
    images = np.arange(4 * 2 * 2, dtype=np.float32).reshape(4, 1, 2, 2)  # [time, C, H, W], one trajectory
    td = TensorDict({"pixels": rlpipe.tensor(images), "next": {"done": rlpipe.zeros(4, 1, dtype=rlpipe.bool)}},
                    [4], names=["time"])
    out = CatFrames(N=2, dim=-3)(td)["pixels"].numpy()
    assert out.shape == (4, 2, 2, 2)
    np.testing.assert_array_equal(out[0], np.concatenate([images[0], images[0]]))
    np.testing.assert_array_equal(out[3], np.concatenate([images[2], images[3]]))


def test_catframes_inverse_and_errors():
    transform = CatFrames(N=3, dim=-1, in_keys=["obs"], as_inverse=True)
    td = _trajectories(["b", "time"])
    assert transform(td)["obs"].shape == (2, 6, 1)  # forward leaves it
    assert transform.inv(td)["obs"].tolist() == _TORCHRL_CAT["same"][0]
    with pytest.raises(ValueError, match="dim must be < 0"):
        CatFrames(N=3, dim=0)
    with pytest.raises(ValueError, match="padding must be one of"):
        CatFrames(N=3, dim=-1, padding="edge")
    with pytest.raises(RuntimeError, match="'zeros' will is deprecated"):
        CatFrames(N=3, dim=-1, padding="zeros")
    with pytest.raises(ValueError, match="CatFrames: N must be a positive int, got 0"):
        CatFrames(N=0, dim=-1)
    transform = CatFrames(N=2, dim=-1, in_keys=["obs"])
    with pytest.raises(ValueError, match="cannot process unbatched tensordict"):
        transform(TensorDict({"obs": rlpipe.zeros(3)}, []))
    with pytest.raises(KeyError, match=r"requires the \('next', 'done'\) entry"):
        transform(TensorDict({"obs": rlpipe.zeros(2, 3)}, [2], names=["time"]))
    with pytest.raises(ValueError, match="dim -2 must be a feature dim of the entries"):
        CatFrames(N=2, dim=-2, in_keys=["obs"])(_trajectories(["b", "time"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert transform(_trajectories(["b", "time"]))["obs"].shape == (2, 6, 2)  # still usable


def test_catframes_spec():
    spec = Composite(pixels=Bounded(low=0.0, high=1.0, shape=(1, 4, 4), dtype=rlpipe.float32),
                     observation=Unbounded(shape=(5,), dtype=rlpipe.float32))
    out = CatFrames(N=4, dim=-3).transform_observation_spec(spec)
    assert isinstance(out["pixels"], Bounded) and out["pixels"].shape == (4, 4, 4)
    assert float(out["pixels"].high.min()) == 1.0
    out = CatFrames(N=2, dim=-1, in_keys=["observation"], out_keys=["o2"]).transform_observation_spec(out)
    assert out["o2"].shape == (10,) and out["observation"].shape == (5,)


# ---- FrameSkipTransform, NoopResetEnv, EndOfLifeTransform (ale_py is not installed: a fake env with lives) ----

class _CountingEnv:
    """Observation: the steps since the reset; reward 1 a step; terminates after ``length`` steps;
    ``ale.lives()`` starts at 3 and drops every second step, as an ALE env exposes it."""

    def __new__(cls, length=5):
        gym = pytest.importorskip("gymnasium")

        class CountingEnv(gym.Env):
            observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
            action_space = gym.spaces.Discrete(2)

            def __init__(self):
                self.length, self.t, self.n_lives = length, 0, 3
                self.ale = type("Ale", (), {"lives": lambda _: self.n_lives})()

            def _obs(self):
                return np.array([self.t], dtype=np.float32)

            def reset(self, seed=None, options=None):
                super().reset(seed=seed)
                self.t, self.n_lives = 0, 3
                return self._obs(), {}

            def step(self, action):
                self.t += 1
                self.n_lives -= self.t % 2 == 0
                return self._obs(), 1.0, self.t >= self.length, False, {}

        return CountingEnv()


def _wrapped(length, *transforms):
    from rlpipe.envs import GymWrapper
    return TransformedEnv(GymWrapper(_CountingEnv(length)), Compose(*transforms))


def test_frame_skip_repeats_and_sums_rewards():
    from rlpipe.envs import FrameSkipTransform
    data = _wrapped(5, FrameSkipTransform(2)).rollout(5)
    assert data["next", "observation"].numpy()[:, 0].tolist() == [2, 4, 5]  # stops at the episode's end
    assert data["next", "reward"].numpy()[:, 0].tolist() == [2, 2, 1]
    assert data["next", "terminated"].numpy()[:, 0].tolist() == [False, False, True]
    with pytest.raises(ValueError, match="frame_skip should have a value greater or equal to one, got 0"):
        FrameSkipTransform(0)
    with pytest.raises(RuntimeError, match="can only be used when appended to a transformed env"):
        FrameSkipTransform(2)(TensorDict({}, []))


def test_base_env_transforms_must_come_first():
    from rlpipe.envs import FrameSkipTransform, StepCounter
    env = _wrapped(5, StepCounter(), FrameSkipTransform(2))
    with pytest.raises(NotImplementedError, match="FrameSkipTransform must be the first transform of its env"):
        env.rollout(2)


def test_end_of_life_may_follow_noop_reset():
    """torchrl's Atari ``make_env`` order: NoopResetEnv, then EndOfLifeTransform reading the lives
    the noops left (hand-counted: lives drop at steps 2 and 4)."""
    from rlpipe.envs import EndOfLifeTransform, NoopResetEnv
    env = _wrapped(10, NoopResetEnv(3, random=False), EndOfLifeTransform())
    reset = env.reset()
    assert reset["observation"].tolist() == [3.0] and reset["lives"].item() == 2
    data = env.rollout(2)
    assert data["next", "observation"].numpy()[:, 0].tolist() == [4, 5]
    assert data["next", "lives"].numpy().tolist() == [1, 1]
    assert data["next", "end-of-life"].numpy()[:, 0].tolist() == [True, False]


def test_frame_making_transform_after_end_of_life_refused():
    from rlpipe.envs import EndOfLifeTransform, NoopResetEnv
    env = _wrapped(10, EndOfLifeTransform(), NoopResetEnv(3, random=False))
    with pytest.raises(NotImplementedError, match=r"NoopResetEnv must be the first transform of its env.*preceded "
                                                  r"only by NoopResetEnv, FrameSkipTransform; got "
                                                  r"\['EndOfLifeTransform'\] before it"):
        env.reset()
    env = _wrapped(10, EndOfLifeTransform())
    assert env.reset()["lives"].item() == 3  # the env stays usable with a valid stack


def test_noop_reset():
    from rlpipe.envs import NoopResetEnv
    assert _wrapped(10, NoopResetEnv(3, random=False)).reset()["observation"].tolist() == [3.0]
    rlpipe.manual_seed(0)
    counts = {int(_wrapped(10, NoopResetEnv(3)).reset()["observation"][0]) for _ in range(12)}
    assert counts <= {0, 1, 2} and len(counts) > 1
    env = _wrapped(2, NoopResetEnv(3, random=False))
    with pytest.raises(RuntimeError, match=r"repeatedly done or truncated before the sampled number of noops \(=3\)"):
        env.reset()
    batched = TransformedEnv(GymEnv("CartPole-v1", num_envs=2), NoopResetEnv(2))
    with pytest.raises(ValueError, match="NoopResetEnv is designed to work on single env instances"):
        batched.reset()
    with pytest.raises(ValueError, match="noops must be a non-negative int, got -1"):
        NoopResetEnv(-1)


def test_end_of_life():
    from rlpipe.envs import EndOfLifeTransform
    env = _wrapped(7, EndOfLifeTransform())
    spec = env.observation_spec
    assert spec["end-of-life"].shape == (1,) and spec["end-of-life"].dtype is rlpipe.bool
    assert spec["lives"].shape == () and spec["lives"].dtype is rlpipe.int64
    check_env_specs(env, seed=0)
    data = env.rollout(10)
    assert data["lives"].tolist()[0] == 3 and not data["end-of-life"].numpy()[0, 0]
    assert data["next", "lives"].tolist() == [3, 2, 2, 1, 1, 0, 0]
    assert data["next", "end-of-life"].numpy()[:, 0].tolist() == [False, True, False, True, False, True, True]
    assert data["next", "done"].numpy()[:, 0].tolist() == [False] * 6 + [True]  # a lost life does not end it
    with pytest.raises(NotImplementedError, match="one done key, 'done'; got 'terminated'"):
        EndOfLifeTransform(done_key="terminated")


def test_catframes_in_a_collector():
    from rlpipe.collectors import SyncDataCollector
    env = TransformedEnv(GymEnv("CartPole-v1", num_envs=2),
                         CatFrames(N=4, dim=-1, in_keys=["observation"], out_keys=["stack"]))
    env.set_seed(3)
    collector = SyncDataCollector(env, None, frames_per_batch=60, total_frames=60)
    data = next(iter(collector))
    collector.shutdown()
    stack, nxt = data["stack"].numpy(), data["next", "stack"].numpy()
    done = data["next", "done"].numpy()[..., 0]
    assert done.any()
    np.testing.assert_array_equal(nxt[..., 12:], data["next", "observation"].numpy())
    np.testing.assert_array_equal(stack[..., 12:], data["observation"].numpy())
    carried = ~done[:, :-1]  # where no episode ended, the next root window is the step's next window
    np.testing.assert_array_equal(stack[:, 1:][carried], nxt[:, :-1][carried])
    restarted = done[:, :-1]  # a new episode starts with four copies of its first observation
    first = data["observation"].numpy()[:, 1:][restarted]
    np.testing.assert_array_equal(stack[:, 1:][restarted], np.concatenate([first] * 4, -1))


def test_catframes_single_env_restarts_after_done():
    env = TransformedEnv(GymEnv("CartPole-v1"), CatFrames(N=3, dim=-1, in_keys=["observation"], out_keys=["s"]))
    env.set_seed(0)
    data = env.rollout(60, break_when_any_done=False)
    done = data["next", "done"].numpy()[:, 0]
    assert done.any()
    first = np.concatenate([[True], done[:-1]])
    expected = _expected_windows(data["observation"].numpy(), first, 3)
    np.testing.assert_array_equal(data["s"].numpy(), expected)


def test_catframes_tensordict_methods_and_passive_forwards():
    from rlpipe.envs import EndOfLifeTransform, NoopResetEnv
    transform = CatFrames(N=3, dim=-1, in_keys=["obs"], out_keys=["stack"], padding="constant", padding_value=9)
    reset = transform._reset(TensorDict({}, [2]), TensorDict({"obs": rlpipe.tensor([[1.0], [2.0]])}, [2]))
    assert reset["stack"].tolist() == [[9, 9, 1], [9, 9, 2]]
    nxt = transform._step(reset, TensorDict({"obs": rlpipe.tensor([[3.0], [4.0]])}, [2]))
    assert nxt["stack"].tolist() == [[9, 1, 3], [9, 2, 4]]
    td = TensorDict({"done": rlpipe.zeros(1, dtype=rlpipe.bool)}, [])
    assert NoopResetEnv()(td) is td  # torchrl's _call: unchanged
    # torchrl 0.14's EndOfLifeTransform.forward raises (it reads the env's lives): FORWARD_NOT_IMPLEMENTED
    with pytest.raises(RuntimeError, match="cannot be executed without a parent environment"):
        EndOfLifeTransform()(td)
