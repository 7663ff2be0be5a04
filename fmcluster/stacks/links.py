"""The S3 links stack: the file system's data repository associations, beside the cluster stack."""

from __future__ import annotations

from typing import cast

import aws_cdk as cdk
from constructs import Construct

from fmcluster.config import ClusterConfig
from fmcluster.constructs.keys import encrypt_log_groups
from fmcluster.constructs.lustre import DataRepositoryLinks, LustreStorage
from fmcluster.stacks.outputs import add_output
from fmcluster.stacks.storage import StorageStack


class DataLinksStack(cdk.Stack):
    """`DataRepositoryLinks` for the cluster file's `storage.lustre.repositories`.

    A stack of its own so the cluster stack need not wait for it: FSx creates the links one after another, a few
    minutes each, while the nodes boot and mount the file system. The objects of each S3 location appear under its
    Lustre path when its link completes (metadata first; file contents load on first read). It holds nothing
    stateful: deleting a link keeps the files already in the file system and the objects in S3.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: ClusterConfig, storage: StorageStack, **kwargs):
        super().__init__(scope, construct_id, **kwargs)
        self.links = DataRepositoryLinks(
            self,
            "Links",
            file_system=cast(LustreStorage, storage.lustre),  # links are refused with an existing file system
            repositories=config.storage.repositories,
            data_bucket=storage.buckets.data_bucket,
        )
        encrypt_log_groups(self, storage.buckets.key)  # none today; any a later construct here brings is encrypted
        links = [
            f"{link.path} -> {self.links.repositories[link.path].data_repository_path} "
            f"(import {','.join(link.import_) or 'none'}, export {','.join(link.export) or 'none'})"
            for link in config.storage.repositories
        ]
        add_output(self, "data-links", "DataLinks", "; ".join(links))
