"""The observability stack: metrics, dashboards, alarms and node-health events of one cluster."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.config import ClusterConfig
from fmcluster.constructs.block_end import BlockEndDrain
from fmcluster.constructs.keys import encrypt_log_groups
from fmcluster.constructs.observability import ClusterObservability
from fmcluster.drains import drains_before_end
from fmcluster.outputs import SELF_HOSTED_GRAFANA_URL
from fmcluster.stacks.outputs import add_output
from fmcluster.stacks.storage import StorageStack


class ObservabilityStack(cdk.Stack):
    """`ClusterObservability` configured from the cluster file's `observability` section, watching the storage
    stack's FSx for Lustre file system and granting the nodes' roles remote write to the Prometheus workspace.

    It deploys after the storage and cluster stacks (it reads the file system id and the node roles). Nodes that boot
    before it exists find the workspace's endpoint later through its SSM parameter (observability.sh refreshes every
    5 minutes). With `storage.retain_on_delete: true` (the default) the Prometheus workspace (the metrics history) and
    the alarm topic's key survive `cdk destroy`.

    The storage stack's nccl-tests alarms are made here, next to the topic every alarm notifies (an alarm refers to
    metric names only). Log groups are encrypted with the alarm topic's key.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ClusterConfig,
        storage: StorageStack,
        node_roles: Sequence[iam.IRole] = (),
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        observability = config.observability
        # only a file system fmcluster creates is watched: an existing one's size is not in the file (its dashboards
        # and alarm are its owner's), and `storage.lustre: none` has none
        lustre = config.storage.lustre if config.storage.creates_file_system else None
        watched = storage.lustre if lustre is not None else None
        retain = config.storage.retain_on_delete
        self.observability = ClusterObservability(
            self,
            "Observability",
            cluster_name=config.name,
            orchestrator=config.orchestrator.type,
            prometheus=observability.prometheus,
            grafana=observability.grafana,
            alarm_email=observability.alarm_email,
            file_system_id=watched.file_system_id if watched is not None else None,
            lustre_capacity_gib=lustre.capacity_gib if lustre is not None else None,
            lustre_throughput_per_tib=lustre.throughput_per_tib if lustre is not None else None,
            node_roles=node_roles,
            removal_policy=cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY,
        )
        if storage.nccl_tests is not None:
            storage.nccl_tests.add_alarms(Construct(self, "NcclTests"), self.observability.topic)
        blocks = capacity_blocks_to_drain(config)
        self.block_end = (
            BlockEndDrain(
                self,
                "BlockEnd",
                cluster_name=config.name,
                blocks=blocks,
                topic=self.observability.topic,
                topic_key=self.observability.key,
            )
            if blocks
            else None
        )
        """Drains capacity blocks' nodes before the blocks end (None without a capacity block to drain)."""
        encrypt_log_groups(self, self.observability.key)
        built = self.observability
        url = grafana_url(built, observability.grafana)
        if url is not None:
            add_output(self, "observability", "GrafanaUrl", url)
        if built.workspace is not None:
            add_output(self, "observability", "PrometheusWorkspaceId", built.workspace.attr_workspace_id)
        add_output(self, "observability", "AlarmTopicArn", built.topic.topic_arn)


def grafana_url(observability: ClusterObservability, grafana: str) -> str | None:
    """Where the cluster's Grafana is: the managed workspace's URL, the self-hosted one's port forward (it runs only
    with a managed Prometheus, its data source), or None without a Grafana."""
    if observability.grafana_workspace is not None:
        return f"https://{observability.grafana_workspace.attr_endpoint}"
    if grafana == "self-hosted" and observability.workspace is not None:
        return SELF_HOSTED_GRAFANA_URL
    return None


def capacity_blocks_to_drain(config: ClusterConfig) -> dict[str, tuple[list[str], int]]:
    """Reservation id -> (its groups' partitions, the longest drain_before_end_minutes of them), for every capacity
    block whose groups drain before its end (drain_before_end_minutes above 0).

    >>> from fmcluster.config import load
    >>> capacity_blocks_to_drain(load("examples/quickstart.yaml"))
    {}
    """
    return drains_before_end(config.compute, "capacity-block")
