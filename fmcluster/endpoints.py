"""The VPC endpoints a cluster's nodes call without an internet path (`network.egress: none`), by name only (no CDK).

`TrainingNetwork` creates them in fmcluster's own VPC; `validate --live` looks for them in a VPC of your own.

>>> endpoint_services("us-east-1", pcs=False)[:2]
['com.amazonaws.us-east-1.s3', 'com.amazonaws.us-east-1.ecr.api']
"""

from __future__ import annotations

INTERFACE_ENDPOINTS: dict[str, str] = {
    "EcrApi": "ECR",
    "EcrDocker": "ECR_DOCKER",
    "Ssm": "SSM",
    "SsmMessages": "SSM_MESSAGES",
    "Ec2Messages": "EC2_MESSAGES",
    "Logs": "CLOUDWATCH_LOGS",
    "Monitoring": "CLOUDWATCH_MONITORING",
    "Sts": "STS",
    "SageMakerApi": "SAGEMAKER_API",
    "PrometheusWorkspaces": "PROMETHEUS_WORKSPACES",
}
"""Construct id -> `ec2.InterfaceVpcEndpointAwsService` attribute: what nodes reach without an internet path
(egress: none): image pulls, SSM sessions, logs and metrics, role credentials, the SageMaker API that
HyperPod's agents call, and Prometheus remote write. Names, not services, so importing makes no jsii call."""
INTERFACE_ENDPOINT_SERVICES: dict[str, str] = {
    "EcrApi": "ecr.api",
    "EcrDocker": "ecr.dkr",
    "Ssm": "ssm",
    "SsmMessages": "ssmmessages",
    "Ec2Messages": "ec2messages",
    "Logs": "logs",
    "Monitoring": "monitoring",
    "Sts": "sts",
    "SageMakerApi": "sagemaker.api",
    "PrometheusWorkspaces": "aps-workspaces",
}
"""The same endpoints by the last part of their service name, `com.amazonaws.<region>.<name>` (CDK's
`InterfaceVpcEndpointAwsService.<attribute>.short_name`; tests/unit/test_network.py checks they agree)."""
PCS_ENDPOINT_SERVICE = "pcs"
"""`com.amazonaws.<region>.pcs`: without an internet path PCS nodes call RegisterComputeNodeGroupInstance through
it, or they never join the cluster (AWS PCS user guide, "Access AWS PCS using an interface endpoint")."""
GATEWAY_ENDPOINTS = ("s3",)
"""Gateway endpoints (route-table entries, not interfaces): S3, always there in fmcluster's own VPC."""


def endpoint_services(region: str, *, pcs: bool) -> list[str]:
    """Every endpoint service name the nodes of a cluster need in `region` without an internet path."""
    names = [*GATEWAY_ENDPOINTS, *INTERFACE_ENDPOINT_SERVICES.values(), *([PCS_ENDPOINT_SERVICE] if pcs else [])]
    return [f"com.amazonaws.{region}.{name}" for name in names]
