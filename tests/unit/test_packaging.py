"""`pip install fmcluster` must ship what the constructs read at synth time: node scripts, Lambda code,
dashboards. Builds the real wheel (setuptools from the dev extra, no network) and lists its files."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from tests.conftest import REPO

PACKAGE_DATA_DIRS = ("node", "lambdas", "dashboards", "image")


def test_wheel_ships_every_package_data_file(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(REPO),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("fmcluster-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        path.relative_to(REPO).as_posix()
        for folder in PACKAGE_DATA_DIRS
        for path in (REPO / "fmcluster" / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert expected, "no package data found"
    assert expected <= shipped, sorted(expected - shipped)
    assert "fmcluster/cli.py" in shipped
