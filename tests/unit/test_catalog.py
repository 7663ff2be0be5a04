"""The instance catalog and the EFA network-interface layout, checked for every type (hypothesis)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fmcluster.catalog import CATALOG, lookup, network_interfaces

instance_types = st.sampled_from(sorted(CATALOG.values(), key=lambda row: row.name))


@given(instance_types)
def test_every_efa_interface_of_the_instance_is_wired(row):
    layout = network_interfaces(row)
    assert sum(i.interface_type == "efa-only" for i in layout) == row.max_efa_interfaces


@given(instance_types, st.booleans())
def test_card_zero_device_zero_is_the_single_ena_interface(row, efa):
    layout = network_interfaces(row, efa=efa)
    assert layout[0].network_card_index == 0 and layout[0].device_index == 0
    assert [i.interface_type for i in layout].count("interface") == 1
    assert layout[0].interface_type == "interface"


@given(instance_types)
def test_slots_are_unique_and_exist_on_the_instance(row):
    layout = network_interfaces(row)
    slots = [(i.network_card_index, i.device_index) for i in layout]
    assert len(set(slots)) == len(slots)
    assert all(0 <= card < row.network_cards for card, _ in slots)
    assert all(device in (0, 1) for _, device in slots)


@given(instance_types)
def test_efa_sits_at_device_one_of_card_zero_only_where_card_zero_has_efa(row):
    card_zero = [i for i in network_interfaces(row) if i.network_card_index == 0]
    expected = 2 if 0 in row.efa_cards else 1
    assert len(card_zero) == expected
    for interface in network_interfaces(row):
        if interface.network_card_index > 0:
            assert interface.device_index == 0


@given(instance_types)
def test_without_efa_only_the_ena_interface_remains(row):
    assert [(i.network_card_index, i.device_index, i.interface_type) for i in network_interfaces(row, efa=False)] == [
        (0, 0, "interface")
    ]


@pytest.mark.parametrize(
    ("name", "efa_interfaces", "card_zero_efa"),
    [
        ("p4d.24xlarge", 4, True),
        ("p5.48xlarge", 32, True),
        ("p5en.48xlarge", 16, True),
        ("p6-b200.48xlarge", 8, True),
        ("p6-b300.48xlarge", 16, False),
        ("p6e-gb200.36xlarge", 8, False),
        ("trn2.48xlarge", 16, True),
        ("g5.12xlarge", 1, True),  # one card with EFA from g5.8xlarge up (FACTS.md instance table; eksctl's data)
        ("g5.4xlarge", 0, False),
    ],
)
def test_published_efa_counts(name, efa_interfaces, card_zero_efa):
    row = lookup(name)
    assert row.max_efa_interfaces == efa_interfaces
    assert (0 in row.efa_cards) is card_zero_efa


def test_p6e_gb200_uses_the_odd_cards():
    assert lookup("p6e-gb200.36xlarge").efa_cards == (1, 3, 5, 7, 9, 11, 13, 15)


def test_every_row_names_its_source_and_fits_its_cards():
    for row in CATALOG.values():
        assert row.source
        assert len(row.efa_cards) <= row.network_cards


@pytest.mark.parametrize(
    ("name", "architecture"),
    # A1 is Graviton without the 'g' (EC2 instance types guide, general purpose instances: A1, AWS Graviton);
    # a1.metal is arm64 too; an 'a' after the generation is AMD (m6a), x86_64
    [("c6i.4xlarge", "x86_64"), ("m7g.2xlarge", "arm64"), ("a1.4xlarge", "arm64"), ("a1.metal", "arm64"),
     ("im4gn.large", "arm64"), ("m6a.large", "x86_64")],
)  # fmt: skip
def test_a_type_outside_the_catalog_is_general_purpose(name, architecture):
    """No accelerators, no EFA, one network interface; bandwidth and NVMe unknown (0), never guessed."""
    row = lookup(name)
    assert (row.cataloged, row.is_accelerated, row.supports_efa, row.architecture) == (
        False,
        False,
        False,
        architecture,
    )
    assert (row.network_gbps, row.nvme_total_gb, row.lustre_efa_client) == (0, 0, False)
    assert [(i.network_card_index, i.device_index, i.interface_type) for i in network_interfaces(row)] == [
        (0, 0, "interface")
    ]


EKSCTL = json.loads((Path(__file__).parent / "fixtures" / "eksctl_instance_types.json").read_text())["instance_types"]
"""eksctl's instance table, generated from EC2 DescribeInstanceTypes (provenance in fixtures/README.md)."""


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_catalog_rows_agree_with_describe_instance_types(name):
    row = CATALOG[name]
    if name not in EKSCTL:
        pytest.skip(f"{name}: not in the generated table yet; its row stays (unconfirmed) where marked")
    ec2 = EKSCTL[name]
    assert row.supports_efa is ec2["EFASupported"]
    assert (row.nvme_disks > 0) is ec2["InstanceStorageSupported"]
    assert row.architecture == ec2["CPUArch"].replace("x86-64", "x86_64")
    accelerator = ec2["NvidiaGPUType"] or ec2["NeuronDeviceType"]
    assert accelerator in row.accelerator
