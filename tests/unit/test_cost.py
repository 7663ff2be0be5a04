"""The cost estimate of `fmcluster plan` (fmcluster/cost.py) and its price table (fmcluster/prices.yaml).

Prices here are a test table of round figures, so the arithmetic is checked by hand; the shipped table's figures
are checked for shape and honesty (a source each; unconfirmed unless the Price List API wrote them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fmcluster import cli, cost, sizing
from fmcluster.config import load, parse
from tests.unit.test_cli import no_synth, run, table_row  # noqa: F401 (no_synth is a fixture)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TABLE = """\
date: "2026-01-02"
source: a test table
prices:
  us-east-1:
    ec2:p5.48xlarge: {usd: 50.0, unit: hour, source: test, confirmed: true}
    ec2:m5.xlarge: {usd: 0.2, unit: hour, source: test, confirmed: true}
    sagemaker:ml.p5.48xlarge: {usd: 60.0, unit: hour, source: test, confirmed: true}
    sagemaker:ml.m5.4xlarge: {usd: 1.0, unit: hour, source: test, confirmed: false}
    fsx:lustre-persistent2-ssd-250: {usd: 0.73, unit: GB-month, source: test, confirmed: true}
    vpc:nat-gateway: {usd: 0.05, unit: hour, source: test, confirmed: true}
    vpc:interface-endpoint: {usd: 0.01, unit: hour, source: test, confirmed: true}
    ebs:gp3: {usd: 0.073, unit: GB-month, source: test, confirmed: true}
    codebuild:x-large: {usd: 0.5, unit: minute, source: test, confirmed: true}
    ec2:c6i.4xlarge: {usd: 0.7, unit: hour, source: test, confirmed: true}
    pcs:cluster-small: {usd: 0.4, unit: hour, source: test, confirmed: true}
    pcs:accounting-small: {usd: 0.1, unit: hour, source: test, confirmed: true}
"""
BASE = {
    "name": "costs",
    "region": "us-east-1",
    "availability_zone_id": "use1-az6",
    "compute": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
    "storage": {"lustre": {"capacity_gib": 1200}},
}


def lines_of(**changes: object) -> dict[str, cost.Line]:
    config = parse({**BASE, **changes}, source="cluster.yaml")
    return {line.part: line for line in cost.estimate(config, cost.PriceTable.load(TABLE))}


def test_hyperpod_on_demand_nodes_controller_file_system_and_nat():
    lines = lines_of()
    assert lines["compute gpu (2 x ml.p5.48xlarge, on-demand)"].hourly == 120.0
    assert lines["controller (ml.m5.4xlarge)"].hourly == 1.0
    volume = lines["controller volume (500 GiB EBS)"]  # constructs/hyperpod/cluster.py's controller EbsVolumeConfig
    assert (volume.key, volume.hourly) == (None, None) and volume.note.startswith("not estimated")
    assert lines["FSx for Lustre (1,200 GiB, 250 MB/s/TiB)"].hourly == pytest.approx(1200 * 0.73 / 730)
    assert lines["NAT gateway"].hourly == 0.05
    build = lines["training image build (~38 min on X_LARGE)"]
    assert (build.hourly, build.one_off) == (None, 19.0)  # a one-off, never in the hourly total
    assert lines["Amazon Managed Prometheus"].note.startswith("usage-based")
    summed = cost.total(list(lines.values()))
    assert summed.hourly == pytest.approx(120 + 1 + 1.2 + 0.05)
    assert summed.monthly == pytest.approx(summed.hourly * 730)
    assert (summed.missing, summed.unconfirmed) == ([], True)  # the controller's figure is unconfirmed


def test_capacity_blocks_and_training_plans_are_prepaid_and_odcrs_bill_on_demand():
    pcs = {"orchestrator": {"type": "pcs"}}
    reserved = {"name": "gpu", "instance_type": "p5.48xlarge", "count": 4, "reservation_id": "cr-0123456789abcdef0"}
    block = lines_of(**pcs, compute=[{**reserved, "capacity": "capacity-block"}])
    line = block["compute gpu (4 x p5.48xlarge, capacity-block)"]
    assert (line.prepaid, line.hourly) == (True, None) and line.note.startswith("prepaid")
    odcr = lines_of(**pcs, compute=[{**reserved, "capacity": "odcr"}])
    line = odcr["compute gpu (4 x p5.48xlarge, odcr)"]
    assert line.hourly == 200.0 and line.note == cost.ODCR_NOTE
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p"
    plan = lines_of(compute=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 4, "capacity": "training-plan",
                              "training_plan_arn": arn}])  # fmt: skip
    assert plan["compute gpu (4 x ml.p5.48xlarge, training-plan)"].prepaid


def test_pcs_prices_ec2_types_the_head_node_root_volumes_and_names_the_cluster_fee_it_has_no_price_for():
    lines = lines_of(orchestrator={"type": "pcs"})
    assert lines["compute gpu (2 x p5.48xlarge, on-demand)"].hourly == 100.0
    assert lines["head node (m5.xlarge)"].hourly == 0.2
    # 2 x 512 GiB compute nodes and the head node's 200 GiB (constructs/pcs/cluster.py's login launch template)
    assert lines["root volumes (gp3, 1,224 GiB)"].hourly == pytest.approx(1224 * 0.073 / 730)
    assert lines["AWS PCS cluster (small)"].hourly == 0.4
    accounting = lines["AWS PCS managed accounting (small)"]  # orchestrator.accounting defaults to true
    assert (accounting.key, accounting.hourly, accounting.note) == (
        "pcs:accounting-small",
        0.1,
        cost.PCS_ACCOUNTING_NOTE,
    )
    assert cost.total(list(lines.values())).missing == []
    without = lines_of(orchestrator={"type": "pcs", "accounting": False})
    assert not any(part.startswith("AWS PCS managed accounting") for part in without)
    shipped = {key for entries in cost.PriceTable.load().prices.values() for key in entries}
    assert not {key for key in shipped if key.startswith("pcs:")}  # no source found for a PCS figure: none is shipped


SCALING = {"orchestrator": {"type": "pcs"},
           "compute": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2},
                       {"name": "cpu", "instance_type": "c6i.4xlarge", "count": 8, "min_count": 2}]}  # fmt: skip


def test_a_group_that_scales_is_priced_at_most_at_count_and_at_least_at_min_count():
    lines = lines_of(**SCALING)
    cpu = lines["compute cpu (2-8 x c6i.4xlarge, on-demand)"]
    assert (cpu.hourly, cpu.hourly_least, cpu.note) == (pytest.approx(5.6), pytest.approx(1.4), cost.SCALING_NOTE)
    gpu = lines["compute gpu (2 x p5.48xlarge, on-demand)"]
    assert (gpu.scales, gpu.hourly, gpu.hourly_least) == (False, 100.0, 100.0)
    volumes = lines["root volumes (gp3, 5,320 GiB)"]  # 200 + 2 x 512 + 8 x 512; at least 200 + 2 x 512 + 2 x 512
    assert volumes.hourly_least == pytest.approx(2248 * 0.073 / 730)
    summed = cost.total(list(lines.values()))
    fixed = 100 + 0.2 + 0.4 + 0.1 + 1.2 + 0.05  # gpu, head node, PCS cluster and accounting, FSx, NAT
    assert summed.hourly == pytest.approx(fixed + 5.6 + 5320 * 0.073 / 730)
    assert summed.least == pytest.approx(fixed + 1.4 + 2248 * 0.073 / 730)


@pytest.mark.usefixtures("no_synth")
def test_plan_shows_a_group_that_scales_as_at_most_and_at_least_and_the_sum_as_a_range(capsys, tmp_path, monkeypatch):
    import yaml

    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({**BASE, **SCALING}))
    table = _table()
    monkeypatch.setattr(cost.PriceTable, "load", classmethod(lambda cls, text=None: table))
    code, out, err = run(capsys, "plan", str(path))
    assert (code, err) == (0, "")
    row = table_row(out, "compute cpu (2-8 x c6i.4xlarge,")
    assert (row["per hour"], row["per month"]) == ("at most $5.60, at least $1.40", "at most $4,088, at least $1,022")
    summed = cost.total(cost.estimate(parse({**BASE, **SCALING}, source="f"), table))
    least, most = summed.least, summed.hourly
    assert (
        f"estimate: ${least:,.2f} to ${most:,.2f} per hour, ${least * 730:,.0f} to ${most * 730:,.0f} per month "
        "(730 h; groups that scale between min_count and count) from the price table of 2026-01-02 (a test table)"
    ) in out
    assert "cost estimate (us-east-1, USD, list prices;" in out  # every figure sits under an estimate's label


def _table() -> cost.PriceTable:
    return cost.PriceTable.load(TABLE)


def test_no_egress_prices_the_interface_endpoints_per_zone():
    lines = lines_of(network={"egress": "none"}, secondary_availability_zone_id="use1-az4")
    assert "NAT gateway" not in lines
    assert lines["interface endpoints (10 x 2 AZ)"].hourly == pytest.approx(0.2)


def test_the_endpoints_priced_are_the_ones_created():
    """PCS without Managed Prometheus: every cluster's 8 and PCS's (fmcluster.endpoints.endpoint_keys)."""
    lines = lines_of(
        network={"egress": "none"},
        orchestrator={"type": "pcs"},
        observability={"prometheus": "none", "grafana": "none"},
    )
    assert lines["interface endpoints (9 x 1 AZ)"].hourly == pytest.approx(0.09)


def test_a_vpc_of_ones_own_adds_no_nat_gateway_or_endpoints():
    lines = lines_of(network={"vpc_id": "vpc-0123456789abcdef0", "subnet_id": "subnet-0123456789abcdef0"})
    assert not any(part.startswith(("NAT", "interface endpoints")) for part in lines)


def test_an_existing_file_system_adds_no_fsx_line_and_no_checkpoint_estimate():
    fs = {"file_system_id": "fs-0123456789abcdef0", "dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
          "mount_name": "abcdef12", "security_group_id": "sg-0123456789abcdef0"}  # fmt: skip
    own = {"network": {"vpc_id": "vpc-0123456789abcdef0", "subnet_id": "subnet-0123456789abcdef0"}}
    lines = lines_of(**own, storage={"lustre": fs}, training={"model_parameters": "70B"})
    assert not any(part.startswith("FSx") for part in lines)
    config = parse({**BASE, **own, "storage": {"lustre": fs}, "training": {"model_parameters": "70B"}}, source="f")
    assert sizing.checkpoint_estimate(config) is None  # its throughput is not in the file: no warning from a guess


@pytest.mark.usefixtures("no_synth")
def test_plan_of_an_existing_file_system_names_it(capsys):
    code, out, err = run(capsys, "plan", str(EXAMPLES / "hyperpod-own-file-system.yaml"))
    assert (code, err) == (0, "")
    assert "storage: the existing FSx for Lustre file system fs-0a1b2c3d4e5f60718 (" in out
    assert "FSx for Lustre (" not in out  # no cost line, no size table


def test_a_type_without_a_price_is_named_not_guessed():
    lines = lines_of(compute=[{"name": "gpu", "instance_type": "p5en.48xlarge", "count": 2}])
    line = lines["compute gpu (2 x ml.p5en.48xlarge, on-demand)"]
    assert (line.price, line.hourly) == (None, None)
    assert cost.total(list(lines.values())).missing == ["compute gpu (2 x ml.p5en.48xlarge, on-demand)"]


def test_the_shipped_table_has_a_date_and_a_source_per_figure_and_says_what_is_unconfirmed():
    table = cost.PriceTable.load()
    assert table.date and table.source
    for region, entries in table.prices.items():
        for key, price in entries.items():
            assert price.usd > 0 and price.unit in ("hour", "GB-month", "user-month", "minute"), (region, key)
            assert price.source, (region, key)
            # only the Price List API confirms a figure (tools/prices.py writes it so)
            assert price.confirmed == price.source.startswith("AWS Price List API"), (region, key)


@pytest.mark.usefixtures("no_synth")
def test_plan_quickstart_prints_a_cost_per_hour_and_month_with_the_tables_date(capsys):
    code, out, err = run(capsys, "plan", str(EXAMPLES / "quickstart.yaml"))
    table = cost.PriceTable.load()
    assert (code, err) == (0, "")
    assert f"price table of {table.date}" in out
    # the GPU line has no price in the shipped table, so the sum is only a floor and says so
    assert "estimate: at least $" in out and " per hour, at least $" in out and " per month (730 h)" in out
    row = table_row(out, "controller (ml.m5.4xlarge)")
    assert row["per hour"] == "$0.922 (unconfirmed)" and row["per month"] == "$673 (unconfirmed)"
    assert "$7.60 per build (unconfirmed)" in out
    assert "no price for sagemaker:ml.p5.48xlarge" in out  # the shipped table has no HyperPod p5 figure
    assert "not in the estimate (no price; run tools/prices.py or plan --live): compute gpu" in out


def test_plan_live_without_credentials_says_so(capsys, monkeypatch):
    from fmcluster import live

    class NoAws:
        def __init__(self, region: str):
            raise live.NoCredentials("no AWS credentials found")

    monkeypatch.setattr(live, "Aws", NoAws)
    code = cli.print_cost("cluster.yaml", load(EXAMPLES / "quickstart.yaml"), _console(), live=True)
    assert code is None
    assert capsys.readouterr().err == "cluster.yaml: plan --live: no AWS credentials found\n"


def _console():
    from rich.console import Console

    return Console(width=140)
