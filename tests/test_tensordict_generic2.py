"""TensorDict behaviour that the second half of tensordict 0.14's test_generic.py checks, each
expected value taken from tensordict 0.14.3 itself (run in the peers' virtualenv)."""
import os
import subprocess
import sys



_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_no_import_warning_under_the_peer_import_shim():
    # The shim re-registers rlpipe.tensordict's modules as tensordict.*: a relative import run
    # inside a function then raises ImportWarning ("__package__ != __spec__.parent"), an error
    # under tensordict's filterwarnings("error").
    code = (
        "import warnings, peer_shim\n"
        "warnings.simplefilter('error')\n"
        "import torch, tensordict._td, tensordict._math, tensordict.functional\n"
        "from tensordict import TensorDict\n"
        "td = TensorDict({'a': torch.ones(3, 4)}, [3, 4])\n"
        "assert td.pad([0, 1]).batch_size == (4, 4)\n"
        "assert td.to(torch.float64)['a'].dtype == torch.float64\n"
        "assert torch.stack([td, td]).batch_size == (2, 3, 4)\n"
        "print('ok')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(_ROOT, "tools"), _ROOT]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
