"""The recurrent layers and cells on the CUDA backend against torch 2.13's recorded values and gradients
(the golden cases of test_rnn.py), and packing on the device."""
import pytest

import rlpipe as r
from rlpipe.nn.utils.rnn import pack_sequence, pad_packed_sequence
from test_rnn import CASES, _case_id, check_against_golden

pytestmark = pytest.mark.cuda

if not r.cuda.is_available():
    pytest.skip("CUDA unavailable (CuPy or a GPU missing)", allow_module_level=True)


@pytest.mark.parametrize("k", range(len(CASES)), ids=_case_id)
def test_values_and_gradients_equal_torchs_on_cuda(k):
    check_against_golden(k, "cuda")


def test_packing_round_trip_on_cuda():
    seqs = [r.tensor([[1.0], [2.0]], device="cuda"), r.tensor([[3.0], [4.0], [5.0]], device="cuda")]
    packed = pack_sequence(seqs, enforce_sorted=False)
    assert packed.data.device.type == "cuda" and packed.batch_sizes.device.type == "cpu"
    assert packed.is_cuda and packed.sorted_indices.device.type == "cuda"
    padded, lengths = pad_packed_sequence(packed, batch_first=True)
    assert padded.cpu()[:, :, 0].tolist() == [[1.0, 2.0, 0.0], [3.0, 4.0, 5.0]] and lengths.tolist() == [2, 3]
