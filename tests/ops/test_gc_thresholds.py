"""The web process's collector thresholds (config/asgi.py), as served."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT, server_env


def test_the_asgi_application_raises_the_young_generation_threshold():
    code = "import gc, config.asgi; print(gc.get_threshold(), config.asgi.GC_THRESHOLDS)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=server_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["(5000,", "10,", "10)", "(5000,", "10,", "10)"]
