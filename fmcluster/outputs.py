"""What each stack tells its user after a deploy: the CloudFormation outputs, by stack, with the text people read.

One home for both ends: the stacks write these outputs (`fmcluster.stacks.outputs.add_output`, which refuses a key
not listed here) and `fmcluster info` reads them back from DescribeStacks and prints them in this order, under these
descriptions. Nothing here imports aws_cdk, so `info` starts quickly and works where only boto3 is installed.

>>> [output.key for output in OUTPUTS["storage"]][:2]
['DataBucket', 'CheckpointsBucket']
>>> describe("cluster", "ClusterName")
'Slurm cluster name (AWS PCS or SageMaker HyperPod)'
"""

from __future__ import annotations

from dataclasses import dataclass

GRAFANA_PORT = 3000
"""Where observability.sh runs the self-hosted Grafana on the head node (127.0.0.1 only)."""


@dataclass(frozen=True)
class Output:
    key: str
    """The output's key (its logical id in the template; a key users and scripts may rely on)."""
    description: str
    """What it is, for people: the CfnOutput's Description, and the label `fmcluster info` prints."""


OUTPUTS: dict[str, tuple[Output, ...]] = {
    "network": (
        Output("VpcId", "VPC of the cluster"),
        Output("ComputeSubnetId", "subnet of every node and the file system, in availability_zone_id"),
    ),
    "mirror": (
        Output("MirrorUri", "artifact mirror every node installs from (enroot, pyxis, exporters): s3://BUCKET/PREFIX"),
    ),
    "storage": (
        Output("DataBucket", "S3 bucket for datasets: S3 links without an s3_uri read and write its <path>/ prefix"),
        Output("CheckpointsBucket", "S3 bucket for checkpoints (versioned) and nccl-tests results (nccl-tests/)"),
        Output("FileSystemId", "FSx for Lustre file system id, mounted at /fsx on every node"),
        Output("FileSystemDnsName", "FSx for Lustre DNS name (mount -t lustre DNS@tcp:/MOUNT /fsx)"),
        Output("FileSystemMountName", "FSx for Lustre mount name"),
    ),
    "data-links": (Output("DataLinks", "S3 links of the file system: Lustre path -> S3 location (import/export)"),),
    "image": (
        Output("ImageRepositoryUri", "ECR repository of the training image"),
        Output("ImageUri", "training image as built, pinned by digest (also in SSM, ImageParameter)"),
        Output("ImageParameter", "SSM parameter holding the training image URI, which the nodes read"),
    ),
    "node-image": (
        Output("NodeImages", "baked node images (AMIs) by CPU architecture, built by EC2 Image Builder: ARCH=AMI, ..."),
    ),
    "cluster": (
        Output("Orchestrator", "orchestrator: pcs or hyperpod-slurm"),
        Output("ClusterName", "Slurm cluster name (AWS PCS or SageMaker HyperPod)"),
        Output("ClusterId", "Slurm cluster id (AWS PCS cluster id, or the last part of the HyperPod cluster ARN)"),
        Output("ClusterArn", "Slurm cluster ARN"),
        Output("HeadNodeGroup", "node group of the head node: where `fmcluster connect` opens a session"),
        Output(
            "HeadNodeGroupId",
            "AWS PCS node group id of the head node; its instance carries the tag aws:pcs:compute-node-group-id "
            "with this value (`fmcluster info` looks it up)",
        ),
    ),
    "observability": (
        Output("GrafanaUrl", "Grafana: the Amazon Managed Grafana URL, or the self-hosted one through a port forward"),
        Output("PrometheusWorkspaceId", "Amazon Managed Service for Prometheus workspace id"),
        Output("AlarmTopicArn", "SNS topic every alarm and node-health event goes to"),
    ),
}
"""Stack part (the stack name after `<cluster>-`) -> its outputs, in the order `fmcluster info` prints them."""


def describe(part: str, key: str) -> str:
    """The description of output `key` of stack `part`; KeyError for a key not declared here."""
    for output in OUTPUTS[part]:
        if output.key == key:
            return output.description
    raise KeyError(f"{part} stack has no output {key!r}; declare it in fmcluster/outputs.py")


SELF_HOSTED_GRAFANA_URL = (
    f"http://localhost:{GRAFANA_PORT} after `fmcluster connect FILE --port-forward {GRAFANA_PORT}:{GRAFANA_PORT}` "
    "(Grafana listens on the head node's loopback only; admin password there: /etc/fmcluster/grafana/admin-password)"
)
"""The GrafanaUrl output of a self-hosted Grafana (observability.sh --grafana)."""
