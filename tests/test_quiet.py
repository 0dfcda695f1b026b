"""Start-up noise of native libraries is dropped, everything else on stderr is kept
(issue #15, point 6)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from petastream._quiet import TF_STARTUP_NOISE, filtered_native_stderr


def test_only_the_noise_lines_are_dropped(capfd):
    with filtered_native_stderr(("startup chatter",)):
        os.write(2, b"I0000 startup chatter from C++\nreal error: keep me\n")
        print("python warning: keep me too", file=sys.stderr)
    err = capfd.readouterr().err
    assert "chatter" not in err
    assert "real error: keep me" in err and "python warning: keep me too" in err


def test_stderr_is_restored_after_an_exception(capfd):
    with pytest.raises(RuntimeError), filtered_native_stderr(("x",)):
        raise RuntimeError("boom")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


@pytest.mark.tf
def test_tensorflow_imports_without_its_startup_lines():
    pytest.importorskip("tensorflow")
    code = ("from petastream._quiet import import_tensorflow\n"
            "tf = import_tensorflow()\nprint(int(tf.constant(2) * 3))")
    env = {**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "src")}
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0 and res.stdout.strip() == "6"
    assert not [n for n in TF_STARTUP_NOISE if n in res.stderr], res.stderr
