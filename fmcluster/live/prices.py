"""Prices from the AWS Price List API (pricing GetProducts), for `fmcluster plan --live` and `tools/prices.py`.

Each key of the price table (`fmcluster.cost`) maps to one product query: a service code and attribute filters. A
query that matches no product, or products of different prices, gives None (the caller keeps the table's figure):
a price is never guessed. Sources: Price List API reference (GetProducts: ServiceCode, Filters of TERM_MATCH on
product attributes, PriceList of JSON documents); the price list's documented product format (`product.attributes`,
`terms.OnDemand.<offer>.priceDimensions.<dimension>.pricePerUnit.USD`, `unit`, `beginRange`). The attribute names
and values of the EC2 instance query are those AWS's Price List user guide shows for EC2; the others (NAT gateway,
VPC endpoint, gp3, FSx for Lustre, SageMaker HyperPod) are (unconfirmed) and fall back to the table when they match
nothing.

>>> PriceList.query("us-east-1", "vpc:nat-gateway")[0]
'AmazonEC2'
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fmcluster.cost import Lookup, Price
from fmcluster.live.aws import Aws, Denied, Throttled

UNITS = {"Hrs": "hour", "Hours": "hour", "GB-Mo": "GB-month", "GB-month": "GB-month"}
"""The price list's units -> the table's."""
Query = tuple[str, dict[str, str], Callable[[dict[str, Any]], bool]]


def _always(_: dict[str, Any]) -> bool:
    return True


def _usage_type_ends(suffix: str) -> Callable[[dict[str, Any]], bool]:
    return lambda attributes: str(attributes.get("usagetype", "")).endswith(suffix)


def _usage_type_has(part: str) -> Callable[[dict[str, Any]], bool]:
    return lambda attributes: part in str(attributes.get("usagetype", ""))


class PriceList:
    """Prices read from the Price List API through `aws` (a client of `REGION`, where the API is served)."""

    REGION = "us-east-1"
    """The Price List API's endpoints are us-east-1, eu-central-1 and ap-south-1; each serves every region's prices."""

    def __init__(self, aws: Aws):
        self._aws = aws
        self.source = f"AWS Price List API (pricing GetProducts, {datetime.now(UTC):%Y-%m-%d})"

    @staticmethod
    def query(region: str, key: str) -> Query | None:
        """(service code, attribute filters, product selector) for a price table key, or None for a key it cannot
        ask for (the PCS cluster fee, CodeBuild, Managed Grafana)."""
        match = re.fullmatch(r"([^:]*):(.*)", key)  # a price key: "ec2:p5.48xlarge"
        kind, name = match.groups() if match else (key, "")
        where = {"regionCode": region}
        if kind == "ec2":
            filters = {"instanceType": name, "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
                       "capacitystatus": "Used", "licenseModel": "No License required"}  # fmt: skip
            return "AmazonEC2", {**where, **filters}, _always
        if kind == "sagemaker":
            return "AmazonSageMaker", {**where, "instanceName": name}, _usage_type_has("Cluster")  # (unconfirmed)
        if key == "vpc:nat-gateway":
            return "AmazonEC2", {**where, "productFamily": "NAT Gateway"}, _usage_type_ends("NatGateway-Hours")
        if key == "vpc:interface-endpoint":
            return "AmazonVPC", {**where, "productFamily": "VpcEndpoint"}, _usage_type_ends("VpcEndpoint-Hours")
        if key == "ebs:gp3":
            return "AmazonEC2", {**where, "productFamily": "Storage", "volumeApiName": "gp3"}, _always
        if kind == "fsx" and name.startswith("lustre-persistent2-ssd-"):
            tier = name.rsplit("-", 1)[-1]
            filters = {"fileSystemType": "Lustre", "deploymentOption": "Persistent_2", "storageType": "SSD",
                       "throughputCapacity": tier}  # fmt: skip
            return "AmazonFSx", {**where, **filters}, _always
        return None

    def price_of(self, region: str, key: str) -> Price | None:
        """The On-Demand price of `key` in `region`, or None when the query matches no single price."""
        query = self.query(region, key)
        if query is None:
            return None
        service, attributes, selected = query
        filters = [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in attributes.items()]
        found = set()
        for document in self._aws.pages("pricing", "GetProducts", "PriceList", ServiceCode=service, Filters=filters):
            product = json.loads(document) if isinstance(document, str) else document
            if selected(product.get("product", {}).get("attributes", {})):
                found |= _on_demand_prices(product)
        if len(found) != 1:
            return None
        usd, unit = found.pop()
        return Price(usd=usd, unit=unit, source=self.source, confirmed=True)

    def lookup_or(self, fallback: Lookup) -> Lookup:
        """A lookup asking the API first and `fallback` (the shipped table) where the API has no single answer or
        refuses the call (access denied, throttled)."""

        def lookup(region: str, key: str) -> Price | None:
            try:
                return self.price_of(region, key) or fallback(region, key)
            except (Denied, Throttled):
                return fallback(region, key)

        return lookup


def _on_demand_prices(product: dict[str, Any]) -> set[tuple[float, str]]:
    """(USD, unit) of each first-tier On-Demand dimension of a price list product in a unit the table knows."""
    prices = set()
    for offer in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in offer.get("priceDimensions", {}).values():
            unit = UNITS.get(dimension.get("unit", ""))
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if unit and usd is not None and str(dimension.get("beginRange", "0")) == "0":
                prices.add((float(usd), unit))
    return prices
