"""fmcluster's Prometheus content checked by real Prometheus tools: `promtool` on the rule files and the rendered agent
configuration, and a live Prometheus (see conftest.py) fed with recorded exporter output, against which every dashboard
query, every recording rule and every alert expression must parse and (where the recordings call for it) return data,
and the alerts the recordings should trigger must fire.

Recorded rather than live: the exporters' output (tests/observability/fixtures/), not the cluster. Real: Prometheus.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.observability.conftest import DASHBOARDS, DOWN_NODE, FIXTURES, NODE, RULES, require_binary

pytestmark = pytest.mark.real_tools

DASHBOARD_FILES = sorted(DASHBOARDS.glob("*.json"))
RULE_FILES = sorted(RULES.glob("*.yml"))
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "15s", "$instance": ".*", "$job": ".*"}
"""What Grafana puts in for its variables: every node, every job, a rate window of four scrapes."""
LABEL_VALUES = re.compile(r"^label_values\((?P<match>.+),\s*(?P<label>\w+)\)$")
FIRING = {
    "GpuXidFatal": {"gpu": "5", "instance": NODE},
    "GpuXidError": {"gpu": "2", "instance": NODE},
    "ExporterDown": {"job": "node", "instance": DOWN_NODE},
    "SlurmNodesDown": {"state": "down*"},
    "SlurmNodesDrained": {"state": "drained"},
    "EfaErrorsRising": {"device": "rdmap113s0", "instance": NODE},
    "FsxNearlyFull": {"mountpoint": "/fsx"},
}
"""Alerts the recordings trigger, with the labels of the one series each must fire for."""
QUIET = {"EfaPortNotActive", "FsxFull", "NodeNotReporting"}
"""Alerts the recordings must not trigger (every EFA port ACTIVE; /fsx is 95%, not 97%, full; a node whose series stop
needs hours of history: alerts_test.yml shows it). The down node here is a target this Prometheus scrapes and finds
dead, as a live node's agent finds a dead exporter."""
ALERT_TESTS = Path(__file__).resolve().parent / "rules" / "alerts_test.yml"
RULE_SETTLE_SECONDS = 15.0


def panels(path: Path) -> list[dict]:
    return json.loads(path.read_text())["panels"]


def panel_queries() -> list[tuple[str, str]]:
    return [
        (f"{path.stem}: {panel['title']} [{target['refId']}]", target["expr"])
        for path in DASHBOARD_FILES
        for panel in panels(path)
        for target in panel["targets"]
    ]


def rules() -> list[dict]:
    return [
        rule for path in RULE_FILES for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]
    ]


def grafana(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unsubstituted Grafana variable in {expr!r}"
    return expr


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [require_binary("promtool"), *args], capture_output=True, text=True, timeout=60, check=False, cwd=cwd
    )


# -- promtool -----------------------------------------------------------------------------------------------------


def test_promtool_accepts_the_rule_files():
    result = promtool("check", "rules", *map(str, RULE_FILES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_FILES)


def test_alert_rules_pass_their_unit_tests():
    """tests/observability/rules/alerts_test.yml: every alert, with series shaped as the exporters really send them."""
    result = promtool("test", "rules", ALERT_TESTS.name, cwd=ALERT_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_unit_test():
    tested = set(re.findall(r"^\s+- alertname: (\w+)$", ALERT_TESTS.read_text(), re.M))
    assert tested == {rule["alert"] for rule in rules() if "alert" in rule}


NODES = 100


def node_loss_test(*, planned: bool) -> dict:
    """A promtool unit test of NodeNotReporting for 100 compute nodes of cluster `c` (plus the head node, whose Slurm
    exporter reports them) that all stop reporting at 31m, as at the end of a capacity block or in an AZ event.

    Lost (`planned=False`): Slurm keeps the nodes and marks them not responding from 36m (`allocated*`: the `*` of
    sinfo(1) NODE STATE CODES). Planned (`planned=True`): a scale-down or the end of the capacity removed them from
    Slurm, so its counts drop instead (HyperPod rewrites slurm.conf; PCS powers cloud nodes down). Cluster `d`, on the
    same workspace, loses one node at the same time: its own alert, not merged with `c`'s.
    """
    series = [{"series": f'up{{cluster="c",job="node",instance="n{i:03d}"}}', "values": "1x30"} for i in range(NODES)]
    series += [
        {"series": 'up{cluster="c",job="node",instance="head"}', "values": "1x120"},
        {"series": 'up{cluster="d",job="node",instance="d1"}', "values": "1x30"},
        {"series": 'up{cluster="d",job="node",instance="d2"}', "values": "1x120"},
        {"series": 'slurm_node_count_per_state{cluster="d",instance="dhead",job="slurm",state="idle*"}',
         "values": "_x35 1x85"},
    ]  # fmt: skip
    slurm = 'slurm_node_count_per_state{cluster="c",instance="head",job="slurm",state="%s"}'
    if planned:
        series.append({"series": slurm % "allocated", "values": f"{NODES}x30 _x90"})
        series.append({"series": slurm % "idle", "values": "0x120"})
    else:
        series.append({"series": slurm % "allocated", "values": f"{NODES}x35 _x85"})
        series.append({"series": slurm % "allocated*", "values": f"_x35 {NODES}x85"})
    (rule,) = [rule for rule in rules() if rule.get("alert") == "NodeNotReporting"]

    def fired(cluster: str, count: int) -> dict:
        def text(template: str) -> str:  # the rule's two placeholders; promtool checks Prometheus renders the same
            return template.replace("{{ $value }}", str(count)).replace("{{ $labels.cluster }}", cluster)

        annotations = {name: text(template) for name, template in rule["annotations"].items()}
        return {"exp_labels": {"severity": "critical", "cluster": cluster}, "exp_annotations": annotations}

    late = [fired("d", 1)] if planned else [fired("c", NODES), fired("d", 1)]
    return {
        "rule_files": [str(RULES / "alerts.yml")],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"alertname": "NodeNotReporting", "eval_time": "30m", "exp_alerts": []},
                    {"alertname": "NodeNotReporting", "eval_time": "45m", "exp_alerts": late},
                    {"alertname": "NodeNotReporting", "eval_time": "100m", "exp_alerts": late},
                ],
            }
        ],
    }


@pytest.mark.parametrize("planned", [False, True], ids=["lost", "removed-on-purpose"])
def test_a_100_node_loss_is_one_alert_per_cluster_and_a_planned_removal_none(tmp_path, planned):
    """One alert per cluster, its value the count, is also one notification: the alert manager groups by cluster and
    alert name (tests/unit/test_observability.py)."""
    test_file = tmp_path / "node_loss_test.yml"
    test_file.write_text(yaml.safe_dump(node_loss_test(planned=planned)))
    result = promtool("test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_accepts_the_agent_configuration_rendered_as_on_a_node(tmp_path):
    targets = tmp_path / "targets"
    targets.mkdir()
    for job in ("node", "dcgm", "slurm"):
        (targets / f"{job}.json").write_text(
            json.dumps([{"targets": ["127.0.0.1:9100"], "labels": {"instance": NODE}}])
        )
    rendered = (DASHBOARDS / "agent.yml").read_text()
    for placeholder, value in {
        "@CLUSTER@": "llm-pretrain",
        "@REMOTE_WRITE_URL@": "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123abcd-4567/api/v1/remote_write",
        "@REGION@": "us-east-1",
        "@TARGETS_DIR@": str(targets),
    }.items():
        rendered = rendered.replace(placeholder, value)
    assert "@" not in rendered.split("scrape_configs:")[1].replace("@CLUSTER@", "")
    config = tmp_path / "agent.yml"
    config.write_text(rendered)
    result = promtool("check", "config", "--agent", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stdout + result.stderr, result.stdout + result.stderr
    agent = yaml.safe_load(rendered)
    assert agent["remote_write"][0]["sigv4"] == {"region": "us-east-1"}
    assert [job["job_name"] for job in agent["scrape_configs"]] == ["node", "dcgm", "slurm"]


def test_promtool_accepts_the_test_servers_full_configuration(prometheus):
    result = promtool("check", "config", str(prometheus.config_file))
    assert result.returncode == 0, result.stdout + result.stderr


# -- dashboards against the live Prometheus -------------------------------------------------------------------------


@pytest.mark.parametrize(("panel", "expr"), panel_queries(), ids=[name for name, _ in panel_queries()])
def test_every_dashboard_query_parses_and_returns_data(prometheus, panel, expr):
    data = prometheus.query(grafana(expr))
    assert data["result"], f"{panel}: no data for {grafana(expr)!r}"


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda path: path.stem)
def test_every_dashboard_variable_query_finds_values(prometheus, path):
    dashboard = json.loads(path.read_text())
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = grafana(variable["query"]["query"])
        match = LABEL_VALUES.match(query)
        assert match, f"{path.stem}: variable {variable['name']} is not a label_values() query: {query!r}"
        values = prometheus.get(f"/api/v1/label/{match['label']}/values", **{"match[]": match["match"]})["data"]
        assert values, f"{path.stem}: variable {variable['name']} finds no values for {query!r}"


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda path: path.stem)
def test_dashboards_are_provisionable(path):
    dashboard = json.loads(path.read_text())
    assert dashboard["uid"] == f"fmcluster-{path.stem}"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for panel in dashboard["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        position = panel["gridPos"]
        assert position["x"] + position["w"] <= 24, panel["title"]


# -- rules against the live Prometheus ------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", rules(), ids=lambda rule: rule.get("record") or rule["alert"])
def test_every_rule_expression_evaluates(prometheus, rule):
    data = prometheus.query(rule["expr"])
    name = rule.get("record") or rule["alert"]
    if "record" in rule:
        assert data["result"], f"recording rule {name} has no data"
        assert prometheus.query(name)["result"], f"Prometheus recorded nothing for {name}"
    else:
        assert bool(data["result"]) == (name in FIRING), f"alert {name}: {data['result']}"


def test_every_alert_carries_a_severity_and_a_for_duration():
    for rule in rules():
        if "alert" in rule:
            assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
            assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["alert"]
            assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]


def eventually(read, accept, seconds: float = RULE_SETTLE_SECONDS):
    """`read()` until `accept` takes its result (rule groups and scrapes run on their own clocks); the last result."""
    deadline = time.monotonic() + seconds
    result = read()
    while not accept(result) and time.monotonic() < deadline:
        time.sleep(0.25)
        result = read()
    return result


def firing_immediately(prometheus) -> dict[str, list[dict]]:
    firing = {}
    for key, rule in prometheus.rules().items():
        group, name = key.split("/", 1)
        if group == "fmcluster-alerts-immediate" and rule["state"] == "firing":
            firing[name] = [alert["labels"] for alert in rule["alerts"]]
    return firing


def test_the_recorded_faults_fire_their_alerts(prometheus):
    """The immediate copy of alerts.yml (no `for:`) fires exactly the alerts the recordings call for."""
    firing = eventually(lambda: firing_immediately(prometheus), lambda found: set(found) == set(FIRING))
    assert set(firing) == set(FIRING), firing
    for name, labels in FIRING.items():
        (alert,) = firing[name]
        assert labels.items() <= alert.items(), (name, alert)
        assert alert["severity"] in ("critical", "warning")
    assert not QUIET & set(firing)


def test_the_shipped_alerts_wait_for_their_for_duration(prometheus):
    """The same faults under the real `for:` are pending: one scrape never pages anybody."""

    def read() -> dict[str, str]:
        return {
            key.split("/", 1)[1]: rule["state"]
            for key, rule in prometheus.rules().items()
            if key.startswith("fmcluster-alerts/")
        }

    # an XID is an event, not a flaky scrape: those alerts have `for: 0s` and fire at once
    expected = {name: "firing" if name.startswith("GpuXid") else "pending" for name in FIRING}
    states = eventually(read, lambda found: all(found[name] == expected[name] for name in FIRING))
    assert {name: states[name] for name in FIRING} == expected
    assert {name: states[name] for name in QUIET} == dict.fromkeys(QUIET, "inactive")


def test_alerts_api_lists_the_active_alerts_with_annotations(prometheus):
    alerts = prometheus.get("/api/v1/alerts")["data"]["alerts"]
    firing = [alert for alert in alerts if alert["state"] == "firing"]
    fatal = [alert for alert in firing if alert["labels"]["alertname"] == "GpuXidFatal"]
    assert len(fatal) == 2  # the shipped rule and its immediate copy
    for alert in fatal:
        assert alert["annotations"]["summary"] == f"XID 94 on GPU 5 of {NODE}"
        assert "reported XID 94 (up to 1 times within 5 minutes)" in alert["annotations"]["description"]
        assert "reset or a replacement" in alert["annotations"]["description"]


SLURM_EXPORTER_NAMES = {
    # exporter/nodes.go at v1.7.0 (NewNodeCollecter)
    "slurm_cpus_total", "slurm_cpus_idle", "slurm_cpu_load", "slurm_cpus_per_state", "slurm_node_count_per_state",
    "slurm_mem_real", "slurm_mem_alloc", "slurm_mem_free", "slurm_partition_total_cpus", "slurm_partition_idle_cpus",
    "slurm_partition_alloc_cpus", "slurm_partition_cpu_load", "slurm_partition_real_mem", "slurm_partition_free_mem",
    "slurm_partition_alloc_mem", "slurm_partition_weight", "slurm_partition_node_count", "slurm_node_scrape_duration",
    "slurm_node_scrape_error",
    # exporter/jobs.go at v1.7.0 (NewJobsController)
    "slurm_user_state_total", "slurm_user_mem_alloc", "slurm_user_cpu_alloc", "slurm_partition_job_state_total",
    "slurm_account_job_state_mem_alloc", "slurm_account_job_state_cpu_alloc", "slurm_account_job_state_total",
    "slurm_job_scrape_duration", "slurm_job_scrape_error", "slurm_pending_reason_total", "slurm_feature_total",
    "slurm_feature_cpu_alloc", "slurm_feature_mem_alloc",
}  # fmt: skip
"""The slurm_* names rivosinc/prometheus-slurm-exporter v1.7.0 declares for its node and job collectors
(prometheus.NewDesc in exporter/nodes.go and exporter/jobs.go at the tag)."""


def test_the_slurm_fixture_holds_only_names_the_pinned_exporter_declares():
    """The fixture once had slurm_account_{cpu,mem}_alloc, which v1.7.0 does not emit (it has *_job_state_*)."""
    text = (FIXTURES / "slurm-exporter.prom").read_text()
    names = set(re.findall(r"^(slurm_\w+)[{ ]", text, re.M))
    assert names and names <= SLURM_EXPORTER_NAMES, names - SLURM_EXPORTER_NAMES
