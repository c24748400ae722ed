"""`pip install` of the package into a fresh venv, with no package index (README.md's
commands), and the package imported from there."""

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import CLIENT_DIR

# Debian's interpreter: its venv module and python3-setuptools (the build backend) are what
# the README's offline install relies on.
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def test_pip_install_offline_into_a_fresh_venv(tmp_path: Path):
    # A copy of the sources: an in-tree build would leave build/ and *.egg-info in the checkout.
    src = tmp_path / "src"
    shutil.copytree(CLIENT_DIR, src, ignore=shutil.ignore_patterns(
        "tests", "__pycache__", "build", "*.egg-info"))
    venv = tmp_path / "venv"
    # --without-pip: the venv sees Debian's pip through --system-site-packages, and skipping
    # ensurepip saves seconds; pip installs into the venv it runs in all the same.
    subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, timeout=60)
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index",
         "--no-build-isolation", "--disable-pip-version-check", "-q", str(src)],
        capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "PIP_NO_INPUT": "1", "HOME": str(tmp_path)},
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    shutil.rmtree(src)  # the import below must come from the venv, not from the copy
    probe = (
        "import anteroom, pathlib; "
        "p = pathlib.Path(anteroom.__file__).parent; "
        "print(p); print((p / 'py.typed').exists()); print(anteroom.Worker.__name__)"
    )
    out = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True,
                         text=True, timeout=30, cwd=tmp_path, check=True).stdout.split()
    assert out[0].startswith(str(venv)), out
    assert out[1:] == ["True", "Worker"]
