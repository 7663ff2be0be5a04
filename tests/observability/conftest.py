"""A real Prometheus, started once per session on loopback, scraping recorded exporter output.

What is real: Debian's `prometheus` and `promtool` binaries, fmcluster's rule files (recording.yml, alerts.yml) and the
job names of its agent template (agent.yml). What is recorded rather than live: the exporters. A small HTTP server on
127.0.0.1 serves the samples in tests/observability/fixtures/ (text exposition format, written to match what each
exporter prints on a p5.48xlarge HyperPod node with a running 13-node job):

* dcgm-exporter.prom   NVIDIA dcgm-exporter 4.3.1-4.4.0 with fmcluster's counters CSV: 8 H100 GPUs of ip-10-1-33-17 in
                       Slurm job 4187; GPU 5 reported XID 94 (contained ECC error) once, GPU 2 XID 13 (an application
                       fault) twice within the XID window (DCGM_EXP_XID_ERRORS_COUNT).
* node-exporter.prom   node_exporter 1.10.2: 32 EFA devices (infiniband collector: state, rate), ENA interface,
                       /fsx over Lustre 95% full, ethtool allowance counters, and the textfile metrics observability.sh
                       writes (node_amazonefa_* from hw_counters, where rdmap113s0 has dropped receives and retransmit
                       timeouts; fmcluster_lustre_client_* from llite stats).
* slurm-exporter.prom  rivosinc/prometheus-slurm-exporter 1.7.0 (CLI fallback: `sinfo -o %T` state names): 16 nodes,
                       13 allocated, 1 idle, 1 drained, 1 down*; jobs running, pending, completed and failed.
Where each file's series, labels and values come from: fixtures/README.md.

The server replays each recording on every scrape, advancing every counter by 1% of its recorded value per scrape, so
rate() and increase() have something to measure (a counter recorded at 0, such as a healthy device's rx_drops, stays 0).
A second node target points at a port where nothing listens: node ip-10-1-40-2 is down, as Slurm says (down*).

The tests need `prometheus` and `promtool` on PATH (`apt-get install -y prometheus`); without them they fail, they
never skip. Prometheus gets its own data directory and a free port, and is always terminated at the end.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "fmcluster" / "dashboards"
RULES = DASHBOARDS / "rules"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORDINGS = {"node": "node-exporter.prom", "dcgm": "dcgm-exporter.prom", "slurm": "slurm-exporter.prom"}
"""Agent job name -> recorded output of its exporter."""
NODE = "ip-10-1-33-17"
DOWN_NODE = "ip-10-1-40-2"
SCRAPE_SECONDS = 1
STARTUP_DEADLINE = 60.0
INSTALL_HINT = "install it with `apt-get install -y prometheus` (Debian's package brings prometheus and promtool)"


def require_binary(name: str) -> str:
    """The path of `name`, or a test failure (never a skip) saying how to install it."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not on PATH; {INSTALL_HINT}", pytrace=False)
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Replay:
    """One recorded scrape, served again and again with its counters advancing."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.counters = {
            line.split()[2] for line in self.lines if line.startswith("# TYPE ") and line.endswith(" counter")
        }
        self.served = 0
        self.lock = threading.Lock()

    def render(self) -> bytes:
        with self.lock:
            step = self.served
            self.served += 1
        out = []
        for line in self.lines:
            if line and not line.startswith("#"):
                series, value = line.rsplit(" ", 1)
                if series.split("{", 1)[0] in self.counters:
                    line = f"{series} {float(value) * (1 + 0.01 * step):.17g}"
            out.append(line)
        return ("\n".join(out) + "\n").encode()


def serve_recordings() -> ThreadingHTTPServer:
    replays = {f"/{job}": Replay((FIXTURES / name).read_text()) for job, name in RECORDINGS.items()}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            replay = replays.get(self.path)
            if replay is None:
                self.send_error(404)
                return
            body = replay.render()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def immediate_copy(rules: dict, suffix: str) -> dict:
    """`rules` with every `for:` removed and every group interval 1s, group names suffixed: fires at once."""
    groups = []
    for group in rules["groups"]:
        rules_ = [{key: value for key, value in rule.items() if key != "for"} for rule in group["rules"]]
        groups.append({**group, "name": group["name"] + suffix, "interval": f"{SCRAPE_SECONDS}s", "rules": rules_})
    return {"groups": groups}


def prometheus_config(exporters_port: int, tmp: Path) -> dict:
    """A full Prometheus configuration: the agent template's jobs, pointed at the recordings, plus fmcluster's rules."""
    agent = yaml.safe_load((DASHBOARDS / "agent.yml").read_text())
    recording = yaml.safe_load((RULES / "recording.yml").read_text())
    fast_recording = {"groups": [{**group, "interval": f"{SCRAPE_SECONDS}s"} for group in recording["groups"]]}
    (tmp / "recording-1s.yml").write_text(yaml.safe_dump(fast_recording, sort_keys=False))
    alerts = yaml.safe_load((RULES / "alerts.yml").read_text())
    (tmp / "alerts-immediate.yml").write_text(yaml.safe_dump(immediate_copy(alerts, "-immediate"), sort_keys=False))
    scrape_configs = []
    for job in agent["scrape_configs"]:
        name = job["job_name"]
        static = [{"targets": [f"127.0.0.1:{exporters_port}"], "labels": {"instance": NODE}}]
        if name == "node":
            static.append({"targets": [f"127.0.0.1:{free_port()}"], "labels": {"instance": DOWN_NODE}})
        scrape_configs.append({"job_name": name, "metrics_path": f"/{name}", "static_configs": static})
    return {
        "global": {
            "scrape_interval": f"{SCRAPE_SECONDS}s",
            "scrape_timeout": f"{SCRAPE_SECONDS}s",
            "evaluation_interval": f"{SCRAPE_SECONDS}s",
            "external_labels": {"cluster": "recorded"},
        },
        # the shipped alerts keep their `for:` (pending here); the immediate copy shows what would fire
        "rule_files": [str(tmp / "recording-1s.yml"), str(RULES / "alerts.yml"), str(tmp / "alerts-immediate.yml")],
        "scrape_configs": scrape_configs,
    }


@dataclass
class LivePrometheus:
    """A running Prometheus: `query()` and `get()` against its HTTP API."""

    url: str
    process: subprocess.Popen
    config_file: Path

    def get(self, path: str, **params: str | list[str]) -> dict:
        query = urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as response:
            return json.loads(response.read())

    def query(self, expr: str) -> dict:
        """An instant query; raises AssertionError with Prometheus's message when the expression is rejected."""
        try:
            body = self.get("/api/v1/query", query=expr)
        except urllib.error.HTTPError as error:
            raise AssertionError(f"Prometheus rejected {expr!r}: {error.read().decode()}") from None
        assert body["status"] == "success", body
        return body["data"]

    def rules(self) -> dict[str, dict]:
        """Every rule Prometheus loaded, by '<group>/<name>'."""
        groups = self.get("/api/v1/rules")["data"]["groups"]
        return {f"{group['name']}/{rule['name']}": rule for group in groups for rule in group["rules"]}


def _wait(what: str, check, deadline: float, process: subprocess.Popen) -> None:
    last: object = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"prometheus exited with status {process.returncode} while waiting for {what}")
        try:
            last = check()
            if last is True:
                return
        except (OSError, KeyError, ValueError) as error:
            last = error
        time.sleep(0.25)
    raise AssertionError(f"timed out after {STARTUP_DEADLINE:.0f}s waiting for {what}; last: {last!r}")


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory) -> LivePrometheus:
    binary = require_binary("prometheus")
    tmp = tmp_path_factory.mktemp("prometheus")
    server = serve_recordings()
    config_file = tmp / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(prometheus_config(server.server_address[1], tmp), sort_keys=False))
    port = free_port()
    log = (tmp / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config_file}",
            f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    live = LivePrometheus(url=f"http://127.0.0.1:{port}", process=process, config_file=config_file)
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE

        def ready() -> bool:
            with urllib.request.urlopen(f"{live.url}/-/ready", timeout=2) as response:
                return response.status == 200

        def targets_up() -> object:
            health = defaultdict(list)
            for target in live.get("/api/v1/targets")["data"]["activeTargets"]:
                health[target["labels"]["instance"]].append(target["health"])
            return (health[NODE] == ["up"] * len(RECORDINGS) and health[DOWN_NODE] == ["down"]) or dict(health)

        recorded = [
            rule["record"]
            for group in yaml.safe_load((RULES / "recording.yml").read_text())["groups"]
            for rule in group["rules"]
        ]

        def rates_measurable() -> object:
            # two scrapes of every recorded target (so every rate() has two samples), then an evaluation of every
            # recording rule after them
            scrapes = live.query(f'count_over_time(up{{instance="{NODE}"}}[1m]) >= 2')["result"]
            missing = [name for name in recorded if not live.query(name)["result"]]
            return (len(scrapes) == len(RECORDINGS) and not missing) or (scrapes, missing)

        _wait("/-/ready", ready, deadline, process)
        _wait("every recorded target up and the dead node down", targets_up, deadline, process)
        _wait("rates and recording rules", rates_measurable, deadline, process)
        yield live
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()
        server.shutdown()
        server.server_close()
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp / "data")
