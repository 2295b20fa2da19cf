"""Replay buffers used from several threads at once: writers, samplers and priority updaters.

Every row written carries its own identity (thread, batch, row), so the stored contents can be
accounted for exactly afterwards: with room for everything, each row is stored exactly once;
with a smaller ring, it holds the last ``capacity`` rows of some serial order of the batches
(each thread's batches in the order that thread wrote them).
"""
import copy
import sys
import threading

import numpy as np
import pytest

import rlpipe
from rlpipe import TensorDict
from rlpipe.data import (LazyTensorStorage, ListStorage, ReplayBuffer, TensorDictPrioritizedReplayBuffer,
                         TensorDictReplayBuffer)

WRITERS, BATCHES, ROWS = 4, 150, 64


@pytest.fixture(autouse=True)
def _switch_often():
    """Lets threads take turns every few bytecodes, so an unguarded read-modify-write is interrupted."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(interval)


def row_ids(thread, batch):
    """The identities of one batch's rows: thread * 10**6 + batch * 10**3 + row."""
    return thread * 10 ** 6 + batch * 10 ** 3 + np.arange(ROWS, dtype=np.int64)


def batch_td(thread, batch):
    ids = row_ids(thread, batch)
    return TensorDict({"id": rlpipe.tensor(ids), "td_error": rlpipe.tensor(write_priority(ids))}, [ROWS])


def write_priority(ids):
    return (ids % 997 + 1).astype(np.float32)


def update_priority(ids):
    return (ids % 991 + 2000).astype(np.float64)


def run_threads(*targets):
    """Runs each callable in its own thread; re-raises the first exception any of them raised."""
    errors = []

    def guarded(fn):
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - reported to the main thread below
            errors.append(e)
    threads = [threading.Thread(target=guarded, args=(fn,)) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def writers(rb, done, starts=None):
    """WRITERS callables, each extending ``rb`` with its BATCHES batches in order (appending the
    first position each extend returns to ``starts``), then appending to ``done``."""
    starts = [] if starts is None else starts

    def write(thread):
        def loop():
            for batch in range(BATCHES):
                starts.append(int(rb.extend(batch_td(thread, batch))[0]))
        return loop

    def last_writer_done(fn):
        def wrapped():
            fn()
            done.append(1)
        return wrapped
    return [last_writer_done(write(t)) for t in range(WRITERS)]


def sampler_loop(rb, done, check):
    def loop():
        while len(done) < WRITERS:
            if len(rb):
                check(rb.sample(32))
    return loop


def check_written_ids(sample):
    """Each sampled row is a whole row some writer wrote."""
    ids = sample["id"].numpy()
    assert ids.shape == (32,)
    assert ((ids // 10 ** 6 < WRITERS) & (ids // 1000 % 1000 < BATCHES) & (ids % 1000 < ROWS)).all()


def check_against(rb):
    def check(sample):
        """Each sampled row is the row stored at its index (rows never move when nothing is overwritten)."""
        check_written_ids(sample)
        np.testing.assert_array_equal(rb.storage[sample["index"].numpy()]["id"].numpy(), sample["id"].numpy())
    return check


def all_ids():
    return np.sort(np.concatenate([row_ids(t, b) for t in range(WRITERS) for b in range(BATCHES)]))


def test_concurrent_extends_keep_every_row():
    total = WRITERS * BATCHES * ROWS
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(total + 100), batch_size=32)
    done = []
    check = check_against(rb)
    run_threads(*writers(rb, done), sampler_loop(rb, done, check), sampler_loop(rb, done, check))
    assert rb.write_count == total
    assert len(rb) == total
    stored = rb.storage[:len(rb)]
    np.testing.assert_array_equal(np.sort(stored["id"].numpy()), all_ids())
    np.testing.assert_array_equal(stored["index"].numpy(), np.arange(total))  # each row where it says it is
    assert rb.storage._cursor == total


def test_concurrent_adds_keep_every_item_in_a_list_storage():
    rb = ReplayBuffer(storage=ListStorage(), batch_size=8)

    def adder(thread):
        def loop():
            for i in range(600):
                rb.add((thread, i))
        return loop
    run_threads(*(adder(t) for t in range(WRITERS)))
    assert len(rb) == rb.write_count == WRITERS * 600
    assert sorted(rb.storage._items) == sorted((t, i) for t in range(WRITERS) for i in range(600))


def serial_batches(rb, capacity):
    """The (thread, batch) of each run of rows, reading the ring from its oldest row; checks that
    each run is a whole batch (the oldest may have lost its first rows) stored in row order."""
    cursor = rb.storage._cursor
    order = np.roll(np.arange(capacity), -cursor)
    ids = rb.storage[:]["id"].numpy()[order]
    runs, start = [], 0
    for end in range(1, capacity + 1):
        if end == capacity or ids[end] // 1000 != ids[start] // 1000:
            rows = ids[start:end] % 1000
            first = ROWS - (end - start) if start == 0 else 0
            np.testing.assert_array_equal(rows, np.arange(first, ROWS))
            runs.append((int(ids[start] // 10 ** 6), int(ids[start] // 1000 % 1000)))
            start = end
    return runs


@pytest.mark.parametrize("capacity", [640, 1000])
def test_concurrent_extends_fill_the_ring_in_one_serial_order(capacity):
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(capacity), batch_size=32)
    done, starts = [], []
    run_threads(*writers(rb, done, starts), sampler_loop(rb, done, check_written_ids))
    total = WRITERS * BATCHES * ROWS
    assert rb.write_count == total and len(rb) == capacity
    assert rb.storage._cursor == total % capacity
    # in any serial order, the k-th extend starts at k * ROWS (mod capacity)
    np.testing.assert_array_equal(np.sort(starts), np.sort(np.arange(WRITERS * BATCHES) * ROWS % capacity))
    runs = serial_batches(rb, capacity)
    assert len(runs) == len(set(runs))
    for thread in range(WRITERS):  # each thread's batches: its last ones, in the order it wrote them
        mine = [batch for t, batch in runs if t == thread]
        assert mine == list(range(BATCHES - len(mine), BATCHES))
    stored = rb.storage[:]
    np.testing.assert_array_equal(stored["index"].numpy(), np.arange(capacity))


def test_concurrent_writes_samples_and_priority_updates_stay_consistent():
    total = WRITERS * BATCHES * ROWS
    alpha, eps = 0.7, 1e-8
    rb = TensorDictPrioritizedReplayBuffer(alpha=alpha, beta=0.5, eps=eps, storage=LazyTensorStorage(total),
                                           batch_size=32)
    done = []

    def updater():
        while len(done) < WRITERS:
            if len(rb):
                sample = rb.sample(32)
                ids = sample["id"].numpy()
                rb.update_priority(sample["index"], update_priority(ids))
                assert (sample["priority_weight"].numpy() > 0).all()
    run_threads(*writers(rb, done), updater, updater)
    assert len(rb) == rb.write_count == total
    stored = rb.storage[:]
    ids = stored["id"].numpy()
    np.testing.assert_array_equal(np.sort(ids), all_ids())
    leaves = rb.sampler._sum_tree.leaves(np.arange(total))
    written = (write_priority(ids).astype(np.float64) + eps) ** alpha
    updated = (update_priority(ids) + eps) ** alpha
    assert (np.isclose(leaves, written) | np.isclose(leaves, updated)).all()  # each its own row's priority
    tree = rb.sampler._sum_tree
    assert tree.total == pytest.approx(leaves.sum())
    assert tree.min == pytest.approx(leaves.min())


def test_the_lock_is_reentrant_and_a_buffer_still_deep_copies():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
    rb.extend(batch_td(0, 0)[:5])
    with rb._replay_lock:  # the calls below take the same lock again in this thread
        rb.extend(batch_td(0, 1)[:2])
        assert len(rb.sample()) == 2
    twin = copy.deepcopy(rb)
    twin.extend(batch_td(1, 0)[:1])
    assert (len(rb), len(twin)) == (7, 8)
    assert twin._replay_lock is not rb._replay_lock
