"""The protocol package is sans-I/O: importing it loads no trio, numpy or GPU binding (and no daemon)."""

import subprocess
import sys


def test_importing_the_protocol_loads_only_the_standard_library_and_msgpack():
    code = ("import sys, vmafx.protocol, vmafx.protocol.state\n"
            "bad = [m for m in ('trio', 'numpy', 'cuda', 'hip', 'vmafxd', 'vmafx.transport') if m in sys.modules]\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
