"""fmcluster/node/observability.sh run against stub commands, in the style of tests/node/test_scripts.py.

No GPU, docker, Slurm, Lustre, EFA, S3, SSM or internet here, and the script must never touch the real /etc. Each
test runs it with a PATH of stub commands that record their arguments (`aws s3 cp` copies files a test put in its
pretend mirror, `aws ssm get-parameter` answers from a state file, `nvidia-smi`, `docker`, `sinfo`, `lctl` and
`systemctl` behave as the test says) plus a few real tools (bash, coreutils, tar, grep, sha256sum), and with
FMCLUSTER_ROOT pointing at a scratch directory, so /etc/systemd, /etc/fmcluster, /opt and /sys land in the test's
own directory. There is no curl on the PATH: the script installs only from the project's mirror (mirror.sh's
mirror_get). The "releases" are small tarballs the tests build (stand-ins: the real archives are not here), so the
script runs from a copy of fmcluster/node whose mirror.sh also pins them (the tests' model of an artifact list that
pins them); the tests named `shipped_list` run the shipped fmcluster/node with its real pins. The EFA and Lustre
inputs are a recorded p5 layout (hw_counters files) and recorded `lctl get_param llite.*.stats`.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from fmcluster import mirror
from tests.observability.conftest import DASHBOARDS, FIXTURES, require_binary
from tests.stub_node import StubNode, fail_first, stub_env

SCRIPT = Path(__file__).resolve().parents[2] / "fmcluster" / "node" / "observability.sh"
SHELLCHECK = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))
ENDPOINT = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123abcd-4567-89ef/"
PARAMETER = "/fmcluster/llm-pretrain/observability/prometheus-endpoint"
MIRROR = "s3://llm-pretrain-data-123456789012/fmcluster-mirror"
BASE_ARGS = ("--cluster", "llm-pretrain", "--region", "us-east-1", "--mirror", MIRROR)
TOOLS = (
    "bash", "env", "cat", "date", "mkdir", "mktemp", "chmod", "mv", "rm", "basename", "dirname", "sort", "readlink",
    "id", "uname", "tar", "gzip", "base64", "sha256sum", "head", "tr", "grep", "cp",
)  # fmt: skip
NODE_DIR = SCRIPT.parent
PINS_END = "# --- end of pinned digests ---\n"
"""Real commands the script may use: they only read, or write inside FMCLUSTER_ROOT and the test's directory."""

_FAILURES = fail_first(7)
STUBS = {
    # aws s3 cp ... SRC DEST (the file the test put at $STUB_STATE/s3/<bucket>/<key>) | aws ssm get-parameter ...
    "aws": _FAILURES
    + """case "$1 $2" in
  "s3 cp") args=("$@"); cp "$STUB_STATE/s3/${args[-2]#s3://}" "${args[-1]}" ;;
  "ssm get-parameter")
    if [[ -f "$STUB_STATE/ssm-value" ]]; then cat "$STUB_STATE/ssm-value"
    else echo "An error occurred (ParameterNotFound) when calling the GetParameter operation" >&2; exit 254; fi ;;
  *) exit 2 ;;
esac""",
    "hostname": "echo ip-10-1-33-17",
    "nvidia-smi": '[[ -f "$STUB_STATE/gpus" ]] && cat "$STUB_STATE/gpus" || exit 9',
    # docker load prints what `docker save` held (docker's own output line); docker tag gives it the local name
    "docker": """case "$1" in
  image) [[ -f "$STUB_STATE/docker-image" ]] ;;
  load) echo "Loaded image: nvcr.io/nvidia/k8s/dcgm-exporter:4.3.1-4.4.0-ubuntu22.04" ;;
  tag) : >"$STUB_STATE/docker-image" ;;
esac""",
    "lctl": 'cat "$STUB_STATE/llite-stats"',
    **dict.fromkeys(("systemctl", "sleep", "useradd", "chown"), "exit 0"),
}
"""Stub commands: each records its arguments to STUB_LOG, then behaves as above (state under STUB_STATE)."""
GPUS = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08x}-0000-0000-0000-000000000000)\n" for i in range(8))
LLITE_STATS = """llite.xm3qjbmv-ffff9a3c4e5d6000.stats=
snapshot_time             1764403200.482213607 secs.nsecs
start_time                1764316800.104736322 secs.nsecs
elapsed_time              86400.377477285 secs.nsecs
read_bytes                18734521 samples [bytes] 1 16777216 41871947382016 1593877395648004817
write_bytes               2964587 samples [bytes] 1 16777216 19634820509696 1253477125474271232
open                      1293811 samples [usecs] 1 48313 87712913 1293771987213
getattr                   5738291 samples [usecs] 1 21883 98283122 1283817238112
opencount                 1293811 samples [reqs] 1 8 1539281 2091832
"""
"""Recorded `lctl get_param llite.*.stats` (Lustre 2.15 client of an FSx file system), trimmed to a few rows."""


@dataclass
class Release:
    component: str
    version: str
    archive: str
    binary: str
    top_dir: str | None

    @property
    def key(self) -> str:
        """Its key in the mirror (fmcluster/mirror/artifacts.json)."""
        return f"{self.component}/{self.version}/{self.archive}"


RELEASES = {
    # asset names: node_exporter's .promu.yml at v1.10.2 with promu's tarball naming (<name>-<version>.<os>-<arch>
    # .tar.gz); rivosinc/prometheus-slurm-exporter's .goreleaser.yaml at v1.7.0 (archive name_template
    # '{{ .ProjectName }}_{{ .Os }}_{{ .Arch }}', binary at the top of the archive); Grafana's tarball unpacks into
    # grafana-v<version>
    "node_exporter": Release("node_exporter", "1.10.2", "node_exporter-1.10.2.linux-amd64.tar.gz", "node_exporter",
                             "node_exporter-1.10.2.linux-amd64"),
    "prometheus": Release("prometheus", "3.8.1", "prometheus-3.8.1.linux-amd64.tar.gz", "prometheus",
                          "prometheus-3.8.1.linux-amd64"),
    "slurm_exporter": Release("slurm_exporter", "1.7.0", "prometheus-slurm-exporter_linux_amd64.tar.gz",
                              "prometheus-slurm-exporter", None),
    "grafana": Release("grafana", "11.6.0", "grafana-11.6.0.linux-amd64.tar.gz", "bin/grafana", "grafana-v11.6.0"),
}  # fmt: skip


def test_the_releases_here_are_the_artifact_lists_keys():
    """The stand-ins sit under the keys the shipped list gives these releases (amd64; arm64 by name, below)."""
    keys = {artifact.key for artifact in mirror.artifacts()}
    for release in RELEASES.values():
        assert release.key in keys and release.key.replace("amd64", "arm64") in keys, release.key


def tarball(release: Release) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        prefix = f"{release.top_dir}/" if release.top_dir else ""
        for name, text in ((release.binary, "#!/bin/sh\nexit 0\n"), ("LICENSE", "Apache-2.0\n")):
            data = text.encode()
            info = tarfile.TarInfo(prefix + name)
            info.size, info.mode = len(data), 0o755
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class Node(StubNode):
    """A pretend node running observability.sh from `scripts` (a copy of fmcluster/node whose mirror.sh pins what the
    test publishes; the shipped fmcluster/node for the shipped-list tests)."""

    scripts: Path = NODE_DIR

    def run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(self.scripts / "observability.sh"), *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def put(self, key: str, data: bytes, *, pinned: bytes | None = None) -> None:
        """`data` in the mirror under `key`, and the SHA-256 of `pinned` (default: `data`) pinned for it in the
        scripts' mirror.sh."""
        self.set(f"s3/{MIRROR.removeprefix('s3://')}/{key}", data)
        helper = self.scripts / "mirror.sh"
        digest = hashlib.sha256(data if pinned is None else pinned).hexdigest()
        helper.write_text(helper.read_text().replace(PINS_END, f"MIRROR_SHA256['{key}']={digest}\n{PINS_END}"))

    def publish(self, *components: str, corrupt: bool = False) -> None:
        """Put releases in the mirror with their pins; `corrupt`: the mirror's file is not the pinned one."""
        for component in components:
            release = RELEASES[component]
            data = tarball(release)
            self.put(release.key, data + b"tampered" if corrupt else data, pinned=data)

    def unit(self, name: str) -> str:
        return self.path(f"/etc/systemd/system/{name}").read_text()

    def script_log(self, name: str = "observability") -> str:
        return super().script_log(name)


@pytest.fixture
def node(tmp_path: Path) -> Node:
    result = Node(**stub_env(tmp_path, tools=TOOLS, stubs=STUBS))
    result.path("/var/tmp").mkdir(parents=True)
    result.scripts = tmp_path / "node-pinned"
    shutil.copytree(NODE_DIR, result.scripts)
    return result


@pytest.fixture
def shipped_list(tmp_path: Path) -> Node:
    """A node running the shipped fmcluster/node, with the shipped list's pins only."""
    result = Node(**stub_env(tmp_path, tools=TOOLS, stubs=STUBS))
    result.path("/var/tmp").mkdir(parents=True)
    return result


def installed(node: Node, component: str) -> Path:
    release = RELEASES[component]
    return node.path(f"/opt/fmcluster/observability/{component}-{release.version}")


# -- shellcheck -----------------------------------------------------------------------------------------------


def test_shellcheck_is_clean():
    result = subprocess.run(
        [SHELLCHECK, "-x", SCRIPT.name], cwd=SCRIPT.parent, capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_script_is_ascii_strict_and_executable():
    text = SCRIPT.read_text(encoding="ascii")
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "\nset -euo pipefail\n" in text
    assert SCRIPT.stat().st_mode & 0o100


def mirror_copies(node: Node) -> list[str]:
    """The S3 sources of every `aws s3 cp` the script ran."""
    return [call[-2] for call in node.calls("aws") if call[1:3] == ["s3", "cp"]]


# -- compute node -----------------------------------------------------------------------------------------------


def test_compute_node_installs_node_exporter_and_the_agent_pointed_at_the_workspace(node, tmp_path):
    node.publish("node_exporter", "prometheus")
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS))
    assert result.returncode == 0, result.stderr

    assert mirror_copies(node) == [f"{MIRROR}/{RELEASES[c].key}" for c in ("node_exporter", "prometheus")]
    assert "--region us-east-1" in " ".join(node.calls("aws")[0])
    assert (installed(node, "node_exporter") / "node_exporter").exists()
    unit = node.unit("fmcluster-node-exporter.service")
    binary = "/opt/fmcluster/observability/node_exporter-1.10.2/node_exporter"
    assert f"ExecStart={binary} --web.listen-address=:9100" in unit
    assert "--collector.infiniband --collector.ethtool" in unit
    assert "_allowance_exceeded$$" in unit  # systemd turns $$ into $
    assert "--collector.textfile.directory=/var/lib/fmcluster/node-exporter-textfile" in unit
    textfile = node.unit("fmcluster-node-textfile.service")
    assert f"ExecStart={node.scripts}/observability.sh --write-textfile" in textfile
    assert "After=" not in textfile  # reads local counters only: ordered after nothing

    agent = node.path("/etc/fmcluster/prometheus/agent.yml").read_text()
    assert f'url: "{ENDPOINT}api/v1/remote_write"' in agent
    assert 'region: "us-east-1"' in agent and 'cluster: "llm-pretrain"' in agent
    assert '"/etc/fmcluster/prometheus/targets/node.json"' in agent and "@" not in agent
    targets = node.path("/etc/fmcluster/prometheus/targets")
    assert json.loads((targets / "node.json").read_text()) == [
        {"targets": ["127.0.0.1:9100"], "labels": {"instance": "ip-10-1-33-17"}}
    ]
    assert json.loads((targets / "dcgm.json").read_text()) == []  # no GPUs here
    assert json.loads((targets / "slurm.json").read_text()) == []  # not the head node
    agent_unit = node.unit("fmcluster-prometheus-agent.service")
    assert "prometheus-3.8.1/prometheus --agent --config.file=/etc/fmcluster/prometheus/agent.yml" in agent_unit
    assert "--web.listen-address=127.0.0.1:9090" in agent_unit
    restarted = [call[2] for call in node.calls("systemctl") if call[1] == "restart"]
    assert restarted == ["fmcluster-node-exporter.service", "fmcluster-prometheus-agent.service"]
    assert ["systemctl", "enable", "--now", "fmcluster-node-textfile.timer"] in node.calls("systemctl")
    timer = node.unit("fmcluster-node-textfile.timer").splitlines()
    assert {"OnBootSec=10s", "OnUnitActiveSec=15s", "AccuracySec=1s", "WantedBy=timers.target"} <= set(timer)
    assert not node.path("/etc/systemd/system/fmcluster-dcgm-exporter.service").exists()

    # what the node renders is a configuration real Prometheus accepts in agent mode
    rendered = tmp_path / "agent.yml"
    rendered.write_text(agent.replace("/etc/fmcluster/prometheus/targets", str(targets)))
    check = subprocess.run(
        [require_binary("promtool"), "check", "config", "--agent", str(rendered)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert check.returncode == 0 and "WARNING" not in check.stdout + check.stderr, check.stdout + check.stderr


def test_second_run_downloads_nothing_and_restarts_nothing(node):
    node.publish("node_exporter", "prometheus")
    args = (*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS))
    assert node.run(*args).returncode == 0
    agent = node.path("/etc/fmcluster/prometheus/agent.yml").read_text()
    first = len(node.calls())

    result = node.run(*args)
    assert result.returncode == 0, result.stderr
    later = node.calls()[first:]
    assert {call[0] for call in later} == {"systemctl", "hostname", "nvidia-smi"}  # no download, no docker
    systemctl = [call[1:] for call in later if call[0] == "systemctl"]
    assert {call[0] for call in systemctl} == {"start", "enable"}  # no unit rewritten (no daemon-reload), no restart
    assert [call for call in systemctl if call[0] == "enable"] == [["enable", "--now", "fmcluster-node-textfile.timer"]]
    assert node.path("/etc/fmcluster/prometheus/agent.yml").read_text() == agent


def test_a_new_workspace_rewrites_the_config_and_reloads_only_the_agent(node):
    node.publish("node_exporter", "prometheus")
    assert node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS)).returncode == 0
    first = len(node.calls())
    other = ENDPOINT.replace("ws-0123abcd-4567-89ef", "ws-99999999-aaaa-bbbb")
    assert node.run(*BASE_ARGS, "--prometheus-endpoint", other, "--config-dir", str(DASHBOARDS)).returncode == 0
    restarted = [call[2] for call in node.calls()[first:] if call[:2] == ["systemctl", "restart"]]
    assert restarted == ["fmcluster-prometheus-agent.service"]
    assert "ws-99999999-aaaa-bbbb/api/v1/remote_write" in node.path("/etc/fmcluster/prometheus/agent.yml").read_text()


def test_downloads_are_retried(node):
    node.publish("node_exporter", "prometheus")
    node.set("aws-failures", "2")
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS))
    assert result.returncode == 0, result.stderr
    assert node.calls("sleep") == [["sleep", "1"], ["sleep", "2"]]
    assert "attempt 2 of 5 failed: aws s3 cp" in node.script_log()


def test_a_checksum_mismatch_installs_nothing_and_the_agent_still_runs(node):
    node.publish("prometheus")
    node.publish("node_exporter", corrupt=True)
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS))
    assert result.returncode == 0, result.stderr
    key = RELEASES["node_exporter"].key
    pinned = re.findall(rf"MIRROR_SHA256\['{re.escape(key)}'\]=(\w+)", (node.scripts / "mirror.sh").read_text())[-1]
    got = hashlib.sha256((node.state / f"s3/{MIRROR.removeprefix('s3://')}/{key}").read_bytes()).hexdigest()
    assert f"ERROR: checksum mismatch for {key} from the mirror: expected {pinned} (pinned), got {got}" in result.stderr
    assert (f"ERROR: not installing node_exporter 1.10.2: {key} is not in the mirror with its pinned SHA-256"
            in result.stderr)  # fmt: skip
    assert "node_exporter is not run: its release could not be installed" in node.script_log()
    assert not installed(node, "node_exporter").exists()
    assert [p.name for p in node.path("/opt/fmcluster/observability").iterdir()] == ["prometheus-3.8.1"]
    assert json.loads(node.path("/etc/fmcluster/prometheus/targets/node.json").read_text()) == []
    assert not node.path("/etc/systemd/system/fmcluster-node-exporter.service").exists()
    assert ["systemctl", "restart", "fmcluster-prometheus-agent.service"] in node.calls("systemctl")


def test_without_the_agent_the_script_fails(node):
    node.publish("node_exporter")
    node.publish("prometheus", corrupt=True)
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS))
    assert result.returncode == 1
    key = RELEASES["prometheus"].key
    assert f"not installing prometheus 3.8.1: {key} is not in the mirror with its pinned SHA-256" in result.stderr


# -- GPU nodes ------------------------------------------------------------------------------------------------


IMAGE_KEY = "dcgm-exporter/4.3.1-4.4.0-ubuntu22.04/dcgm-exporter-image.linux-amd64.tar"
"""The mirror's `docker save` of the dcgm-exporter image (fmcluster/mirror/artifacts.json)."""


def test_gpu_node_runs_dcgm_exporter_from_the_mirrors_image(node):
    node.publish("node_exporter", "prometheus")
    node.put(IMAGE_KEY, b"docker save output")
    node.set("gpus", GPUS)
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS))
    assert result.returncode == 0, result.stderr
    image = "fmcluster/dcgm-exporter:4.3.1-4.4.0-ubuntu22.04"
    assert f"{MIRROR}/{IMAGE_KEY}" in mirror_copies(node)
    docker = [call[1:] for call in node.calls("docker")]
    assert docker[1][:2] == ["load", "-i"]
    assert ["tag", "nvcr.io/nvidia/k8s/dcgm-exporter:4.3.1-4.4.0-ubuntu22.04", image] in docker
    assert "pull" not in [call[0] for call in docker]
    unit = node.unit("fmcluster-dcgm-exporter.service")
    assert "--gpus all --cap-add SYS_ADMIN --network host" in unit
    # dcgm-exporter's flags at 4.3.1-4.4.0 (pkg/cmd/app.go): -f collectors, -a address, --hpc-job-mapping-dir,
    # --xid-count-window-size (ms)
    assert (
        f"-v /run/fmcluster/dcgm-job-mapping:/run/fmcluster/dcgm-job-mapping:ro {image} \\\n"
        "  -f /etc/fmcluster/dcgm-counters.csv -a :9400 --hpc-job-mapping-dir /run/fmcluster/dcgm-job-mapping"
        " --xid-count-window-size 300000\n"
    ) in unit
    assert "ExecStartPre=/bin/mkdir -p /run/fmcluster/dcgm-job-mapping" in unit
    assert f"ExecStop={node.bin}/docker stop fmcluster-dcgm-exporter\n" in unit
    assert node.path("/run/fmcluster/dcgm-job-mapping").is_dir()
    counters = node.path("/etc/fmcluster/dcgm-counters.csv").read_text()
    for field in ("DCGM_FI_DEV_XID_ERRORS", "DCGM_EXP_XID_ERRORS_COUNT", "DCGM_FI_PROF_NVLINK_TX_BYTES"):
        assert f"\n{field}," in counters
    targets = json.loads(node.path("/etc/fmcluster/prometheus/targets/dcgm.json").read_text())
    assert targets == [{"targets": ["127.0.0.1:9400"], "labels": {"instance": "ip-10-1-33-17"}}]


def dcgm_counter_records(text: str) -> list[list[str]]:
    """The counters CSV as dcgm-exporter 4.3.1-4.4.0 reads it (internal/pkg/counters/counter_config.go: ReadCSVFile
    is Go's encoding/csv with Comment '#' and FieldsPerRecord 0, so every record needs the first record's field
    count or ReadAll fails; ExtractCounters then wants exactly 3 fields). Python's csv splits unquoted commas alike."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return [[field.strip(" ") for field in record] for record in csv.reader(lines)]


def test_the_dcgm_counters_csv_is_one_dcgm_exporter_accepts():
    """A help text with a comma gave a 5-field record: dcgm-exporter logged the CSV error and exited at start
    (pkg/cmd/app.go getCounters: os.Exit(1)), so a GPU node had no GPU metrics and no XID alerts."""
    csv_text = re.search(r"dcgm-counters\.csv\" 0644 <<'EOF'\n(.*?)\nEOF\n", SCRIPT.read_text(), re.S)[1]
    records = dcgm_counter_records(csv_text)
    assert len(records) == 18
    assert [record for record in records if len(record) != 3] == []
    # internal/pkg/counters/variables.go promMetricType
    assert {record[1] for record in records} <= {"gauge", "counter", "histogram", "summary", "label"}
    assert dcgm_counter_records("A, gauge, one, two\n") == [["A", "gauge", "one", "two"]]  # the failure it catches


def test_every_dcgm_field_the_dashboards_use_is_exported():
    """The counters CSV the script writes lists every DCGM field the dashboards, rules and recordings use."""
    script = SCRIPT.read_text()
    exported = set(re.findall(r"^(DCGM_(?:FI|EXP)_\w+),", script, re.M))
    used = set()
    for path in [*DASHBOARDS.glob("*.json"), *DASHBOARDS.glob("rules/*.yml"), FIXTURES / "dcgm-exporter.prom"]:
        used |= set(re.findall(r"DCGM_(?:FI_DEV|FI_PROF|EXP)_\w+", path.read_text()))
    assert used <= exported, used - exported


def test_gpu_node_without_docker_or_a_binary_skips_dcgm_exporter_and_says_so(node):
    node.publish("node_exporter", "prometheus")
    node.set("gpus", GPUS)
    (node.bin / "docker").unlink()
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS))
    assert result.returncode == 0, result.stderr
    assert "GPUs, but dcgm-exporter is not run: no docker with fmcluster/dcgm-exporter" in node.script_log()
    assert json.loads(node.path("/etc/fmcluster/prometheus/targets/dcgm.json").read_text()) == []
    assert ["systemctl", "restart", "fmcluster-prometheus-agent.service"] in node.calls("systemctl")


def test_gpu_node_without_docker_runs_a_dcgm_exporter_binary_the_ami_brings(node):
    node.publish("node_exporter", "prometheus")
    node.set("gpus", GPUS)
    (node.bin / "docker").unlink()
    node.add_stub("dcgm-exporter")
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS))
    assert result.returncode == 0, result.stderr
    unit = node.unit("fmcluster-dcgm-exporter.service")
    assert (
        f"ExecStart={node.bin}/dcgm-exporter -f /etc/fmcluster/dcgm-counters.csv -a :9400 "
        "--hpc-job-mapping-dir /run/fmcluster/dcgm-job-mapping --xid-count-window-size 300000\n"
    ) in unit
    assert "ExecStop" not in unit
    assert json.loads(node.path("/etc/fmcluster/prometheus/targets/dcgm.json").read_text())[0]["targets"] == [
        "127.0.0.1:9400"
    ]


def test_an_image_that_cannot_be_loaded_leaves_gpu_metrics_out_not_the_agent(node):
    node.publish("node_exporter", "prometheus")
    node.put(IMAGE_KEY, b"docker save output")
    node.set("gpus", GPUS)
    node.add_stub("docker", 'case "$1" in image | load) exit 1 ;; esac')
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS))
    assert result.returncode == 0, result.stderr
    assert (f"not loading fmcluster/dcgm-exporter:4.3.1-4.4.0-ubuntu22.04: docker could not load and tag the mirror's "
            f"{IMAGE_KEY}") in result.stderr  # fmt: skip
    assert "GPUs, but dcgm-exporter is not run" in node.script_log()
    assert json.loads(node.path("/etc/fmcluster/prometheus/targets/dcgm.json").read_text()) == []
    assert ["systemctl", "restart", "fmcluster-prometheus-agent.service"] in node.calls("systemctl")


# -- head node ------------------------------------------------------------------------------------------------


def test_head_node_runs_the_slurm_exporter_and_grafana_with_the_workspace(node):
    node.publish("node_exporter", "prometheus", "slurm_exporter", "grafana")
    slurm_bin = node.root.parent / "slurm" / "bin"
    slurm_bin.mkdir(parents=True)
    (slurm_bin / "sinfo").write_text("#!/bin/sh\nexit 0\n")
    (slurm_bin / "sinfo").chmod(0o755)
    result = node.run(
        *BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--head-node", "--grafana", "--config-dir", str(DASHBOARDS),
        env={"PATH": f"{node.bin}:{slurm_bin}"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr

    slurm = node.unit("fmcluster-slurm-exporter.service")
    assert f"Environment=PATH={slurm_bin}:/usr/local/bin:/usr/bin:/bin" in slurm
    assert "slurm_exporter-1.7.0/prometheus-slurm-exporter -web.listen-address=:9092 -slurm.cli-fallback" in slurm
    assert json.loads(node.path("/etc/fmcluster/prometheus/targets/slurm.json").read_text())[0]["targets"] == [
        "127.0.0.1:9092"
    ]
    assert (installed(node, "grafana") / "bin" / "grafana").exists()
    datasource = node.path("/etc/fmcluster/grafana/provisioning/datasources/fmcluster.yaml").read_text()
    assert f"url: {ENDPOINT.rstrip('/')}\n" in datasource
    assert "sigV4Auth: true" in datasource and "sigV4Region: us-east-1" in datasource
    dashboards = sorted(p.name for p in node.path("/var/lib/fmcluster/grafana-dashboards").iterdir())
    assert dashboards == ["efa.json", "fsx.json", "gpu.json", "slurm.json"]
    ini = node.path("/etc/fmcluster/grafana/grafana.ini").read_text()
    assert "http_addr = 127.0.0.1" in ini and "sigv4_auth_enabled = true" in ini
    assert "admin_password = $__file{/etc/fmcluster/grafana/admin-password}" in ini
    password = node.path("/etc/fmcluster/grafana/admin-password").read_text()
    assert len(password) >= 24 and password.isalnum()
    assert node.calls("useradd") == [["useradd", "--system", "--no-create-home", "--shell", "/sbin/nologin",
                                      "fmcluster-grafana"]]  # fmt: skip
    assert "User=fmcluster-grafana" in node.unit("fmcluster-grafana.service")


def test_head_node_without_slurm_commands_skips_the_exporter(node):
    node.publish("node_exporter", "prometheus")
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--head-node", "--config-dir", str(DASHBOARDS))
    assert result.returncode == 0, result.stderr
    assert "--head-node but no sinfo on PATH, in /opt/aws/pcs/scheduler/slurm-*/bin" in node.script_log()
    assert json.loads(node.path("/etc/fmcluster/prometheus/targets/slurm.json").read_text()) == []


def test_pcs_login_node_finds_slurm_under_opt_aws_pcs(node):
    """PCS installs Slurm under /opt/aws/pcs/scheduler/slurm-<version>/ and puts it on PATH for login shells only."""
    node.publish("node_exporter", "prometheus", "slurm_exporter")
    for version in ("24.11", "25.05"):
        sinfo = node.path(f"/opt/aws/pcs/scheduler/slurm-{version}/bin/sinfo")
        sinfo.parent.mkdir(parents=True)
        sinfo.write_text("#!/bin/sh\nexit 0\n")
        sinfo.chmod(0o755)
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--head-node", "--config-dir", str(DASHBOARDS))
    assert result.returncode == 0, result.stderr
    slurm = node.unit("fmcluster-slurm-exporter.service")
    assert "Environment=PATH=/opt/aws/pcs/scheduler/slurm-25.05/bin:/usr/local/bin:/usr/bin:/bin" in slurm


def test_a_slurm_exporter_release_that_cannot_be_downloaded_leaves_the_head_node_monitored(node):
    """The failure of issue 13: a pinned release without binaries ended the script before the agent and Grafana."""
    node.publish("node_exporter", "prometheus", "grafana")
    node.add_stub("sinfo")
    result = node.run(
        *BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--head-node", "--grafana", "--config-dir", str(DASHBOARDS),
        env={"FMCLUSTER_RETRY_ATTEMPTS": "2"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert ("not installing slurm_exporter 1.7.0: slurm_exporter/1.7.0/prometheus-slurm-exporter_linux_amd64.tar.gz is "
            "not in the mirror with its pinned SHA-256") in result.stderr  # fmt: skip
    assert json.loads(node.path("/etc/fmcluster/prometheus/targets/slurm.json").read_text()) == []
    restarted = [call[2] for call in node.calls("systemctl") if call[1] == "restart"]
    assert "fmcluster-grafana.service" in restarted and "fmcluster-prometheus-agent.service" in restarted


# -- the shipped artifact list ---------------------------------------------------------------------------------


def test_with_the_shipped_list_what_has_no_pin_is_refused_by_name_and_the_rest_is_checked(shipped_list):
    """The shipped list pins node_exporter and Prometheus, not the Slurm exporter, Grafana or dcgm-exporter
    (fmcluster/mirror/README.md): a head node refuses those three, naming each, and keeps the agent; the stand-in
    archives here are not the pinned ones, so node_exporter and Prometheus are refused for their digest."""
    node = shipped_list
    for component in RELEASES:
        node.set(f"s3/{MIRROR.removeprefix('s3://')}/{RELEASES[component].key}", tarball(RELEASES[component]))
    node.set("gpus", GPUS)
    node.add_stub("sinfo")
    node.add_stub("ldconfig", "printf '\\tlibdcgm.so.4 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libdcgm.so.4\\n'")
    result = node.run(
        *BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--head-node", "--grafana", "--config-dir", str(DASHBOARDS)
    )
    assert result.returncode == 1  # no agent: its stand-in archive is not the pinned Prometheus
    for key in (RELEASES["slurm_exporter"].key, RELEASES["grafana"].key, IMAGE_KEY,
                "dcgm-exporter/4.3.1-4.4.0/dcgm-exporter-4.3.1-4.4.0.linux-amd64.tar.gz"):  # fmt: skip
        assert (
            f"ERROR: {key} has no pinned SHA-256 in fmcluster's artifact list (its digest is unconfirmed): not "
            "installing it; see fmcluster/mirror/README.md (pinning an artifact)"
        ) in result.stderr, key
    for key in (RELEASES["node_exporter"].key, RELEASES["prometheus"].key):
        assert f"ERROR: checksum mismatch for {key} from the mirror: expected " in result.stderr
    assert "Grafana is not run: its release could not be installed (see above); the agent still remote-writes" in (
        result.stderr
    )
    copied = mirror_copies(node)
    assert copied == [f"{MIRROR}/{RELEASES[c].key}" for c in ("node_exporter", "prometheus")]  # unpinned: no copy
    assert not node.path("/opt/fmcluster/observability").exists() or not any(
        node.path("/opt/fmcluster/observability").iterdir()
    )


def test_without_a_mirror_nothing_is_installed(node):
    result = node.run(
        "--cluster", "llm-pretrain", "--region", "us-east-1", "--prometheus-endpoint", ENDPOINT,
        "--config-dir", str(DASHBOARDS),
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].endswith(
        "ERROR: --mirror (or FMCLUSTER_ARTIFACT_MIRROR) must be an S3 URI like s3://my-bucket/fmcluster-mirror; got ''"
    )
    assert node.calls("aws") == [] and node.calls("systemctl") == []


# -- the endpoint from SSM ------------------------------------------------------------------------------------


def test_endpoint_parameter_not_there_yet_then_the_refresh_timer_picks_it_up(node):
    node.publish("node_exporter", "prometheus")
    result = node.run(
        *BASE_ARGS, "--endpoint-parameter", PARAMETER, "--config-dir", str(DASHBOARDS),
        env={"FMCLUSTER_RETRY_ATTEMPTS": "2"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"SSM parameter {PARAMETER} not readable yet" in node.script_log()
    assert not node.path("/etc/fmcluster/prometheus/agent.yml").exists()
    assert "OnUnitActiveSec=5min" in node.unit("fmcluster-observability-refresh.timer")
    assert f"{node.scripts}/observability.sh --refresh" in node.unit("fmcluster-observability-refresh.service")

    node.set("ssm-value", ENDPOINT + "\n")
    result = node.run("--refresh")
    assert result.returncode == 0, result.stderr
    assert node.calls("aws")[-1][:6] == ["aws", "ssm", "get-parameter", "--region", "us-east-1", "--name"]
    assert f"{ENDPOINT}api/v1/remote_write" in node.path("/etc/fmcluster/prometheus/agent.yml").read_text()
    assert ["systemctl", "restart", "fmcluster-prometheus-agent.service"] in node.calls("systemctl")


def test_refresh_without_a_first_run_is_an_error(node):
    result = node.run("--refresh")
    assert result.returncode == 1
    assert "run observability.sh with its install arguments first" in result.stderr


# -- bad arguments --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        ((), 2, "usage: "),
        (("--cluster", "x"), 2, "usage: "),
        ((*BASE_ARGS, "--weird"), 2, "usage: "),
        (BASE_ARGS, 1, "give one of --prometheus-endpoint and --endpoint-parameter"),
        ((*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--endpoint-parameter", PARAMETER), 1, "give one of"),
        ((*BASE_ARGS, "--prometheus-endpoint", "http://evil.example/x"), 1,
         "the Prometheus endpoint must look like https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-.../"),
        ((*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--mirror", "https://bucket"), 1,
         "--mirror (or FMCLUSTER_ARTIFACT_MIRROR) must be an S3 URI like s3://my-bucket/fmcluster-mirror; "
         "got 'https://bucket'"),
        ((*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", "/nonexistent"), 1,
         "no agent.yml in --config-dir /nonexistent"),
    ],
    ids=["nothing", "no-region", "unknown-option", "no-endpoint", "two-endpoints", "bad-endpoint", "bad-mirror",
         "no-config"],
)  # fmt: skip
def test_bad_arguments_are_rejected_before_anything_happens(node, args, status, message):
    result = node.run(*args)
    assert result.returncode == status
    assert message in result.stderr
    assert node.calls("aws") == [] and node.calls("systemctl") == []


# -- textfile metrics: EFA hardware counters and Lustre client statistics -------------------------------------


def efa_device(node: Node, name: str, counters: dict[str, int], vendor: str = "0x1d0f") -> None:
    device = node.path(f"/sys/class/infiniband/{name}")
    (device / "device").mkdir(parents=True)
    (device / "device" / "vendor").write_text(vendor + "\n")
    hw = device / "ports" / "1" / "hw_counters"
    hw.mkdir(parents=True)
    for counter, value in counters.items():
        (hw / counter).write_text(f"{value}\n")


def test_textfile_has_efa_counters_and_lustre_statistics(node):
    efa_device(node, "rdmap113s0", {"tx_bytes": 1047394519620, "rx_drops": 1523, "lifespan": 12})
    efa_device(node, "rdmap79s0", {"tx_bytes": 1042168029538, "rx_drops": 0, "lifespan": 12})
    efa_device(node, "mlx5_0", {"out_of_buffer": 3}, vendor="0x15b3")  # not EFA: left to the infiniband collector
    node.set("llite-stats", LLITE_STATS)
    result = node.run("--write-textfile")
    assert result.returncode == 0, result.stderr
    text = node.path("/var/lib/fmcluster/node-exporter-textfile/fmcluster.prom").read_text()
    assert text.splitlines() == [
        "# HELP node_amazonefa_lifespan EFA hardware counter lifespan (hw_counters).",
        "# TYPE node_amazonefa_lifespan gauge",
        'node_amazonefa_lifespan{device="rdmap113s0",port="1"} 12',
        'node_amazonefa_lifespan{device="rdmap79s0",port="1"} 12',
        "# HELP node_amazonefa_rx_drops EFA hardware counter rx_drops (hw_counters).",
        "# TYPE node_amazonefa_rx_drops counter",
        'node_amazonefa_rx_drops{device="rdmap113s0",port="1"} 1523',
        'node_amazonefa_rx_drops{device="rdmap79s0",port="1"} 0',
        "# HELP node_amazonefa_tx_bytes EFA hardware counter tx_bytes (hw_counters).",
        "# TYPE node_amazonefa_tx_bytes counter",
        'node_amazonefa_tx_bytes{device="rdmap113s0",port="1"} 1047394519620',
        'node_amazonefa_tx_bytes{device="rdmap79s0",port="1"} 1042168029538',
        "# HELP fmcluster_lustre_client_read_bytes_total Bytes read through this Lustre client (llite stats).",
        "# TYPE fmcluster_lustre_client_read_bytes_total counter",
        'fmcluster_lustre_client_read_bytes_total{fsname="xm3qjbmv"} 41871947382016',
        "# HELP fmcluster_lustre_client_write_bytes_total Bytes written through this Lustre client (llite stats).",
        "# TYPE fmcluster_lustre_client_write_bytes_total counter",
        'fmcluster_lustre_client_write_bytes_total{fsname="xm3qjbmv"} 19634820509696',
        "# HELP fmcluster_lustre_client_operations_total Lustre client operations by type (llite stats).",
        "# TYPE fmcluster_lustre_client_operations_total counter",
        'fmcluster_lustre_client_operations_total{fsname="xm3qjbmv",operation="open"} 1293811',
        'fmcluster_lustre_client_operations_total{fsname="xm3qjbmv",operation="getattr"} 5738291',
    ]
    leftovers = [p.name for p in node.path("/var/lib/fmcluster/node-exporter-textfile").iterdir()]
    assert leftovers == ["fmcluster.prom"]


def test_textfile_on_a_node_without_efa_or_lustre_is_empty(node):
    (node.bin / "lctl").unlink()
    assert node.run("--write-textfile").returncode == 0
    assert node.path("/var/lib/fmcluster/node-exporter-textfile/fmcluster.prom").read_text() == ""


def test_the_recorded_node_exporter_sample_carries_what_the_script_writes(node):
    """The fixture the dashboards are tested against has the textfile series in the form the script writes them."""
    efa_device(node, "rdmap113s0", {name: 1 for name in ("tx_bytes", "rx_bytes", "rx_drops", "rdma_write_bytes",
                                                         "rdma_read_bytes", "retrans_pkts", "lifespan")})  # fmt: skip
    node.set("llite-stats", LLITE_STATS)
    assert node.run("--write-textfile").returncode == 0
    written = node.path("/var/lib/fmcluster/node-exporter-textfile/fmcluster.prom").read_text()
    recorded = (FIXTURES / "node-exporter.prom").read_text()
    for line in written.splitlines():
        if line.startswith("#"):
            assert line in recorded, line
        else:
            series = line.rsplit(" ", 1)[0]
            assert series.split("{")[0] + "{" in recorded, series


def test_a_mirrored_image_that_does_not_match_its_pin_is_not_loaded(node):
    node.publish("node_exporter", "prometheus")
    node.set("gpus", GPUS)
    node.put(IMAGE_KEY, b"docker save output", pinned=b"the image NVIDIA published")
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS))
    assert result.returncode == 0, result.stderr
    assert f"ERROR: checksum mismatch for {IMAGE_KEY} from the mirror: expected " in result.stderr
    assert (f"ERROR: not loading fmcluster/dcgm-exporter:4.3.1-4.4.0-ubuntu22.04: {IMAGE_KEY} is not in the mirror "
            "with its pinned SHA-256") in result.stderr  # fmt: skip
    assert [call[1] for call in node.calls("docker")] == ["image"]  # looked, never loaded
    assert json.loads(node.path("/etc/fmcluster/prometheus/targets/dcgm.json").read_text()) == []


# -- dcgm-exporter on nodes without docker (PCS), per CPU architecture, from the mirror ------------------------------

DCGM_LIBRARY = "\tlibdcgm.so.4 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libdcgm.so.4\n"
"""`ldconfig -p`'s line for NVIDIA DCGM's library (datacenter-gpu-manager-4), which dcgm-exporter 4.x loads."""


def publish_for(node: Node, arch: str, *components: str) -> None:
    """The mirror's releases of `components` for CPU architecture `arch` (the same names, `arm64` for `amd64`)."""
    for component in components:
        release = RELEASES[component]
        swapped = dataclasses.replace(
            release, archive=release.archive.replace("amd64", arch),
            top_dir=release.top_dir.replace("amd64", arch) if release.top_dir else None,
        )  # fmt: skip
        node.put(swapped.key, tarball(swapped))


def publish_dcgm_binaries(node: Node) -> dict[str, str]:
    """The mirror's dcgm-exporter binary archives, one per CPU architecture (keys of fmcluster/mirror/artifacts.json),
    pinned; returns each architecture's S3 URI."""
    keys = {}
    for arch in ("amd64", "arm64"):
        release = Release("dcgm-exporter", "4.3.1-4.4.0", f"dcgm-exporter-4.3.1-4.4.0.linux-{arch}.tar.gz",
                          "dcgm-exporter", None)  # fmt: skip
        node.put(release.key, tarball(release))
        keys[arch] = f"{MIRROR}/{release.key}"
    return keys


@pytest.mark.parametrize(("machine", "arch"), [("x86_64", "amd64"), ("aarch64", "arm64")])
def test_a_gpu_node_without_docker_runs_the_mirrors_dcgm_exporter_for_its_architecture(node, machine, arch):
    publish_for(node, arch, "node_exporter", "prometheus")
    key = publish_dcgm_binaries(node)[arch]
    node.add_stub("uname", f'[[ "${{1:-}}" == -m ]] && echo {machine} || echo Linux')
    node.add_stub("ldconfig", f"printf '{DCGM_LIBRARY}'")
    node.set("gpus", GPUS)
    (node.bin / "docker").unlink()
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS))
    assert result.returncode == 0, result.stderr
    sources = [call[-2] for call in node.calls("aws") if call[1:3] == ["s3", "cp"]]
    assert key in sources and not [s for s in sources if "dcgm-exporter" in s and s.endswith(".tar.gz") and s != key]
    binary = node.path("/opt/fmcluster/observability/dcgm-exporter-4.3.1-4.4.0/dcgm-exporter")
    assert binary.exists()
    assert f"ExecStart={binary} -f /etc/fmcluster/dcgm-counters.csv -a :9400 " in node.unit(
        "fmcluster-dcgm-exporter.service"
    )
    assert json.loads(node.path("/etc/fmcluster/prometheus/targets/dcgm.json").read_text())[0]["targets"] == [
        "127.0.0.1:9400"
    ]


def test_the_mirrors_dcgm_exporter_is_not_run_without_nvidias_dcgm_library(node):
    node.publish("node_exporter", "prometheus")
    publish_dcgm_binaries(node)
    node.add_stub("ldconfig", "printf '\\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6\\n'")
    node.set("gpus", GPUS)
    (node.bin / "docker").unlink()
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS))
    assert result.returncode == 0, result.stderr
    assert "the mirror's dcgm-exporter needs NVIDIA DCGM (libdcgm.so.4), which this image lacks" in result.stderr
    assert json.loads(node.path("/etc/fmcluster/prometheus/targets/dcgm.json").read_text()) == []


def test_on_hyperpod_dcgm_exporter_reads_the_amis_own_job_map(node):
    """HyperPod's AMI maps jobs to GPUs itself (prolog.d/700_dcgm_job_map_register.sh into /run/slurm/dcgm-job-mapping;
    awsome-distributed-training 5.sagemaker-hyperpod/Extensions/observability/README.md)."""
    hook = node.path("/opt/slurm/etc/prolog.d/700_dcgm_job_map_register.sh")
    hook.parent.mkdir(parents=True)
    hook.write_text("#!/bin/bash\n")
    node.publish("node_exporter", "prometheus")
    node.put(IMAGE_KEY, b"docker save output")
    node.set("gpus", GPUS)
    result = node.run(*BASE_ARGS, "--prometheus-endpoint", ENDPOINT, "--config-dir", str(DASHBOARDS))
    assert result.returncode == 0, result.stderr
    unit = node.unit("fmcluster-dcgm-exporter.service")
    assert "--hpc-job-mapping-dir /run/slurm/dcgm-job-mapping" in unit
    assert "-v /run/slurm/dcgm-job-mapping:/run/slurm/dcgm-job-mapping:ro" in unit


def test_the_textfile_counts_the_gpus_the_driver_sees(node):
    (node.bin / "lctl").unlink()
    for address in ("0000:53:00.0", "0000:64:00.0"):
        node.path(f"/proc/driver/nvidia/gpus/{address}").mkdir(parents=True)
    assert node.run("--write-textfile").returncode == 0
    assert node.path("/var/lib/fmcluster/node-exporter-textfile/fmcluster.prom").read_text().splitlines() == [
        "# HELP fmcluster_gpus NVIDIA GPUs the driver sees on this node (/proc/driver/nvidia/gpus).",
        "# TYPE fmcluster_gpus gauge",
        "fmcluster_gpus 2",
    ]
