"""The VPC endpoints a cluster's nodes call without an internet path (`network.egress: none`), by name only (no CDK).

`TrainingNetwork` creates them in fmcluster's own VPC; `validate --live` looks for them in a VPC of your own.

>>> endpoint_services("us-east-1", endpoint_keys(("Pcs",), managed_prometheus=False))[-2:]
['com.amazonaws.us-east-1.sts', 'com.amazonaws.us-east-1.pcs']
"""

from __future__ import annotations

from fmcluster.config import ClusterConfig, orchestrators

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
    "Pcs": "pcs",
}
"""The same endpoints (and PCS's, which CDK names no attribute for) by the last part of their service name,
`com.amazonaws.<region>.<name>` (CDK's
`InterfaceVpcEndpointAwsService.<attribute>.short_name`; tests/unit/test_network.py checks they agree)."""
COMMON_ENDPOINTS = ("EcrApi", "EcrDocker", "Ssm", "SsmMessages", "Ec2Messages", "Logs", "Monitoring", "Sts")
"""What every cluster's nodes call. The orchestrator adds its own (`ENDPOINTS` in config/orchestrators: HyperPod's
agents call the SageMaker API; PCS nodes call RegisterComputeNodeGroupInstance through `com.amazonaws.<region>.pcs`,
or they never join the cluster: AWS PCS user guide, "Access AWS PCS using an interface endpoint"), and
`observability.prometheus: managed` adds Prometheus remote write (aps-workspaces)."""
PROMETHEUS_ENDPOINT = "PrometheusWorkspaces"
GATEWAY_ENDPOINTS = ("s3",)
"""Gateway endpoints (route-table entries, not interfaces): S3, always there in fmcluster's own VPC."""


def endpoint_keys(orchestrator: tuple[str, ...], *, managed_prometheus: bool) -> list[str]:
    """The interface endpoints (keys of `INTERFACE_ENDPOINT_SERVICES`) a cluster's nodes call: every cluster's, its
    orchestrator's, and Prometheus remote write's with Managed Prometheus."""
    return [*COMMON_ENDPOINTS, *orchestrator, *([PROMETHEUS_ENDPOINT] if managed_prometheus else [])]


def endpoint_services(region: str, keys: list[str]) -> list[str]:
    """Every endpoint service name the nodes need in `region` without an internet path: S3's gateway and `keys`."""
    names = [*GATEWAY_ENDPOINTS, *(INTERFACE_ENDPOINT_SERVICES[key] for key in keys)]
    return [f"com.amazonaws.{region}.{name}" for name in names]


def cluster_endpoint_keys(config: ClusterConfig) -> list[str]:
    """`endpoint_keys` of a cluster file."""
    return endpoint_keys(
        orchestrators.of(config.orchestrator.type).ENDPOINTS,
        managed_prometheus=config.observability.prometheus == "managed",
    )
