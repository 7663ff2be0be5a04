"""A real node_exporter against a fake sysfs tree shaped like an EFA node, fed by observability.sh's textfile output.

What is real: Debian bookworm's `prometheus-node-exporter` binary (node_exporter 1.5.0; `make test` installs it) and
fmcluster/node/observability.sh --write-textfile. What is emulated: /sys/class/infiniband, built as the EFA driver lays
it out: `rdmap*` devices of PCI vendor 0x1d0f (Amazon; the efa module's aliases `pci:v00001D0Fd0000EFA0`..`EFA3`,
modinfo efa quoted in bottlerocket-os/bottlerocket-kernel-kit PR 313), with `fw_ver`, ports/1/{state, phys_state,
rate} and ports/1/hw_counters but no ports/1/counters (FACTS.md, "Service truth": EFA devices have no counters/).

It shows the two things the dashboards rely on:
* an infiniband collector built on procfs before v0.16.1 (node_exporter before 1.10, such as this 1.5.0) fails on such
  a device and exports no port state at all: the reason observability.sh pins 1.10.2, whose series the fixture takes
  from the source at that tag (fixtures/README.md);
* the textfile collector serves the EFA hardware counters exactly as observability.sh writes them, under the names,
  labels and types the fixture and the dashboards use.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.observability.conftest import FIXTURES, free_port, require_binary

pytestmark = pytest.mark.real_tools

SCRIPT = Path(__file__).resolve().parents[2] / "fmcluster" / "node" / "observability.sh"
DEVICES = {"rdmap79s0": {"tx_bytes": 1042168029538, "rx_drops": 0}, "rdmap113s0": {"tx_bytes": 1047394519620,
           "rx_drops": 1523, "retrans_timeout_events": 17, "lifespan": 12}}  # fmt: skip


def efa_sysfs(root: Path) -> None:
    for name, counters in DEVICES.items():
        device = root / "sys" / "class" / "infiniband" / name
        (device / "device").mkdir(parents=True)
        (device / "device" / "vendor").write_text("0x1d0f\n")
        (device / "fw_ver").write_text("0.0.0.0\n")
        port = device / "ports" / "1"
        (port / "hw_counters").mkdir(parents=True)
        (port / "state").write_text("4: ACTIVE\n")
        (port / "phys_state").write_text("5: LinkUp\n")
        (port / "rate").write_text("100 Gb/sec (4X EDR)\n")  # EFA's rate text: (unconfirmed)
        for counter, value in counters.items():
            (port / "hw_counters" / counter).write_text(f"{value}\n")


@pytest.fixture(scope="module")
def scrape(tmp_path_factory) -> str:
    binary = require_binary("prometheus-node-exporter")
    root = tmp_path_factory.mktemp("efa-node")
    efa_sysfs(root)
    written = subprocess.run(
        ["bash", str(SCRIPT), "--write-textfile"],
        env={"PATH": "/usr/bin:/bin", "FMCLUSTER_ROOT": str(root), "LANG": "C"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    textfile = root / "var" / "lib" / "fmcluster" / "node-exporter-textfile"
    port = free_port()
    log = (root / "node_exporter.log").open("w")
    process = subprocess.Popen(
        [
            binary,
            f"--path.sysfs={root / 'sys'}",
            "--collector.disable-defaults",
            "--collector.infiniband",
            "--collector.textfile",
            f"--collector.textfile.directory={textfile}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "LANG": "C"},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    yield response.read().decode()
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def samples(text: str, prefix: str) -> dict[str, str]:
    return {
        line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1]
        for line in text.splitlines()
        if line.startswith(prefix) and not line.startswith("#")
    }


def test_a_node_exporter_before_1_10_exports_no_efa_port_state(scrape):
    assert 'node_scrape_collector_success{collector="infiniband"} 0' in scrape
    assert samples(scrape, "node_infiniband_") == {}


def test_the_textfile_collector_serves_the_efa_counters_as_the_script_writes_them(scrape):
    assert "node_textfile_scrape_error 0" in scrape
    served = {series: float(value) for series, value in samples(scrape, "node_amazonefa_").items()}
    expected = {
        f'node_amazonefa_{counter}{{device="{device}",port="1"}}': float(value)
        for device, counters in DEVICES.items()
        for counter, value in counters.items()
    }
    assert served == expected
    assert "# TYPE node_amazonefa_rx_drops counter" in scrape
    assert "# TYPE node_amazonefa_lifespan gauge" in scrape
    assert "# HELP node_amazonefa_rx_drops EFA hardware counter rx_drops (hw_counters)." in scrape


def test_the_fixture_holds_the_served_series_in_the_same_shape(scrape):
    recorded = (FIXTURES / "node-exporter.prom").read_text()
    for series in samples(scrape, "node_amazonefa_"):
        name = series.split("{")[0]
        assert re.search(rf'^{name}{{device="rdmap\w+",port="1"}} ', recorded, re.M), name
        for header in (f"# HELP {name} ", f"# TYPE {name} "):
            served = next(line for line in scrape.splitlines() if line.startswith(header))
            assert served in recorded.splitlines(), served
