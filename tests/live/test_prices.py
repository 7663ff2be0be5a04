"""Prices from the AWS Price List API (`fmcluster.live.prices`, `plan --live`, `tools/prices.py`), stubbed.

GetProducts' output shape (FormatVersion, PriceList of JSON strings, NextToken) is checked against botocore's
`pricing` model by the `stubs` fixture. The documents inside PriceList follow the price list's product format
(Price List API user guide: `product.attributes`, `terms.OnDemand.<offer>.priceDimensions.<dimension>` with `unit`,
`beginRange` and `pricePerUnit.USD`); the figures in them are test values, not prices.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from fmcluster.cost import Price, PriceTable
from fmcluster.live.prices import PriceList

REPO = Path(__file__).resolve().parents[2]
EC2_FILTERS = {
    "regionCode": "us-east-1",
    "instanceType": "p5.48xlarge",
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "licenseModel": "No License required",
}


def product(usd: str, unit: str = "Hrs", usagetype: str = "BoxUsage:p5.48xlarge") -> str:
    return json.dumps(
        {
            "product": {"sku": "SKU1", "attributes": {"usagetype": usagetype}},
            "terms": {
                "OnDemand": {
                    "SKU1.TERM": {
                        "priceDimensions": {
                            "SKU1.TERM.DIM": {"unit": unit, "beginRange": "0", "pricePerUnit": {"USD": usd}}
                        }
                    }
                }
            },
        }
    )


def params(service: str, attributes: dict[str, str]) -> dict:
    filters = [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in attributes.items()]
    return {"ServiceCode": service, "Filters": filters}


def answers(stubs, *lists: list[str], service="AmazonEC2", attributes=EC2_FILTERS):
    stub = stubs("us-east-1")
    for price_list in lists:
        stub.ok("pricing", "GetProducts", {"FormatVersion": "aws_v1", "PriceList": price_list},
                params(service, attributes))  # fmt: skip
    return PriceList(stub.aws())


def test_one_product_gives_a_confirmed_price_from_the_api(stubs):
    price = answers(stubs, [product("12.3400000000")]).price_of("us-east-1", "ec2:p5.48xlarge")
    assert (price.usd, price.unit, price.confirmed) == (12.34, "hour", True)
    assert price.source.startswith("AWS Price List API (pricing GetProducts, ")


def test_products_of_different_prices_give_none_never_a_guess(stubs):
    prices = answers(stubs, [product("1.0"), product("2.0")])
    assert prices.price_of("us-east-1", "ec2:p5.48xlarge") is None


def test_no_product_falls_back_to_the_table(stubs):
    table = PriceTable.load()
    lookup = answers(stubs, []).lookup_or(table.get)
    assert lookup("us-east-1", "ec2:p5.48xlarge") == table.get("us-east-1", "ec2:p5.48xlarge")


def test_a_refused_call_falls_back_to_the_table(stubs):
    stub = stubs("us-east-1")
    stub.denied("pricing", "GetProducts", params("AmazonEC2", EC2_FILTERS))
    fallback = Price(1.0, "hour", "table", False)
    assert PriceList(stub.aws()).lookup_or(lambda *_: fallback)("us-east-1", "ec2:p5.48xlarge") == fallback


def test_the_nat_gateway_query_selects_the_hourly_usage_type(stubs):
    attributes = {"regionCode": "us-east-1", "productFamily": "NAT Gateway"}
    prices = answers(
        stubs,
        [product("0.05", usagetype="NatGateway-Hours"), product("0.05", "GB", usagetype="NatGateway-Bytes")],
        attributes=attributes,
    )
    assert prices.price_of("us-east-1", "vpc:nat-gateway").usd == 0.05


def test_keys_the_api_cannot_be_asked_for_make_no_call(stubs):
    prices = PriceList(stubs("us-east-1").aws())
    assert prices.price_of("us-east-1", "pcs:cluster-small") is None
    assert prices.price_of("us-east-1", "codebuild:x-large") is None


def _tool():
    spec = importlib.util.spec_from_file_location("prices_tool", REPO / "tools" / "prices.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tool_rewrites_what_the_api_answers_and_keeps_the_rest(stubs, tmp_path):
    table = tmp_path / "prices.yaml"
    table.write_text(
        'date: "2026-01-02"\nsource: seed\nprices:\n  us-east-1:\n'
        "    ec2:p5.48xlarge: {usd: 1.0, unit: hour, source: seed, confirmed: false}\n"
        "    codebuild:x-large: {usd: 0.2, unit: minute, source: seed, confirmed: false}\n"
    )
    stub = stubs("us-east-1")
    stub.ok("pricing", "GetProducts", {"FormatVersion": "aws_v1", "PriceList": [product("12.34")]},
            params("AmazonEC2", EC2_FILTERS))  # fmt: skip
    assert _tool().main(["--table", str(table)], aws=stub.aws()) == 0
    updated = PriceTable.load(table.read_text())
    assert updated.date != "2026-01-02"
    p5 = updated.get("us-east-1", "ec2:p5.48xlarge")
    assert (p5.usd, p5.confirmed) == (12.34, True) and p5.source.startswith("AWS Price List API")
    assert updated.get("us-east-1", "codebuild:x-large") == Price(0.2, "minute", "seed", False)
