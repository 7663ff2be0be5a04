"""The service data fmcluster ships (fmcluster/config/service_data.json.gz) is exactly what tools/service_data.py cuts
from its sources today: cfn-lint's package data and, for HyperPod types, CDK's own synth-time engine (asked through
node). After a cfn-lint, aws-cdk-lib or botocore upgrade this fails until `python tools/service_data.py` is rerun."""

from __future__ import annotations

import gzip
import importlib.util

import pytest

from fmcluster.config.service_models import service_data
from tests.conftest import REPO


def load_tool():
    spec = importlib.util.spec_from_file_location("service_data_tool", REPO / "tools" / "service_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.real_tools  # CDK's template validator, through node
def test_the_shipped_data_equals_what_the_sources_say_now():
    tool = load_tool()
    fresh = tool.generate()
    assert service_data() == fresh
    assert gzip.decompress(tool.OUTPUT.read_bytes()) == gzip.decompress(tool.encode(fresh))


def test_every_resource_type_of_every_example_has_regional_data_and_a_schema(synthesized):
    tool = load_tool()
    used = {
        resource["Type"]
        for example in synthesized.values()
        for template in example.templates.values()
        for resource in template["Resources"].values()
        if resource["Type"].startswith("AWS::")
    }
    assert sorted(used - set(tool.RESOURCE_TYPES)) == []
    assert all(name in service_data()["create_only_properties"] for name in used)
