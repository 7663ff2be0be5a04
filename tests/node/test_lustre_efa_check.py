"""lustre-efa-check.sh on the PCS image profiles (HyperPod mounts /fsx itself and runs no lnet-efa.sh): the direct
write and read compared against the LNet efa counters, the metrics it publishes, and the timer lnet-efa.sh installs.

Emulated: lnetctl prints tests/node/fixtures/lustre/ (shapes from Lustre's own source and tests, see its README) with
counters the test sets; dd moves those counters as the test says the traffic went (over efa, over tcp, or not at
all), since there is no Lustre or EFA here. awk and grep are the real ones; the metrics file is checked by the real
promtool (`promtool check metrics`, Prometheus' own exposition-format linter).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.node import ami
from tests.node.test_profiles import pcs_machine
from tests.node.test_scripts import NODE_DIR, efa_devices

FIXTURES = Path(__file__).parent / "fixtures" / "lustre"
TEXTFILE = "/var/lib/fmcluster/node-exporter-textfile/lustre-efa.prom"
MOUNTS = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdef12 /fsx lustre rw,noatime,flock 0 0\n"

# lnetctl net show [-v] --net NET: the fixture of NET with the counters of STUB_STATE/counters; no efa net when
# STUB_STATE/no-efa exists. The counters file holds "efa0_send efa0_recv efa1_send efa1_recv tcp_send tcp_recv".
LNETCTL = r"""args=" $* "
if [[ "$args" == *" net show "* ]]; then
  net=tcp; [[ "$args" == *" --net efa "* ]] && net=efa
  [[ "$net" == efa && -f "$STUB_STATE/no-efa" ]] && exit 0
  read -r e0s e0r e1s e1r ts tr <"$STUB_STATE/counters"
  text="$(<"$STUB_STATE/lnet-$net.yaml")"
  text="${text//\{efa0_send\}/$e0s}"; text="${text//\{efa0_recv\}/$e0r}"
  text="${text//\{efa1_send\}/$e1s}"; text="${text//\{efa1_recv\}/$e1r}"
  text="${text//\{tcp_send\}/$ts}"; text="${text//\{tcp_recv\}/$tr}"
  printf '%s\n' "$text"
fi
exit 0"""
# dd ... of=FILE: writes FILE; every dd call adds STUB_STATE/traffic ("efa_send efa_recv tcp_send tcp_recv", split
# over the two efa NIs) to the counters; fails when STUB_STATE/dd-fails exists.
DD = r"""[[ -f "$STUB_STATE/dd-fails" ]] && { echo "dd: error writing: Permission denied" >&2; exit 1; }
for arg in "$@"; do [[ "$arg" == of=* && "$arg" != of=/dev/null ]] && : >"${arg#of=}"; done
read -r es er ts tr <"$STUB_STATE/traffic"
read -r e0s e0r e1s e1r cs cr <"$STUB_STATE/counters"
echo "$((e0s + es / 2)) $((e0r + er / 2)) $((e1s + es - es / 2)) $((e1r + er - er / 2)) $((cs + ts)) $((cr + tr))" \
  >"$STUB_STATE/counters"
exit 0"""


def machine(tmp_path, name: str, traffic: str):
    node = pcs_machine(tmp_path, name)
    for tool in ("awk", "grep"):
        (node.bin / tool).symlink_to(shutil.which(tool, path="/usr/bin:/bin"))
    node.add_stub("lnetctl", LNETCTL)
    node.add_stub("dd", DD)
    node.set("lnet-efa.yaml", (FIXTURES / "lnetctl-net-show-v-efa.yaml").read_text())
    node.set("lnet-tcp.yaml", (FIXTURES / "lnetctl-net-show-v-tcp.yaml").read_text())
    node.set("counters", "1000 1000 1000 1000 500 500\n")
    node.set("traffic", traffic + "\n")
    node.path("/proc").mkdir(parents=True, exist_ok=True)
    node.path("/proc/mounts").write_text("proc /proc proc rw 0 0\n" + MOUNTS)
    node.path("/fsx").mkdir(parents=True, exist_ok=True)
    return node


def promtool_check(text: str) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not on PATH (make setup installs it)"
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", ami.PCS_PROFILES)
def test_lustre_riding_efa_is_proven_and_published(tmp_path, name):
    # a 64 MiB direct write and read: 128 bulk RPCs, each a request and a reply over efa; tcp only pings
    node = machine(tmp_path, name, "130 130 2 2")
    result = node.run("lustre-efa-check.sh")
    assert result.returncode == 0, result.stderr
    text = node.path(TEXTFILE).read_text()
    assert 'fmcluster_lustre_efa_transport_ok{mountpoint="/fsx",reason="ok"} 1' in text
    # two dd calls, each moving 260 efa and 4 tcp messages
    assert 'fmcluster_lustre_efa_probe_messages{mountpoint="/fsx",net="efa"} 520' in text
    assert 'fmcluster_lustre_efa_probe_messages{mountpoint="/fsx",net="tcp"} 8' in text
    promtool_check(text)
    write, read = node.calls("dd")
    assert write[1:4] == ["if=/dev/zero", f"of={node.path('/fsx')}/{write[2].rsplit('/', 1)[1]}", "bs=1M"]
    assert "count=64" in write and "oflag=direct" in write and "iflag=direct" in read
    assert not list(node.path("/fsx").iterdir())  # the probe file is removed
    assert "/fsx: Lustre rides EFA" in node.script_log("lustre-efa-check")


@pytest.mark.parametrize(
    ("traffic", "no_efa", "reason"),
    [
        ("0 0 130 130", False, "no-efa-traffic"),  # the silent fallback: the data went over tcp
        ("130 0 2 2", False, "no-efa-traffic"),  # sends but nothing received (mount_fsx.sh wants both to rise)
        ("10 10 2 2", False, "too-little-efa-traffic"),  # 40 messages for 128 RPCs: below half
        ("40 40 200 200", False, "more-tcp-than-efa"),  # efa moved, tcp moved more
        ("0 0 0 0", True, "no-efa-network"),  # lnet-efa.sh fell back to TCP: no efa NI at all
    ],
)
def test_lustre_not_riding_efa_is_published_with_the_reason(tmp_path, traffic, no_efa, reason):
    node = machine(tmp_path, "pcs-ready-dlami-ubuntu2404", traffic)
    if no_efa:
        node.set("no-efa", "")
    result = node.run("lustre-efa-check.sh")
    assert result.returncode == 1
    text = node.path(TEXTFILE).read_text()
    assert f'fmcluster_lustre_efa_transport_ok{{mountpoint="/fsx",reason="{reason}"}} 0' in text
    promtool_check(text)
    assert f"/fsx: Lustre traffic is not proven to ride EFA: {reason}" in node.script_log("lustre-efa-check")
    if no_efa:
        assert node.calls("dd") == []


def test_a_probe_that_cannot_write_proves_nothing(tmp_path):
    node = machine(tmp_path, "pcs-ready-dlami-ubuntu2404", "130 130 2 2")
    node.set("dd-fails", "")
    assert node.run("lustre-efa-check.sh").returncode == 1
    assert 'reason="probe-failed"} 0' in node.path(TEXTFILE).read_text()


def test_no_lustre_mount_is_said_after_the_wait(tmp_path):
    node = machine(tmp_path, "pcs-ready-dlami-ubuntu2404", "130 130 2 2")
    node.path("/proc/mounts").write_text("proc /proc proc rw 0 0\n")
    result = node.run("lustre-efa-check.sh", env={"FMCLUSTER_LUSTRE_WAIT_SECONDS": "20"})
    assert result.returncode == 1
    assert [call[1] for call in node.calls("sleep")] == ["10", "10"]
    assert 'reason="not-mounted"} 0' in node.path(TEXTFILE).read_text()


@pytest.mark.parametrize("name", ami.PCS_PROFILES)
def test_lnet_efa_installs_the_check_timer_even_when_it_falls_back_to_tcp(tmp_path, name):
    node = machine(tmp_path, name, "0 0 0 0")
    efa_devices(node, ["rdmap0s0"])
    node.set("efa-driver", "2.10.0\n")  # too old for an FSx EFA client: TCP
    result = node.run("mount-lustre.sh", "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", "abcdef12", "--efa",
                      env={"FMCLUSTER_INSTANCE_TYPE": "g5.48xlarge"})  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "using TCP" in node.script_log("lnet-efa")
    service = node.path("/etc/systemd/system/fmcluster-lustre-efa-check.service").read_text()
    timer = node.path("/etc/systemd/system/fmcluster-lustre-efa-check.timer").read_text()
    assert f"ExecStart={NODE_DIR}/lustre-efa-check.sh\n" in service and "After=remote-fs.target" in service
    assert "OnActiveSec=2min" in timer and "OnUnitActiveSec=6h" in timer and "WantedBy=timers.target" in timer
    assert ["systemctl", "enable", "--now", "fmcluster-lustre-efa-check.timer"] in node.calls("systemctl")


def test_bad_usage_exits_2(tmp_path):
    node = machine(tmp_path, "pcs-ready-dlami-ubuntu2404", "0 0 0 0")
    assert node.run("lustre-efa-check.sh", "--now").returncode == 2
