"""AWS regions and the AZ-ID prefixes that belong to them.

An AZ *ID* (use1-az6) names the same physical zone in every account, unlike an AZ name (us-east-1a),
which each account maps differently; capacity reservations and FSx placement only line up by ID.
"""

from __future__ import annotations

import re

REGIONS = frozenset(
    {
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
        "ca-central-1",
        "ca-west-1",
        "mx-central-1",
        "sa-east-1",
        "eu-central-1",
        "eu-central-2",
        "eu-north-1",
        "eu-south-1",
        "eu-south-2",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "af-south-1",
        "il-central-1",
        "me-central-1",
        "me-south-1",
        "ap-east-1",
        "ap-east-2",
        "ap-south-1",
        "ap-south-2",
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-northeast-3",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-southeast-3",
        "ap-southeast-4",
        "ap-southeast-5",
        "ap-southeast-6",
        "ap-southeast-7",
        "us-gov-east-1",
        "us-gov-west-1",
        "cn-north-1",
        "cn-northwest-1",
    }
)
"""Regions as of 2026-11; a region launched later needs a line here before fmcluster accepts it."""

_DIRECTIONS = {
    "east": "e",
    "west": "w",
    "north": "n",
    "south": "s",
    "central": "c",
    "northeast": "ne",
    "northwest": "nw",
    "southeast": "se",
    "southwest": "sw",
}

AZ_ID_PATTERN = re.compile(r"^[a-z]+[0-9]+-az[0-9]+$")
AZ_NAME_PATTERN = re.compile(r"^([a-z]{2}(?:-gov)?-[a-z]+-[0-9])[a-z]$")


def az_id_prefix(region: str) -> str:
    """The prefix of the AZ IDs of `region`: us-east-1 -> use1, ap-southeast-2 -> apse2, us-gov-west-1 -> usgw1."""
    parts = region.split("-")
    country, number = parts[0], parts[-1]
    middle = parts[1:-1]
    gov = "g" if middle[:1] == ["gov"] else ""
    direction = _DIRECTIONS.get(middle[-1], middle[-1][:1])
    return f"{country}{gov}{direction}{number}"


def region_of_az_id(az_id: str) -> str | None:
    """The region an AZ ID belongs to, or None when no known region has its prefix."""
    prefix = az_id.split("-az", 1)[0]
    for region in REGIONS:
        if az_id_prefix(region) == prefix:
            return region
    return None
