"""LustreStorage: FSx for Lustre (PERSISTENT_2, SSD) in one subnet, its security group, its links to S3."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, runtime_checkable

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from fmcluster.config.file_rules import Sections, repositories_do_not_overlap
from fmcluster.config.models import Lustre, Repository
from fmcluster.config.value_rules import lustre_dns_name_problem, lustre_mount_name_problem
from fmcluster.constructs.acknowledgments import acknowledge_findings
from fmcluster.constructs.keys import customer_key
from fmcluster.constructs.props import prop_problems
from fmcluster.problems import Problem, raise_if_any
from fmcluster.tokens import known

LUSTRE_PORTS = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))
"""LNet (TCP 988) and the Lustre client/server ports (TCP 1018-1023), needed in both directions."""
LUSTRE_VERSION = "2.15"
"""The Lustre version FSx recommends for new file systems (and its default with a metadata configuration)."""
FSX_S3_ROLE = "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_fs-*"
"""The service-linked role FSx creates per file system to reach its linked S3 buckets (FSx for Lustre user
guide, "Working with server-side encrypted Amazon S3 buckets")."""


@runtime_checkable
class LustreFileSystem(Protocol):
    """What a client needs to mount an FSx for Lustre file system: a `LustreStorage`, or a `LustreMount` for one
    created elsewhere."""

    @property
    def dns_name(self) -> str: ...

    @property
    def mount_name(self) -> str: ...

    @property
    def efa(self) -> bool: ...


@dataclass(frozen=True)
class LustreMount:
    """An FSx for Lustre file system created elsewhere, by the attributes a client mounts it with (the `DNSName`,
    `LustreConfiguration.MountName` and `EfaEnabled` of FSx's DescribeFileSystems). The consumer checks them.

    Example::

        LustreMount(dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", mount_name="abcdef12")

    Args:
        dns_name: the file system's DNS name.
        mount_name: its mount name (1-8 characters).
        efa: the file system is EFA-enabled: clients that can set up LNet over EFA first. Omitted: False.
    """

    dns_name: str
    mount_name: str
    efa: bool = False
    file_system_id: str | None = None
    """Its id (`fs-...`), for outputs; omitted where nothing needs it."""


LUSTRE_PORT_RANGES = (("tcp", 988, 988), ("tcp", 1018, 1023))
"""`LUSTRE_PORTS` as (protocol, from, to), for rules to a security group this app does not own."""


class ExistingFileSystemAccess(Construct):
    """Egress from the nodes' security group to an existing file system's security group, and ingress from it: Lustre
    (TCP 988 and 1018-1023), or all traffic when the file system is EFA-enabled. Nothing of the file system is created
    or changed: its own group must admit the nodes (`fmcluster validate --live` checks it).

    Example::

        ExistingFileSystemAccess(stack, "Lustre", clients=network.efa_security_group,
                                 file_system_security_group_id="sg-0123456789abcdef0")

    Args:
        clients: the nodes' security group.
        file_system_security_group_id: the file system's security group.
        efa: the file system is EFA-enabled. Omitted: False.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        clients: ec2.ISecurityGroup,
        file_system_security_group_id: str,
        efa: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        ranges = (("-1", None, None),) if efa else LUSTRE_PORT_RANGES
        what = "EFA and Lustre" if efa else "Lustre"
        for index, (protocol, low, high) in enumerate(ranges):
            rule: dict[str, Any] = {
                "group_id": clients.security_group_id,
                "ip_protocol": protocol,
                "from_port": low,
                "to_port": high,
            }
            ec2.CfnSecurityGroupEgress(
                self,
                f"Egress{index}",
                **rule,
                destination_security_group_id=file_system_security_group_id,
                description=f"{what} to the existing file system",
            )
            # the file system's servers open connections to their clients too: FSx for Lustre user guide, "File system
            # access control with Amazon VPC" (inbound and outbound 988 and 1018-1023 between the file system and its
            # clients); EFA needs all traffic both ways (FSx user guide, configuring EFA clients)
            ec2.CfnSecurityGroupIngress(
                self,
                f"Ingress{index}",
                **rule,
                source_security_group_id=file_system_security_group_id,
                description=f"{what} from the existing file system",
            )


def file_system_problems(file_system: object) -> list[Problem]:
    """A problem at `file_system.<attribute>` for a consumer's `file_system` prop that no client could mount."""
    if file_system is None:
        return []
    if not isinstance(file_system, LustreFileSystem):
        return [
            Problem(
                "file_system",
                f"must be a LustreStorage or a LustreMount (a dns_name, a mount_name and efa); got {file_system!r}",
            )
        ]
    checks = (
        ("dns_name", lustre_dns_name_problem(known(file_system.dns_name))),
        ("mount_name", lustre_mount_name_problem(known(file_system.mount_name))),
    )
    return [Problem(f"file_system.{prop}", problem) for prop, problem in checks if problem]


class LustreStorage(Construct):
    """An FSx for Lustre file system (PERSISTENT_2, SSD) for training data and checkpoints, linked to S3.

    The file system lives in `subnet` (one AZ: put it where the GPUs are) and is encrypted with a customer
    KMS key. Its own security group opens Lustre (TCP 988 and 1018-1023) between the file servers and,
    in both directions, between the file system and each client security group, always by group id and
    never to a CIDR. With `efa=True` the file system is EFA-enabled (with GPUDirect Storage) and all
    traffic is allowed among the file servers and between them and the clients, as FSx requires for EFA.
    The file system is created only after its security group rules exist (FSx checks them at creation).
    Errors and warnings go to a CloudWatch log group of its own (kept for a year).

    Each repository becomes a data repository association: the Lustre `path` is linked to `s3_uri`, or to
    `s3://<data bucket>/<path>/`; object metadata is imported when the link is created, and the import and
    export events asked for are kept in sync automatically. Associations are created one after another
    (FSx fails some when several are created at once) and are keyed by path, so adding or reordering
    repositories never replaces one; `removal_policy` does not apply to them (`DataRepositoryLinks` makes the same
    associations in another scope, such as a stack nodes need not wait for). When a repository uses
    `data_bucket` and that bucket is encrypted with a KMS key of this app, the key policy lets FSx's S3
    service-linked roles of this account use the key, through S3 only.

    Example::

        network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
        buckets = ProjectBuckets(stack, "Buckets")
        lustre = LustreStorage(
            stack, "Lustre",
            vpc=network.vpc, subnet=network.compute_subnet,
            client_security_groups=[network.efa_security_group],
            capacity_gib=19200, efa=True, metadata_iops=12000,
            repositories=[
                Repository(path="/datasets", s3_uri="s3://my-datasets/c4/"),
                Repository.model_validate({"path": "/checkpoints", "import": [], "export": ["new"]}),
            ],
            data_bucket=buckets.data_bucket, kms_key=buckets.key,
        )
        lustre.allow_clients(login_node_security_group)  # more clients later
        lustre.dns_name, lustre.mount_name  # mount with: mount -t lustre DNS@tcp:/MOUNT /fsx

    Args:
        vpc: the VPC of `subnet`; the file system's security group is created in it.
        subnet: the one subnet (and so the AZ) the file system lives in.
        client_security_groups: the security groups of the nodes that mount the file system; Lustre (and,
            with `efa`, all traffic) is opened both ways between each and the file system. Empty: no
            client can mount it until `allow_clients` is called.
        capacity_gib: storage in GiB; 1200, 2400, then multiples of 2400 (with `efa`, multiples of the
            EFA step for the throughput tier). Omitted: 4800.
        throughput_per_tib: 125, 250, 500 or 1000 MB/s per TiB of storage. Omitted: 250.
        efa: build an EFA-enabled file system (creation-time only). Omitted: False.
        compression: "lz4" or "none" (a token is passed through, so it must resolve to LZ4 or NONE).
            Omitted: "lz4".
        metadata_iops: 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000, USER_PROVISIONED
            metadata performance (it can later be raised, never lowered). Omitted: AUTOMATIC mode.
        repositories: up to 8 `fmcluster.config.Repository` objects (or mappings of the cluster file's
            keys: path, s3_uri, import, export); paths unique and not nested. Omitted: no S3 links.
        data_bucket: the bucket for repositories without an `s3_uri`. Omitted: every repository needs one.
        kms_key: the customer key that encrypts the file system. Omitted: a new key (rotation on), kept or
            deleted with `removal_policy`.
        removal_policy: what `cdk destroy` (or a replacement) does to the file system, its log group and a
            key created here. Omitted: RETAIN.

    Raises:
        ValueError: naming every prop that breaks the cluster file's `storage.lustre` rules (unresolved
            tokens are skipped), and every repository without an S3 location.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        client_security_groups: Sequence[ec2.ISecurityGroup],
        capacity_gib: int = 4800,
        throughput_per_tib: int = 250,
        efa: bool = False,
        compression: Literal["lz4", "none"] | str = "lz4",
        metadata_iops: int | None = None,
        repositories: Sequence[Repository | Mapping[str, object]] = (),
        data_bucket: s3.IBucket | None = None,
        kms_key: kms.IKey | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        links = _validated(
            capacity_gib=capacity_gib,
            throughput_per_tib=throughput_per_tib,
            # The EFA capacity step depends on the throughput tier; unknown until deploy when it is a token.
            efa=False if cdk.Token.is_unresolved(throughput_per_tib) else efa,
            compression=compression,
            metadata_iops=metadata_iops,
            repositories=repositories,
            has_data_bucket=data_bucket is not None,
        )
        super().__init__(scope, construct_id)
        self.efa = efa

        if kms_key is None:
            kms_key = customer_key(
                self,
                "Key",
                removal_policy=removal_policy,
                description=f"fmcluster {cdk.Stack.of(self).stack_name}: FSx for Lustre file system",
            )
        self.kms_key: kms.IKey = kms_key
        """The customer key that encrypts the file system."""

        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            allow_all_outbound=False,
            description="FSx for Lustre: Lustre traffic with its file servers and client nodes only",
        )
        """The file system's own security group; rules reference the client groups by id."""
        self.connections = ec2.Connections(security_groups=[self.security_group], default_port=LUSTRE_PORTS[0])
        """Connections of the file system; `allow_clients` opens every port a Lustre client needs."""

        # FSx writes only to log groups under /aws/fsx/ (its service-linked role's policy), so the group needs
        # a name. The stack's UUID in it lets a retained group outlive `cdk destroy` without blocking the
        # next deploy of the same stack with "already exists".
        unique = cdk.Names.unique_resource_name(self, max_length=120)
        stack_uuid = cdk.Fn.select(2, cdk.Fn.split("/", cdk.Stack.of(self).stack_id))
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=f"/aws/fsx/lustre/{unique}-{stack_uuid}",
            retention=logs.RetentionDays.ONE_YEAR,
            removal_policy=removal_policy,
        )
        """Errors and warnings of the file system and its S3 links."""

        self.file_system = fsx.CfnFileSystem(
            self,
            "FileSystem",
            file_system_type="LUSTRE",
            file_system_type_version=LUSTRE_VERSION,
            storage_type="SSD",
            storage_capacity=capacity_gib,
            subnet_ids=[subnet.subnet_id],
            security_group_ids=[self.security_group.security_group_id],
            kms_key_id=kms_key.key_arn,
            lustre_configuration=fsx.CfnFileSystem.LustreConfigurationProperty(
                deployment_type="PERSISTENT_2",
                per_unit_storage_throughput=throughput_per_tib,
                data_compression_type=compression if cdk.Token.is_unresolved(compression) else compression.upper(),
                metadata_configuration=(
                    fsx.CfnFileSystem.MetadataConfigurationProperty(mode="AUTOMATIC")
                    if metadata_iops is None
                    else fsx.CfnFileSystem.MetadataConfigurationProperty(mode="USER_PROVISIONED", iops=metadata_iops)
                ),
                efa_enabled=efa,
                log_configuration=fsx.CfnFileSystem.LogConfigurationProperty(
                    level="WARN_ERROR",
                    destination=cdk.Stack.of(self).format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name=self.log_group.log_group_name,
                        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                    ),
                ),
            ),
        )
        """The `AWS::FSx::FileSystem`."""
        self.file_system.apply_removal_policy(removal_policy)
        cdk.Tags.of(self.file_system).add("Name", f"{cdk.Stack.of(self).stack_name}-lustre")

        for port in self._ports:
            # FSx checks at creation that its file servers may talk to each other over Lustre (and, for an
            # EFA-enabled file system, over all traffic); without these rules creation fails.
            between = _describe(port, "between file servers")
            self.security_group.add_ingress_rule(self.security_group, port, between)
            self.security_group.add_egress_rule(self.security_group, port, between)
        self.allow_clients(*client_security_groups)

        self.file_system_id: str = self.file_system.ref
        self.dns_name: str = self.file_system.attr_dns_name
        """DNS name to mount: `mount -t lustre -o relatime,flock <dns_name>@tcp:/<mount_name> /fsx`."""
        self.mount_name: str = self.file_system.attr_lustre_mount_name
        """The Lustre mount name FSx generated."""

        self.repositories: dict[str, fsx.CfnDataRepositoryAssociation] = _associate(
            self, file_system_id=self.file_system.ref, links=links, data_bucket=data_bucket
        )
        """The data repository associations, by Lustre path."""

    def allow_clients(self, *clients: ec2.IConnectable) -> None:
        """Open Lustre (and, if EFA-enabled, all traffic) both ways between the file system and `clients`."""
        for client in clients:
            for port in self._ports:
                description = _describe(port, "between file system and clients")
                self.connections.allow_from(client, port, description)
                self.connections.allow_to(client, port, description)
        # CDK drops its "no traffic" egress placeholder as soon as any egress rule is added, even one between
        # security groups (a resource of its own). Keep it inline, so the group never gets EC2's default
        # allow-all egress rule, whatever CloudFormation does with the default when such rules arrive.
        self.security_group.add_egress_rule(
            ec2.Peer.ipv4("255.255.255.255/32"), ec2.Port.icmp_type_and_code(252, 86), "Disallow all traffic"
        )
        self._create_after_rules()

    def _create_after_rules(self) -> None:
        """Make the file system wait for every rule of its security group: FSx checks them when it creates it.

        The rules are children of the group (rules between two groups are resources of their own); waiting for
        the group alone would let CloudFormation create the file system while they are still being added.
        """
        rules = [
            child
            for child in self.security_group.node.children
            if isinstance(child, ec2.CfnSecurityGroupIngress | ec2.CfnSecurityGroupEgress)
        ]
        self.file_system.node.add_dependency(*rules)

    @property
    def _ports(self) -> tuple[ec2.Port, ...]:
        return (*LUSTRE_PORTS, ec2.Port.all_traffic()) if self.efa else LUSTRE_PORTS


class DataRepositoryLinks(Construct):
    """The S3 links (data repository associations) of a `LustreStorage`, in a scope of their own.

    Give them a stack of their own that depends on the file system's stack, and nodes that need only the file
    system boot while the links are created: FSx creates them one after another (a few minutes each), and the
    objects of each S3 location appear under its Lustre path when its link completes. Each repository becomes one
    association exactly as `LustreStorage(repositories=...)` makes it (keyed by path, metadata imported on creation,
    the import and export events asked for; the data bucket's key policy lets FSx's S3 roles use it through S3).

    Example::

        storage = cdk.Stack(app, "Storage")
        lustre = LustreStorage(storage, "Lustre", vpc=vpc, subnet=subnet, client_security_groups=[efa])
        links = cdk.Stack(app, "Links")
        DataRepositoryLinks(links, "Links", file_system=lustre,
                            repositories=[Repository(path="/datasets", s3_uri="s3://my-datasets/c4/")])

    Args:
        file_system: the `LustreStorage` to link (it must have no `repositories` of its own on the same paths).
        repositories: 1-8 `fmcluster.config.Repository` objects (or mappings of the cluster file's keys), with the
            cluster file's rules (paths unique and not nested, S3 locations not overlapping).
        data_bucket: the bucket for repositories without an `s3_uri`. Omitted: every repository needs one.

    Raises:
        ValueError: naming every repository that breaks the cluster file's rules.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        file_system: LustreStorage,
        repositories: Sequence[Repository | Mapping[str, object]],
        data_bucket: s3.IBucket | None = None,
    ) -> None:
        links = _validated(
            repositories=repositories,
            has_data_bucket=data_bucket is not None,
            construct="DataRepositoryLinks",
        )
        super().__init__(scope, construct_id)
        self.repositories: dict[str, fsx.CfnDataRepositoryAssociation] = _associate(
            self, file_system_id=file_system.file_system_id, links=links, data_bucket=data_bucket
        )
        """The data repository associations, by Lustre path."""


def _associate(
    scope: Construct, *, file_system_id: str, links: Sequence[Repository], data_bucket: s3.IBucket | None
) -> dict[str, fsx.CfnDataRepositoryAssociation]:
    """One association per link in `scope`, one after another (FSx fails some created at once), keyed by path."""
    associations: dict[str, fsx.CfnDataRepositoryAssociation] = {}
    previous: fsx.CfnDataRepositoryAssociation | None = None
    for link in links:
        if link.s3_uri is not None:
            location = link.s3_uri
        else:
            assert data_bucket is not None  # checked in _validated
            location = f"s3://{data_bucket.bucket_name}/{link.path.lstrip('/')}/"
        policies: dict[str, Any] = {}
        if link.import_:
            policies["auto_import_policy"] = fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                events=[event.upper() for event in link.import_]
            )
        if link.export:
            policies["auto_export_policy"] = fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(
                events=[event.upper() for event in link.export]
            )
        association = fsx.CfnDataRepositoryAssociation(
            # Keyed by path, so reordering or adding repositories never replaces an existing association.
            scope,
            f"Repository{link.path}",
            file_system_id=file_system_id,
            file_system_path=link.path,
            data_repository_path=location,
            batch_import_meta_data_on_create=True,
            s3=fsx.CfnDataRepositoryAssociation.S3Property(**policies) if policies else None,
        )
        if previous is not None:
            association.node.add_dependency(previous)
        previous = associations[link.path] = association
    key = data_bucket.encryption_key if data_bucket is not None else None
    if key is not None and any(link.s3_uri is None for link in links):
        _let_fsx_use_bucket_key(key)
    return associations


def _let_fsx_use_bucket_key(key: kms.IKey) -> None:
    """Let FSx's S3 service-linked role read and write the data bucket's objects, which `key` encrypts.

    The role is named after the file system id, which the key cannot reference (the key may also encrypt
    the file system: a cycle), so the statement matches the role's ARN pattern instead: FSx's S3 roles of
    this account, calling through S3 in this region. Each such role reaches only the buckets linked to its
    own file system. The bucket's ARN cannot narrow the statement further (the bucket refers to the key:
    another cycle). An imported key's policy cannot be changed here: add the same statement yourself.
    """
    stack = cdk.Stack.of(key)
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="FsxForLustreS3LinksUseTheKeyThroughS3",
            principals=[iam.AnyPrincipal()],
            actions=[
                "kms:Encrypt",
                "kms:Decrypt",
                "kms:ReEncrypt*",
                "kms:GenerateDataKey*",
                "kms:DescribeKey",
            ],
            resources=["*"],
            conditions={
                "StringEquals": {
                    "kms:CallerAccount": stack.account,
                    "kms:ViaService": f"s3.{stack.region}.{stack.url_suffix}",
                },
                "StringLike": {
                    "aws:PrincipalArn": f"arn:{stack.partition}:iam::{stack.account}:{FSX_S3_ROLE}",
                },
            },
        )
    )
    if isinstance(key, kms.Key):
        acknowledge_findings(
            key,
            checkov=["CKV_AWS_33"],
            reason="The one statement with Principal '*' is limited by aws:PrincipalArn to FSx's S3 service-linked "
            "roles of this account, by kms:CallerAccount and by kms:ViaService to S3 in this region",
        )


def _describe(port: ec2.Port, between: str) -> str:
    what = port.to_string()
    kind = "EFA, all traffic" if what == ec2.Port.all_traffic().to_string() else f"Lustre TCP {what}"
    return f"FSx for Lustre: {kind}, {between}"


def _validated(
    *,
    repositories: Sequence[Repository | Mapping[str, object]],
    has_data_bucket: bool,
    construct: str = "LustreStorage",
    **file_system: object,
) -> tuple[Repository, ...]:
    """The repositories as models; or `InvalidProps` naming every problem, in the cluster file's words."""
    problems = prop_problems(Lustre, **file_system, repositories=tuple(repositories))
    # The cluster file's rule across repositories (paths unique and not nested, S3 prefixes not overlapping),
    # run on these repositories exactly as `fmcluster validate` runs it; invalid entries are skipped there.
    sections = Sections.of_data({"storage": {"lustre": {"repositories": [_as_data(link) for link in repositories]}}})
    for problem in repositories_do_not_overlap(sections):
        problems.append(replace(problem, path=problem.path.removeprefix("storage.lustre.")))
    for index, link in enumerate(sections.repositories):
        if link is not None and link.s3_uri is None and not has_data_bucket:
            problems.append(
                Problem(
                    f"repositories[{index}].s3_uri",
                    f"required when no data_bucket is given; pass data_bucket= to link {link.path!r} to a prefix "
                    "of it, or give an S3 URI like s3://my-bucket/prefix/",
                )
            )
    raise_if_any(construct, problems)
    return tuple(link for link in sections.repositories if link is not None)


def _as_data(link: object) -> object:
    if isinstance(link, Repository):
        return link.model_dump(by_alias=True, exclude_none=True)
    return dict(link) if isinstance(link, Mapping) else link
