"""BakedNodeImage: a node image built in the account with EC2 Image Builder, once, and pinned until its recipe changes.

The build runs the node-file list's own image steps (`fmcluster.node_files.baked_steps()`) through the node's own
runner: the component copies `run-step.sh` and the image bundle (`fmcluster.node_files.image_tree()`) from S3 and runs
`run-step.sh bake` with the cluster's Slurm version and the project's artifact mirror, then `image-check.sh` in its
validate phase (on the build instance) and its test phase (on an instance launched from the new image). Nothing is
downloaded from another internet host: the steps install from the mirror (`mirror_get`) and the image's own package
repositories, as a node at boot does.

Pinned: an `AWS::ImageBuilder::Image` builds once, at create, and its `ImageId` stays until the image is replaced,
which happens only when its recipe is: every Image Builder name here carries a digest of what the image is made of
(the image bundle's and the runner's contents, the architecture, the Slurm version, the parent image's resolution
label, `version` and where the mirror lives), so a change of one of these makes a new component and recipe (their
Data, Components and ParentImage are create-only: cfn-lint's AWS::ImageBuilder::Component and ImageRecipe schemas)
and so a new image; anything else (a node script that only runs at boot, a tag) changes nothing here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import aws_cdk as cdk
import yaml
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_imagebuilder as imagebuilder
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from fmcluster.constructs.acknowledgments import acknowledge_findings, acknowledge_wildcards
from fmcluster.node_scripts import image_bundle_path, runner_path

BUILD_INSTANCE_TYPES = {"x86_64": ("c6i.4xlarge", "m6i.4xlarge"), "arm64": ("c7g.4xlarge", "m7g.4xlarge")}
"""Where the image is built and tested. x86_64: AWS's PCS Image Builder recipe (awsome-distributed-training
`architectures/aws-pcs/assets/pcs-ready-dlami-with-enroot-pyxis.yaml`, InfrastructureConfigX8664). arm64: the
Graviton types of the same size (an estimate: AWS's recipe builds x86_64 only). None has a GPU or EFA: the image
check says so."""
ROOT_DEVICE = "/dev/sda1"
ROOT_VOLUME_GIB = 100
"""The PCS-Ready DLAMI's root device, and the size AWS's recipe gives it (DLAMIConfigs.ubuntu2404: /dev/sda1, 100 GiB).
Node groups launch with their own, larger root volume (`compute[].root_volume_gib`, at least 100)."""
WORK_DIR = "/opt/fmcluster-build"
TEST_TIMEOUT_MINUTES = 60
"""Image Builder's minimum for ImageTestsConfiguration.TimeoutMinutes (cfn-lint schema: 60-1440)."""
BAKE_TIMEOUT_SECONDS = 3600
CHECK_TIMEOUT_SECONDS = 600
"""Each step's timeoutSeconds (AWSTOE's default is 7,200: EC2 Image Builder user guide, "Use documents in EC2 Image
Builder", step fields). The bake installs two packages and builds pyxis, minutes on a c6i.4xlarge (an estimate)."""
COMPONENT_VERSION = "1.0.0"
"""Every component and recipe keeps this version: a new one gets a new name (its digest) instead."""
MANAGED_POLICIES = ("AmazonSSMManagedInstanceCore", "EC2InstanceProfileForImageBuilder")
"""What an Image Builder build instance needs (EC2 Image Builder user guide, "Prerequisites": the instance profile's
policies; AWS's PCS recipe attaches the same two)."""


class BakedNodeImage(Construct):
    """An AMI for one CPU architecture and Slurm version, built from `parent_image` by EC2 Image Builder at deploy.

    Example::

        base = pcs_ready_dlami(stack, "Base", node_image_provider(stack), "x86_64", refresh=None)
        image = BakedNodeImage(stack, "X8664", name="llm", architecture="x86_64", parent_image=base,
                               slurm_version="26.05", mirror=storage.mirror.uri, subnet=network.compute_subnet,
                               security_groups=[network.efa_security_group])
        storage.buckets.data_bucket.grant_read(image.role, "fmcluster-mirror/*")
        PcsSlurmCluster(..., node_images={"x86_64": image.image_id})

    Args:
        name: the cluster's name; prefixes every Image Builder resource's name and the AMI's.
        architecture: "x86_64" or "arm64" (the build instance types follow it).
        parent_image: the AMI id to build from (the PCS-Ready DLAMI of this architecture; a token is fine).
        slurm_version: the cluster's Slurm version: pyxis is built against that Slurm of the image.
        mirror: the project's artifact mirror (s3://<mirror bucket>/fmcluster-mirror); `role` needs read on it.
        subnet, security_groups: where the build and test instances run: the nodes' own subnet and groups, so the
            build reaches the mirror and the package repositories the way a node does (S3 gateway endpoint; SSM
            endpoints or a NAT gateway for Image Builder's agent).
        parent_label: a label of the parent image's resolution (`orchestrator.image_refresh`): it is part of the
            digest, so a re-resolved parent gets a new recipe. Omitted: none.
        version: a label that forces a new build when changed (`orchestrator.node_image_version`). Omitted: none.
        mirror_home: where `mirror` lives when it is a deploy-time value (the mirror's stack name): part of the
            digest, because the component's document carries the mirror's URI and Image Builder names must change
            with their document (a component or recipe replaced under its old name fails: CloudFormation custom
            names; Image Builder ARNs are name/version). A literal `mirror` is part of the digest itself.

    Attributes:
        image: the `CfnImage`; image_id: its AMI id (deploy-time). role: the build instances' role.
        digest: the 12 hex digits that name this image's component and recipe.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        architecture: str,
        parent_image: str,
        slurm_version: str,
        mirror: str,
        subnet: ec2.ISubnet,
        security_groups: Sequence[ec2.ISecurityGroup],
        parent_label: str | None = None,
        version: str | None = None,
        mirror_home: str | None = None,
    ) -> None:
        if architecture not in BUILD_INSTANCE_TYPES:
            raise ValueError(f"architecture must be one of {', '.join(BUILD_INSTANCE_TYPES)}; got {architecture!r}")
        where = mirror_home if cdk.Token.is_unresolved(mirror) else mirror
        if not where:
            raise ValueError(
                "mirror is a deploy-time value: give mirror_home (where it lives, e.g. the mirror's stack name), so "
                "the image's component and recipe names change with the mirror (their document carries it; Image "
                "Builder refuses a new document under an old name and version)"
            )
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        bundle = s3_assets.Asset(self, "ImageBundle", path=image_bundle_path())
        runner = s3_assets.Asset(self, "Runner", path=runner_path())
        self.digest = hashlib.sha256(
            "\n".join(
                [
                    bundle.asset_hash,
                    runner.asset_hash,
                    architecture,
                    slurm_version,
                    parent_label or "",
                    version or "",
                    where,
                ]
            ).encode()
        ).hexdigest()[:12]
        resource_name = f"{name}-node-{architecture.replace('_', '-')}-slurm{slurm_version.replace('.', '')}"

        self.role = iam.Role(
            self,
            "BuildRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"EC2 Image Builder instances of {name}'s baked node image ({architecture})",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(policy) for policy in MANAGED_POLICIES],
        )
        cdk.Validations.of(self.role).acknowledge(
            *(
                cdk.Acknowledgment(
                    id=f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{policy}]",
                    reason="What EC2 Image Builder's build and test instances need (its agent runs the component "
                    "through SSM); AWS maintains these policies as Image Builder and the SSM agent change",
                )
                for policy in MANAGED_POLICIES
            )
        )
        for asset in (bundle, runner):
            asset.grant_read(self.role)
        acknowledge_wildcards(
            self.role,
            actions=("s3:GetObject*", "s3:GetBucket*", "s3:List*"),
            resources=[bundle.bucket.arn_for_objects("*")],
            reason="CDK's Asset.grant_read: the build reads the image bundle and the step runner from the CDK "
            "bootstrap assets bucket, read-only (deployment artifacts named by content hash, no data)",
        )
        profile = iam.InstanceProfile(self, "BuildProfile", role=self.role)

        component = imagebuilder.CfnComponent(
            self,
            "Component",
            name=f"{resource_name}-{self.digest}",
            version=COMPONENT_VERSION,
            platform="Linux",
            description=f"fmcluster: the node-file list's image steps for Slurm {slurm_version}, then the image check",
            data=component_document(
                runner_uri=runner.s3_object_url,
                bundle_uri=bundle.s3_object_url,
                region=stack.region,
                slurm_version=slurm_version,
                mirror=mirror,
            ),
        )
        recipe = imagebuilder.CfnImageRecipe(
            self,
            "Recipe",
            name=f"{resource_name}-{self.digest}",
            version=COMPONENT_VERSION,
            parent_image=parent_image,
            components=[imagebuilder.CfnImageRecipe.ComponentConfigurationProperty(component_arn=component.attr_arn)],
            block_device_mappings=[
                imagebuilder.CfnImageRecipe.InstanceBlockDeviceMappingProperty(
                    device_name=ROOT_DEVICE,
                    ebs=imagebuilder.CfnImageRecipe.EbsInstanceBlockDeviceSpecificationProperty(
                        volume_size=ROOT_VOLUME_GIB, volume_type="gp3", delete_on_termination=True
                    ),
                )
            ],
            description=f"fmcluster {name}: the PCS-Ready DLAMI with the node image steps ({architecture})",
        )
        infrastructure = imagebuilder.CfnInfrastructureConfiguration(
            self,
            "Infrastructure",
            name=resource_name,
            instance_profile_name=profile.instance_profile_name,
            instance_types=list(BUILD_INSTANCE_TYPES[architecture]),
            subnet_id=subnet.subnet_id,
            security_group_ids=[group.security_group_id for group in security_groups],
            terminate_instance_on_failure=True,
            instance_metadata_options=imagebuilder.CfnInfrastructureConfiguration.InstanceMetadataOptionsProperty(
                http_tokens="required"
            ),
            description=f"fmcluster {name}: build and test instances in the nodes' subnet",
        )
        distribution = imagebuilder.CfnDistributionConfiguration(
            self,
            "Distribution",
            name=resource_name,
            distributions=[
                imagebuilder.CfnDistributionConfiguration.DistributionProperty(
                    region=stack.region,
                    ami_distribution_configuration={
                        "Name": f"{resource_name}-{{{{imagebuilder:buildDate}}}}",
                        "Description": f"fmcluster {name}: baked node image, Slurm {slurm_version}",
                        "AmiTags": {
                            "fmcluster:cluster": name,
                            "fmcluster:slurm-version": slurm_version,
                            "fmcluster:parent-image": parent_image,
                            "fmcluster:digest": self.digest,
                        },
                    },
                )
            ],
        )
        self.image = imagebuilder.CfnImage(
            self,
            "Image",
            image_recipe_arn=recipe.attr_arn,
            infrastructure_configuration_arn=infrastructure.attr_arn,
            distribution_configuration_arn=distribution.attr_arn,
            image_tests_configuration=imagebuilder.CfnImage.ImageTestsConfigurationProperty(
                image_tests_enabled=True, timeout_minutes=TEST_TIMEOUT_MINUTES
            ),
            enhanced_image_metadata_enabled=True,
        )
        self.image.node.add_dependency(self.role)  # the instance reads the bundle as soon as it runs
        self.image_id = self.image.attr_image_id
        """The AMI id, known once the build and its tests are done (a deploy-time token)."""
        self._acknowledge(component, recipe, distribution)

    def _acknowledge(
        self,
        component: imagebuilder.CfnComponent,
        recipe: imagebuilder.CfnImageRecipe,
        distribution: imagebuilder.CfnDistributionConfiguration,
    ) -> None:
        acknowledge_findings(
            component,
            checkov=["CKV_AWS_180"],
            reason="The component document holds S3 URIs and a Slurm version, no secret; Image Builder encrypts it "
            "with an AWS-owned key",
        )
        acknowledge_findings(
            recipe,
            checkov=["CKV_AWS_200"],
            reason="The image holds software only, no data; every node encrypts its root volume at launch (the node "
            "groups' launch templates set Encrypted), and an unencrypted AMI is what SageMaker HyperPod requires of "
            "a custom AMI (botocore sagemaker ClusterInstanceGroupSpecification.ImageId)",
        )
        acknowledge_findings(
            distribution,
            checkov=["CKV_AWS_199"],
            reason="The AMI stays in this account and region, holds software only (no data), and nodes encrypt their "
            "volumes at launch; a customer-managed key would have to be granted to every node's launch",
        )


def component_document(*, runner_uri: str, bundle_uri: str, region: str, slurm_version: str, mirror: str) -> str:
    """The Image Builder component (AWSTOE document, schemaVersion 1.0): build runs the bake, validate and test run the
    image check (EC2 Image Builder user guide, "Component document": phases build, validate and test; ExecuteBash).

    Arguments may be CDK tokens (they are substituted into the document's text)."""
    runner = f"{WORK_DIR}/run-step.sh"
    check = ["/opt/fmcluster/node/image-check.sh", "--slurm-version", slurm_version]
    bake = ["bake", bundle_uri, "--region", region, "--slurm-version", slurm_version, "--mirror", mirror]
    document = {
        "name": "fmcluster-node-image",
        "description": "The node-file list's image steps (run-step.sh bake), then image-check.sh",
        "schemaVersion": "1.0",
        "phases": [
            {
                "name": "build",
                "steps": [
                    {
                        "name": "Bake",
                        "action": "ExecuteBash",
                        "timeoutSeconds": BAKE_TIMEOUT_SECONDS,
                        "onFailure": "Abort",
                        "inputs": {
                            "commands": [
                                "set -euo pipefail",
                                f"mkdir -p {WORK_DIR}",
                                f"aws s3 cp --only-show-errors --region {region} {runner_uri} {runner}",
                                " ".join(["bash", runner, *bake]),
                                f"rm -rf {WORK_DIR}",
                            ]
                        },
                    }
                ],
            },
            *(
                {
                    "name": phase,
                    "steps": [
                        {
                            "name": "ImageCheck",
                            "action": "ExecuteBash",
                            "timeoutSeconds": CHECK_TIMEOUT_SECONDS,
                            "onFailure": "Abort",
                            "inputs": {"commands": [" ".join(check)]},
                        }
                    ],
                }
                for phase in ("validate", "test")
            ),
        ],
    }
    return yaml.safe_dump(document, sort_keys=False, width=1000)
