"""Replay buffers written by several processes (torchrl 0.14's ``shared=True``/``share()`` and
``shared_init``): every process's writes land in the same storage, none is lost."""
import multiprocessing

import pytest

import rlpipe
from rlpipe.data import LazyMemmapStorage, LazyTensorStorage, ListStorage, ReplayBuffer
from rlpipe.tensordict import TensorDict


def _write(rb, worker, queue):
    index = rb.extend(TensorDict({"x": rlpipe.full((2,), worker)}, [2]))
    queue.put((rb[index]["x"].tolist(), len(rb) >= 2))


def _run_workers(rb, n=3):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    workers = [ctx.Process(target=_write, args=(rb, i, queue)) for i in range(n)]
    for w in workers:
        w.start()
    results = [queue.get(timeout=60) for _ in workers]
    for w in workers:
        w.join(timeout=60)
    assert [w.exitcode for w in workers] == [0] * n
    return results


@pytest.mark.parametrize("make", [lambda d: LazyTensorStorage(20, shared_init=True),
                                  lambda d: LazyMemmapStorage(20, shared_init=True),
                                  lambda d: LazyMemmapStorage(20, scratch_dir=d / "s", shared_init=True),
                                  lambda d: LazyTensorStorage(20)])
def test_workers_write_one_storage(make, tmp_path):
    storage = make(tmp_path)
    rb = ReplayBuffer(storage=storage, batch_size=2).share()
    results = _run_workers(rb)
    assert sorted(r[0][0] for r in results) == [0, 1, 2] and all(r[0][0] == r[0][1] and r[1] for r in results)
    assert len(rb) == 6 and sorted(storage[:6]["x"].tolist()) == [0, 0, 1, 1, 2, 2]
    assert rb.writer._cursor == 6 and rb.sample()["x"].shape == (2,)


def test_sharing_keeps_what_was_written_and_the_writes_go_on():
    rb = ReplayBuffer(storage=LazyTensorStorage(20), batch_size=2)
    rb.extend(TensorDict({"x": rlpipe.full((2,), 7)}, [2]))
    rb.share()
    assert rb[:]["x"].tolist() == [7, 7]
    _run_workers(rb, n=2)
    assert len(rb) == 6 and sorted(rb[:]["x"].tolist()) == [0, 0, 1, 1, 7, 7]


def test_shared_buffer_refuses_prefetch():
    with pytest.raises(ValueError, match=r"Cannot share prefetched replay buffers. Pass prefetch=0 or shared=False "
                                         r"\(got prefetch=2, shared=True\)"):
        ReplayBuffer(storage=ListStorage(10), shared=True, prefetch=2)
    rb = ReplayBuffer(storage=ListStorage(10), shared=True)
    assert rb.shared and rb.share(False) is rb and not rb.shared


class _KeepsWriteState(rlpipe.envs.Transform):
    requires_shared_write_state = True  # torchrl's flag: write-time state that processes would each keep


def test_sharing_refuses_a_transform_whose_write_state_cannot_be_shared():
    rb = ReplayBuffer(storage=ListStorage(10))
    rb.append_transform(_KeepsWriteState())
    with pytest.raises(RuntimeError, match="_KeepsWriteState keeps replay-buffer write state but does not implement "
                                           r"share_memory_\(\)"):
        rb.share()
    assert not getattr(rb, "shared", False)  # refused: the buffer stays unshared
    shared = ReplayBuffer(storage=ListStorage(10), shared=True)
    with pytest.raises(RuntimeError, match="keeps replay-buffer write state"):
        shared.insert_transform(0, _KeepsWriteState())
    assert shared.transform == ()
