"""What AWS's own models accept, for every value fmcluster sends to AWS PCS and SageMaker HyperPod.

Two sources, both maintained by AWS, neither copied by hand, both cut into `service_data.json.gz` by
tools/service_data.py (tests/unit/test_service_data.py keeps the cut equal to them):
- botocore's API models: the length, pattern and enum of each name and type the PCS (2023-02-10) and SageMaker
  (2017-07-24) APIs take (the shapes of `API_SHAPES` there; reading them from the cut spares `fmcluster validate`
  botocore's import and the parse of SageMaker's whole model).
- CloudFormation's regional data, as cfn-lint ships it:
  which resource types each region offers, and which EC2 and HyperPod instance types (the lists behind the rules
  E3628 and E3644 that `cdk synth` runs through `@aws-cdk/core:validateAgainstDefaultRules`), and each type's
  create-only properties. cfn-lint stays a dev dependency.

Patterns in botocore's models are not anchored; AWS services apply them to the whole value (unconfirmed), so a
value must match a pattern from its first character to its last here: the reading that fails safe.

>>> shape_problem("pcs", "QueueName", "gpu_a")
"takes 3-25 characters matching (?!pcs_)^[A-Za-z][A-Za-z0-9-]+ (botocore pcs QueueName); got 'gpu_a'"
"""

from __future__ import annotations

import difflib
import gzip
import json
import re
from functools import cache
from importlib.resources import files
from typing import Literal

from fmcluster.config.regions import REGIONS

SERVICE_LABELS = {
    "AWS::PCS::Cluster": "AWS PCS",
    "AWS::SageMaker::Cluster": "SageMaker HyperPod",
    "AWS::APS::Workspace": "Amazon Managed Service for Prometheus",
    "AWS::Grafana::Workspace": "Amazon Managed Grafana",
    "AWS::FSx::FileSystem": "Amazon FSx",
}
API_LABELS = {"ec2": "EC2", "pcs": "AWS PCS", "sagemaker": "SageMaker HyperPod"}
INSTANCE_RULES = {
    "ec2": ("EC2", "CloudFormation's regional list, as cfn-lint checks launch templates: rule E3628"),
    "hyperpod": ("SageMaker HyperPod", "CloudFormation's regional list, which cdk synth checks as E3644"),
}
"""Who offers a kind of instance type, and which regional list and rule judge it."""


def shape(service: str, name: str) -> dict:
    """The botocore shape `name` of `service` ('ec2', 'pcs', 'sagemaker'): its type, min, max, pattern or enum."""
    shapes = service_data()["api_shapes"][service]
    if name not in shapes:
        raise KeyError(f"botocore {service} {name} is not in the cut: add it to API_SHAPES in tools/service_data.py")
    return shapes[name]


def shape_problem(service: str, name: str, value: str) -> str | None:
    """Why `value` breaks the botocore shape `service`.`name` (enum, length, whole-value pattern), or None."""
    spec = shape(service, name)
    source = f"botocore {service} {name}"
    if "enum" in spec:
        if value in spec["enum"]:
            return None
        close = difflib.get_close_matches(value, spec["enum"], n=3, cutoff=0.8)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        return f"takes one of the {len(spec['enum'])} values of {source}; got {value!r}{hint}"
    low, high = spec.get("min", 0), spec.get("max")
    pattern = spec.get("pattern")
    fits_length = len(value) >= low and (high is None or len(value) <= high)
    if fits_length and (pattern is None or re.fullmatch(pattern, value)):
        return None
    length = f"{low}-{high} characters" if high is not None else f"at least {low} characters"
    matching = f" matching {pattern}" if pattern else ""
    return f"takes {length}{matching} ({source}); got {value!r}"


@cache
def ec2_instance_types() -> frozenset[str]:
    """Every instance type EC2 offers somewhere (botocore ec2 InstanceType, cut into the service data)."""
    return frozenset(shape("ec2", "InstanceType")["enum"])


@cache
def service_data() -> dict:
    """The regional data and create-only properties cut from cfn-lint (see tools/service_data.py)."""
    raw = (files("fmcluster.config") / "service_data.json.gz").read_bytes()
    return json.loads(gzip.decompress(raw))


def regions_offering(resource_type: str) -> list[str]:
    """Regions fmcluster knows whose CloudFormation offers `resource_type` (cfn-lint providers data)."""
    offered = service_data()["resource_types"]
    return sorted(region for region in REGIONS if resource_type in offered.get(region, ()))


def region_offers(region: str, resource_type: str) -> bool:
    return resource_type in service_data()["resource_types"].get(region, ())


def regional_instance_types(kind: Literal["ec2", "hyperpod"], region: str) -> frozenset[str] | None:
    """Instance types `kind` offers in `region`; None where the data has no list for it (then nothing is judged)."""
    types = service_data()[f"{kind}_instance_types"].get(region)
    return None if types is None else frozenset(types)


def create_only_properties(resource_type: str) -> list[str] | None:
    """JSON pointers of the properties whose change replaces a resource; None for a type without shipped schema."""
    return service_data()["create_only_properties"].get(resource_type)


def region_problem(region: str, resource_type: str) -> str | None:
    """Why `region` cannot hold `resource_type`, naming the regions that can; None if it can."""
    if region_offers(region, resource_type):
        return None
    label = SERVICE_LABELS.get(resource_type, resource_type)
    regions = regions_offering(resource_type)
    where = ", ".join(regions) if regions else "no region"
    return (
        f"{label} ({resource_type}) is not offered in {region} (CloudFormation's regional resource list); "
        f"regions that offer it: {where}"
    )


def instance_type_problem(kind: Literal["ec2", "hyperpod"], region: str, instance_type: str) -> str | None:
    """Why `kind` cannot run `instance_type` in `region` (the regional list `cdk synth` checks), or None."""
    offered = regional_instance_types(kind, region)
    if offered is None or instance_type in offered:
        return None
    label, source = INSTANCE_RULES[kind]
    lists = service_data()[f"{kind}_instance_types"]
    elsewhere = sorted(other for other in REGIONS if instance_type in lists.get(other, ()))
    if kind == "ec2" and not any(instance_type in types for types in lists.values()):
        # cfn-lint's EC2 list comes from the pricing API, which misses types sold only as capacity blocks (it lists
        # p6e-gb200.36xlarge and p5e.48xlarge nowhere). `cdk synth` does not judge launch-template types, so a type
        # the list does not know at all is left to EC2 (unconfirmed) rather than refused everywhere.
        return None
    where = f"regions that offer it: {', '.join(elsewhere)}" if elsewhere else "no region lists it"
    return f"{label} does not offer {instance_type} in {region} ({source}); {where}"
