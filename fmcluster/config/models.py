"""The cluster file as typed, frozen models (the contract is the key table in docs/cluster-file.md).

Each model checks its own keys, including rules that depend on an earlier key of the same model (pydantic
validates fields in declaration order, so a dependent field is declared after what it depends on and its
validator reads `info.data`). Rules across sections live in `file_rules.py`, rules of one orchestrator in
`orchestrators/`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from fmcluster import catalog, nccl
from fmcluster.config import orchestrators
from fmcluster.config import users as user_rules
from fmcluster.config.orchestrators import pcs
from fmcluster.config.regions import AZ_ID_PATTERN, AZ_NAME_PATTERN, REGIONS, az_id_prefix, region_of_az_id
from fmcluster.config.value_rules import (
    AMI_ID_PATTERN,
    FILE_SYSTEM_ID_PATTERN,
    GROUP_NAME_PATTERN,
    IMAGE_REFRESH_PATTERN,
    ROOT_VOLUME_GIB,
    S3_URI_PATTERN,
    SECURITY_GROUP_ID_PATTERN,
    SUBNET_ID_PATTERN,
    TRAINING_PLAN_ARN_PATTERN,
    VPC_ID_PATTERN,
    cluster_name_problem,
    deep_health_checks_problem,
    hyperpod_prefix_problem,
    lustre_dns_name_problem,
    lustre_mount_name_problem,
    min_count_problem,
    no_efa,
    placement_group_name_problem,
    reservation_problem,
    scale_down_problem,
    unknown_instance_type,
)
from fmcluster.names import RESERVED_GROUP_NAMES
from fmcluster.nccl import Versions as NcclVersions  # the `nccl` field shadows the module in Image

MAX_NODES_PER_GROUP = 6758
CLUSTER_TAG = "fmcluster:cluster"
"""The tag every stack of a cluster file puts on what it builds (value: the file's `name`); launch templates pass it to
the instances they launch, so a cluster's own instances are found by it."""
LUSTRE_EFA_CAPACITY_STEP_GIB = {1000: 4800, 500: 9600, 250: 19200, 125: 38400}
"""FSx for Lustre user guide, "Increasing storage capacity": EFA-enabled file systems grow in these steps."""


def fail(message: str) -> PydanticCustomError:
    """A validation error whose text is shown to the user exactly as written."""
    return PydanticCustomError("fmcluster", message)


def deferred(info: ValidationInfo, value: object) -> bool:
    """True when the caller's validation context says `value` is known only at deploy time: a construct validating
    its props passes `{"deferred": is_token}` (`fmcluster.tokens.DEFERRED`); a cluster file holds no such value."""
    judge = (info.context or {}).get("deferred")
    return bool(judge and judge(value))


def _without_repeats(value: object) -> object:
    """A YAML list as a tuple, refusing any string it names twice; anything else is left to the field's type."""
    if isinstance(value, list):
        repeated = sorted({item for item in value if isinstance(item, str) and value.count(item) > 1})
        if repeated:
            raise fail(f"lists {', '.join(map(repr, repeated))} more than once")
        return tuple(value)
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, data: object) -> object:
        """`storage:` with nothing after it (YAML null) means "use the defaults", as if the key were absent."""
        if isinstance(data, dict):
            optional = {field.alias or name for name, field in cls.model_fields.items() if not field.is_required()}
            return {key: value for key, value in data.items() if value is not None or key not in optional}
        return data


Capacity = Literal["on-demand", "capacity-block", "odcr", "training-plan"]
DRAIN_CHECK_MINUTES = 5
"""How often the cluster's block-end drain looks at its capacity blocks' end dates (constructs/block_end.py)."""
DRAIN_BEFORE_END_DEFAULT = 60
"""`compute[].drain_before_end_minutes` of a capacity-block or training-plan group: drained an hour before the end,
so a job has about 30 minutes to checkpoint before EC2 begins terminating the block's instances (EC2 user guide,
"Launch instances using Capacity Blocks": 30 minutes before the end)."""
DRAINED_CAPACITIES = ("capacity-block", "training-plan")
"""Capacity that ends on a clock: a capacity block (EC2 DescribeCapacityReservations EndDate) or a SageMaker training
plan (DescribeTrainingPlan EndTime; when HyperPod stops its instances relative to it is unconfirmed, so the bounds
are the capacity blocks')."""
DRAIN_BEFORE_END_MIN = 30 + DRAIN_CHECK_MINUTES
"""The drain happens between the grace and the grace minus one check interval before the end: never after
termination begins."""
DRAIN_BEFORE_END_MAX = 24 * 60
RepositoryEvent = Literal["new", "changed", "deleted"]
DeepHealthCheck = Literal["InstanceStress", "InstanceConnectivity"]
"""HyperPod's on-start deep health checks (botocore sagemaker DeepHealthCheckType)."""

EC2_TYPE_PATTERN = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")
LUSTRE_PATH_PATTERN = re.compile(r"^(/[A-Za-z0-9._-]+)+/?$")
EMAIL_PATTERN = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
TAG_KEY_PATTERN = re.compile(r"^[\w.:/=+@ -]{1,128}$")
TAG_VALUE_PATTERN = re.compile(r"^[\w.:/=+@ -]{0,256}$")


DEFAULT_VPC_CIDR = "10.0.0.0/16"


class Network(_Model):
    """`network`: the VPC fmcluster creates, or (`vpc_id`, `subnet_id`) one of your own that it only uses."""

    vpc_id: str | None = None
    subnet_id: str | None = Field(None, validate_default=True)
    vpc_cidr: str = Field(None, validate_default=True)  # resolved below
    egress: Literal["nat", "none"] = "nat"

    @field_validator("vpc_id")
    @classmethod
    def _vpc_id(cls, value: str | None) -> str | None:
        if value is not None and not VPC_ID_PATTERN.match(value):
            raise fail(f"must be a VPC id like vpc-0123456789abcdef0; got {value!r}")
        return value

    @field_validator("subnet_id")
    @classmethod
    def _subnet_id(cls, value: str | None, info: ValidationInfo) -> str | None:
        own_vpc = info.data.get("vpc_id") is not None or "vpc_id" not in info.data  # an invalid vpc_id is one too
        if value is None:
            if info.data.get("vpc_id") is not None:
                raise fail("required with network.vpc_id: the subnet (in availability_zone_id) the nodes go in")
            return None
        if not own_vpc:
            raise fail("only with network.vpc_id: a subnet of a VPC of your own (without it fmcluster creates one)")
        if not SUBNET_ID_PATTERN.match(value):
            raise fail(f"must be a subnet id like subnet-0123456789abcdef0; got {value!r}")
        return value

    @field_validator("vpc_cidr", mode="before")
    @classmethod
    def _cidr_of_own_vpc(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return DEFAULT_VPC_CIDR
        if info.data.get("vpc_id") is not None:
            raise fail("only without network.vpc_id: fmcluster creates no VPC in one of your own")
        return value

    @field_validator("vpc_cidr")
    @classmethod
    def _private_block(cls, value: str) -> str:
        try:
            block = ipaddress.IPv4Network(value, strict=True)
        except ValueError:
            raise fail(f"must be an IPv4 block like 10.0.0.0/16 with no host bits set; got {value!r}") from None
        if not any(
            block.subnet_of(ipaddress.IPv4Network(p)) for p in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
        ):
            raise fail(
                f"must be a private (RFC 1918) block in 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16; got {value!r}"
            )
        if not 16 <= block.prefixlen <= 20:
            raise fail(f"must be a /16 to /20 block; got /{block.prefixlen}")
        return value


RepairAction = Literal["auto", "replace", "isolate", "none"]
"""What PCS does with an instance that fails a health check (botocore pcs HealthMonitoringRepairAction and
DeepHealthCheckOnStartRepairAction: AUTO, REPLACE, ISOLATE, NONE; lower case in the file)."""


class HealthChecks(_Model):
    """`compute[].health_checks`: AWS PCS instance health checks of the group's node group (botocore pcs
    InstanceHealthChecks), applied through a custom resource until CloudFormation has the property
    (fmcluster/lambdas/pcs_health_checks)."""

    monitoring: Literal["standard", "none"] = "standard"
    monitoring_repair: RepairAction | None = Field(None, validate_default=True)
    deep_check: Literal["none", "quick", "medium", "long"] = "none"
    deep_check_repair: RepairAction | None = Field(None, validate_default=True)

    @field_validator("monitoring_repair")
    @classmethod
    def _monitoring_repair(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("monitoring") == "none":
            raise fail("only with monitoring: standard (botocore pcs HealthMonitoring: no repairAction with NONE)")
        return value

    @field_validator("deep_check_repair")
    @classmethod
    def _deep_check_repair(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("deep_check") == "none":
            raise fail(
                "only with a deep_check other than none (botocore pcs DeepHealthCheckOnStart: no repairAction with "
                "profile NONE)"
            )
        return value

    def request(self) -> dict:
        """The `instanceHealthChecks` of UpdateComputeNodeGroup (botocore pcs UpdateInstanceHealthChecksRequest); a
        repair action not given is left out, so PCS uses AUTO.

        >>> HealthChecks(deep_check="quick", deep_check_repair="replace").request()["deepHealthChecks"]
        {'onStart': {'profile': 'QUICK', 'repairAction': 'REPLACE'}}
        """
        monitoring: dict[str, str] = {"mode": self.monitoring.upper()}
        if self.monitoring_repair is not None:
            monitoring["repairAction"] = self.monitoring_repair.upper()
        on_start: dict[str, str] = {"profile": self.deep_check.upper()}
        if self.deep_check_repair is not None:
            on_start["repairAction"] = self.deep_check_repair.upper()
        return {"healthMonitoring": monitoring, "deepHealthChecks": {"onStart": on_start}}


class ComputeGroup(_Model):
    """One entry of `compute`: a Slurm partition of identical nodes."""

    name: str
    instance_type: str
    count: Annotated[int, Field(ge=0, le=MAX_NODES_PER_GROUP)]
    capacity: Capacity = "on-demand"
    reservation_id: str | None = Field(None, validate_default=True)
    training_plan_arn: str | None = Field(None, validate_default=True)
    placement_group: bool | str = Field(None, validate_default=True)  # resolved below
    root_volume_gib: Annotated[int, Field(ge=ROOT_VOLUME_GIB[0], le=ROOT_VOLUME_GIB[1])] = 512
    efa: bool = Field(None, validate_default=True)  # resolved below
    deep_health_checks: tuple[DeepHealthCheck, ...] = ()
    min_count: int = Field(None, validate_default=True)  # resolved below: `count`, a static group
    scale_down_idle_minutes: int | None = Field(None, validate_default=True)
    drain_before_end_minutes: int | None = Field(None, validate_default=True)  # resolved below
    health_checks: HealthChecks | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not GROUP_NAME_PATTERN.match(value):
            raise fail(
                f"must start with a lowercase letter, then up to 19 lowercase letters, digits or '-'; got {value!r}"
            )
        if value.endswith("-"):
            raise fail(f"must end with a letter or digit (HyperPod and Slurm reject a trailing '-'); got {value!r}")
        if value in RESERVED_GROUP_NAMES:
            raise fail(f"{value!r} is reserved for the cluster's own {value} nodes; choose another name")
        return value

    @field_validator("instance_type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if problem := hyperpod_prefix_problem(value) or unknown_instance_type(value):
            raise fail(problem)
        return value

    @field_validator("reservation_id")
    @classmethod
    def _reservation(cls, value: str | None, info: ValidationInfo) -> str | None:
        if problem := reservation_problem(info.data.get("capacity"), value, deferred=deferred(info, value)):
            raise fail(problem)
        return value

    @field_validator("training_plan_arn")
    @classmethod
    def _training_plan(cls, value: str | None, info: ValidationInfo) -> str | None:
        capacity = info.data.get("capacity")
        if value is None:
            if capacity == "training-plan":
                raise fail("required when capacity is 'training-plan'")
            return None
        if capacity is not None and capacity != "training-plan":
            raise fail(f"only for capacity 'training-plan'; this group's capacity is {capacity!r}")
        if not TRAINING_PLAN_ARN_PATTERN.match(value):
            raise fail(
                "must be a SageMaker training plan ARN like "
                f"arn:aws:sagemaker:us-east-1:123456789012:training-plan/my-plan; got {value!r}"
            )
        return value

    @field_validator("placement_group", mode="before")
    @classmethod
    def _placement(cls, value: object, info: ValidationInfo) -> object:
        capacity = info.data.get("capacity")
        instance_type = info.data.get("instance_type")
        if value is None:
            # a general-purpose type (outside the catalog) gains nothing from a cluster placement group
            return capacity not in ("capacity-block", "odcr") and instance_type in catalog.CATALOG
        if value is not False and capacity == "capacity-block":
            raise fail(
                "must be false with capacity 'capacity-block': capacity blocks are already placed inside an "
                "EC2 UltraCluster and reject a placement group"
            )
        if value is True and capacity == "odcr":
            raise fail(
                "must be false or the name of the cluster placement group the reservation was created in, with "
                "capacity 'odcr': a reservation serves a placement group only if it was made in it, and true makes "
                "a new one"
            )
        if not isinstance(value, bool | str):
            raise fail(f"must be true, false or the name of an existing placement group; got {value!r}")
        if isinstance(value, str) and (problem := placement_group_name_problem(value)):
            raise fail(problem)
        return value

    @field_validator("efa", mode="before")
    @classmethod
    def _efa(cls, value: object, info: ValidationInfo) -> object:
        instance_type = info.data.get("instance_type")
        row = catalog.CATALOG.get(instance_type) if instance_type else None
        if value is None:
            return bool(row and row.supports_efa)
        if value is True and instance_type and (problem := no_efa(instance_type, "set efa: false")):
            raise fail(problem)
        return value

    @field_validator("deep_health_checks", mode="before")
    @classmethod
    def _deep_health_checks_list(cls, value: object) -> object:
        return _without_repeats(value)

    @field_validator("deep_health_checks")
    @classmethod
    def _deep_health_checks(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if problem := deep_health_checks_problem(value, info.data.get("count"), info.data.get("efa")):
            raise fail(problem)
        return value

    @field_validator("min_count", mode="before")
    @classmethod
    def _min_count(cls, value: object, info: ValidationInfo) -> object:
        count = info.data.get("count")
        if value is None:
            return count if count is not None else 0  # an invalid count is its own problem
        if isinstance(value, bool) or not isinstance(value, int) or count is None:
            return value  # strict int says what is wrong
        if problem := min_count_problem(value, count, info.data.get("capacity")):
            raise fail(problem)
        return value

    @field_validator("scale_down_idle_minutes")
    @classmethod
    def _scale_down(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is None:
            return None
        if problem := scale_down_problem(value, info.data.get("min_count"), info.data.get("count")):
            raise fail(problem)
        return value

    @property
    def scales(self) -> bool:
        """True when the group scales between `min_count` and `count` (nodes start for jobs, stop when idle)."""
        return self.min_count < self.count

    @field_validator("drain_before_end_minutes")
    @classmethod
    def _drain_before_end(cls, value: int | None, info: ValidationInfo) -> int | None:
        capacity = info.data.get("capacity")
        if value is None:
            return DRAIN_BEFORE_END_DEFAULT if capacity in DRAINED_CAPACITIES else None
        if capacity is not None and capacity not in DRAINED_CAPACITIES:
            raise fail(f"only for capacity 'capacity-block' or 'training-plan'; this group's capacity is {capacity!r}")
        if value != 0 and not DRAIN_BEFORE_END_MIN <= value <= DRAIN_BEFORE_END_MAX:
            raise fail(
                f"must be 0 (never drain) or {DRAIN_BEFORE_END_MIN} to {DRAIN_BEFORE_END_MAX} minutes: EC2 begins "
                "terminating a block's instances 30 minutes before its end, and the drain check runs every "
                f"{DRAIN_CHECK_MINUTES} minutes; got {value}"
            )
        return value

    @field_validator("health_checks")
    @classmethod
    def _health_checks(cls, value: HealthChecks | None, info: ValidationInfo) -> HealthChecks | None:
        instance_type = info.data.get("instance_type")
        if value is None or value.deep_check == "none" or instance_type is None:
            return value
        if not catalog.lookup(instance_type).accelerator.startswith("NVIDIA"):
            raise fail(
                f"deep_check {value.deep_check!r} runs NVIDIA DCGM diagnostics: it needs a type with NVIDIA GPUs "
                f"(botocore pcs DeepHealthCheckOnStart); {instance_type} has none: use deep_check: none"
            )
        return value

    @property
    def instance(self) -> catalog.InstanceType:
        """The catalog row, or a general-purpose row for a type outside the catalog (`catalog.general_purpose`)."""
        return catalog.lookup(self.instance_type)

    @property
    def existing_placement_group(self) -> str | None:
        """The name of a placement group made outside fmcluster that this group's nodes launch into, or None."""
        return self.placement_group if isinstance(self.placement_group, str) else None

    @property
    def new_placement_group(self) -> bool:
        """True when fmcluster makes a cluster placement group for this group (`placement_group: true`)."""
        return self.placement_group is True


def _label(value: str) -> str:
    """`value` if it is a label (`IMAGE_REFRESH_PATTERN`: image_refresh, node_image_version), else the error."""
    if not IMAGE_REFRESH_PATTERN.match(value):
        raise fail(f"must be 1-64 letters, digits, '.', '_' or '-' (a label such as 2026-12-01); got {value!r}")
    return value


def _orchestrator_rules(info: ValidationInfo) -> ModuleType | None:
    """The seam module of the `orchestrator.type` validated before this key (`config.orchestrators`), None when the
    type itself was refused (its error is shown; the rules of one orchestrator are not judged)."""
    kind = info.data.get("type")
    return orchestrators.of(kind) if kind is not None else None


def _orchestrator_takes(rules: ModuleType | None, value: object, info: ValidationInfo) -> object:
    """`value` of the key being validated, or the error of the orchestrator's `setting_problem`."""
    if rules is not None and (problem := rules.setting_problem(info.field_name, value, info.data)):
        raise fail(problem)
    return value


class Orchestrator(_Model):
    """`orchestrator`: who runs Slurm."""

    type: Literal["hyperpod-slurm", "pcs"] = "hyperpod-slurm"
    controller_instance_type: str = "m5.4xlarge"
    login_instance_type: str | None = None
    slurm_version: str | None = Field(None, validate_default=True)
    ami_id: str | None = None
    image_refresh: str | None = None
    node_image: Literal["boot", "baked"] = "boot"
    node_image_version: str | None = None
    size: Literal["small", "medium", "large"] | None = None
    accounting: bool = True
    accounting_enforce: bool = False

    @field_validator("slurm_version", mode="before")
    @classmethod
    def _slurm_version(cls, value: object, info: ValidationInfo) -> object:
        rules = _orchestrator_rules(info)
        if value is None:
            return rules.DEFAULT_SLURM_VERSION if rules is not None else None
        if isinstance(value, float):
            value = f"{value:.2f}"  # YAML reads 25.11 as a number
        return _orchestrator_takes(rules, value, info)

    @field_validator("ami_id", "image_refresh", "node_image", "size", "accounting", "accounting_enforce")
    @classmethod
    def _orchestrator_setting(cls, value: object, info: ValidationInfo) -> object:
        """The orchestrator's rules of its own keys, judged before each key's shared form below."""
        return _orchestrator_takes(_orchestrator_rules(info), value, info) if value is not None else None

    @field_validator("ami_id")
    @classmethod
    def _ami(cls, value: str | None) -> str | None:
        if value is not None and not AMI_ID_PATTERN.match(value):
            raise fail(f"must be an AMI id like ami-0123456789abcdef0; got {value!r}")
        return value

    @field_validator("image_refresh")
    @classmethod
    def _image_refresh(cls, value: str | None) -> str | None:
        return None if value is None else _label(value)

    @field_validator("node_image_version")
    @classmethod
    def _node_image_version(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        if info.data.get("node_image") != "baked":
            raise fail("only with orchestrator.node_image: baked: it labels the baked image's build")
        return _label(value)

    @field_validator("accounting_enforce")
    @classmethod
    def _accounting_enforce(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("accounting") is False:
            raise fail("needs orchestrator.accounting: true (AccountingStorageEnforce checks the accounting database)")
        return value

    @field_validator("controller_instance_type", "login_instance_type")
    @classmethod
    def _ec2_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value.startswith("ml."):
            raise fail(f"give the EC2 name {value[3:]!r}; HyperPod's 'ml.' prefix is added for you")
        if not EC2_TYPE_PATTERN.match(value):
            raise fail(f"must be an EC2 instance type like m5.4xlarge; got {value!r}")
        return value


class Repository(_Model):
    """One entry of `storage.lustre.repositories`: a data repository association (Lustre path <-> S3)."""

    path: str
    s3_uri: str | None = None
    import_: tuple[RepositoryEvent, ...] = Field(("new", "changed", "deleted"), alias="import")
    export: tuple[RepositoryEvent, ...] = ()

    @field_validator("import_", "export", mode="before")
    @classmethod
    def _events(cls, value: object) -> object:
        return _without_repeats(value)

    @field_validator("path")
    @classmethod
    def _lustre_path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise fail(f"must be an absolute Lustre path like /datasets; got {value!r}")
        if value.rstrip("/") == "":
            raise fail("must not be '/': link a directory such as /datasets, not the file system's root")
        if not LUSTRE_PATH_PATTERN.match(value) or "/../" in value + "/" or "/./" in value + "/":
            raise fail(f"must be a plain absolute path of letters, digits, '.', '_', '-' and '/'; got {value!r}")
        return value.rstrip("/")

    @field_validator("s3_uri")
    @classmethod
    def _s3(cls, value: str | None) -> str | None:
        if value is None:
            return None
        match = S3_URI_PATTERN.match(value)
        if not match or ".." in match["bucket"]:
            raise fail(f"must be an S3 URI like s3://my-bucket/prefix/ with a valid bucket name; got {value!r}")
        return value


EXISTING_FILE_SYSTEM_KEYS = ("dns_name", "mount_name", "security_group_id")
"""What a mount of an existing file system needs, read from the file (never looked up at synth)."""
CREATED_FILE_SYSTEM_KEYS = ("throughput_per_tib", "capacity_gib", "compression", "metadata_iops", "repositories")
"""Keys that shape a file system fmcluster creates: refused with `file_system_id`."""


class Lustre(_Model):
    """`storage.lustre`: FSx for Lustre, PERSISTENT_2, SSD, created by fmcluster; or, with `file_system_id`, an
    existing one that is only mounted."""

    file_system_id: str | None = None
    dns_name: str | None = None
    mount_name: str | None = None
    security_group_id: str | None = None
    throughput_per_tib: Literal[125, 250, 500, 1000] = 250
    efa: bool = False
    capacity_gib: int = Field(4800, validate_default=True)
    compression: Literal["lz4", "none"] = "lz4"
    metadata_iops: int | None = None
    repositories: Annotated[tuple[Repository, ...], Field(max_length=8)] = ()

    @field_validator("repositories", mode="before")
    @classmethod
    def _list(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("file_system_id")
    @classmethod
    def _file_system_id(cls, value: str | None) -> str | None:
        if value is not None and not FILE_SYSTEM_ID_PATTERN.match(value):
            raise fail(f"must be an FSx file system id like fs-0123456789abcdef0; got {value!r}")
        return value

    @field_validator("dns_name")
    @classmethod
    def _dns_name(cls, value: str | None) -> str | None:
        if value is not None and (problem := lustre_dns_name_problem(value)):
            raise fail(problem)
        return value

    @field_validator("mount_name")
    @classmethod
    def _mount_name(cls, value: str | None) -> str | None:
        if value is not None and (problem := lustre_mount_name_problem(value)):
            raise fail(problem)
        return value

    @field_validator("security_group_id")
    @classmethod
    def _security_group_id(cls, value: str | None) -> str | None:
        if value is not None and not SECURITY_GROUP_ID_PATTERN.match(value):
            raise fail(f"must be a security group id like sg-0123456789abcdef0; got {value!r}")
        return value

    @model_validator(mode="after")
    def _existing_or_created(self) -> Lustre:
        """With `file_system_id`: the mount's keys are required and the keys of a created file system refused;
        without it, the mount's keys are refused."""
        given = self.model_fields_set
        if self.file_system_id is not None:
            required = (
                "required with storage.lustre.file_system_id "
                "(what a mount needs: aws fsx describe-file-systems shows it)"
            )
            created = "only for a file system fmcluster creates; an existing one (file_system_id) is mounted as it is"
            problems = [(key, required) for key in EXISTING_FILE_SYSTEM_KEYS if key not in given]
            problems += [(key, created) for key in CREATED_FILE_SYSTEM_KEYS if key in given]
        else:
            problems = [
                (key, "only with storage.lustre.file_system_id") for key in EXISTING_FILE_SYSTEM_KEYS if key in given
            ]
        if problems:
            raise ValidationError.from_exception_data(
                "Lustre",
                [
                    InitErrorDetails(type=fail(message), loc=(key,), input=getattr(self, key))
                    for key, message in problems
                ],
            )
        return self

    @property
    def existing(self) -> bool:
        """An existing file system, mounted only (nothing of it is created or retained)."""
        return self.file_system_id is not None

    @field_validator("capacity_gib")
    @classmethod
    def _capacity(cls, value: int, info: ValidationInfo) -> int:
        if problem := lustre_capacity_problem(value):
            raise fail(problem)
        tier = info.data.get("throughput_per_tib")
        creates = info.data.get("file_system_id") is None  # an existing file system's size is its own
        if creates and info.data.get("efa") and tier in LUSTRE_EFA_CAPACITY_STEP_GIB:
            step = LUSTRE_EFA_CAPACITY_STEP_GIB[tier]
            if value % step:
                raise fail(
                    f"an EFA-enabled file system at {tier} MB/s/TiB needs a multiple of {step} GiB; got {value} "
                    f"(use {-(-value // step) * step}"
                    + (", or throughput_per_tib: 1000 for steps of 4800)" if tier != 1000 else ")")
                )
        return value

    @field_validator("metadata_iops")
    @classmethod
    def _iops(cls, value: int | None) -> int | None:
        if value is None:
            return None
        if value in (1500, 3000, 6000, 12000) or (value % 12000 == 0 and 12000 <= value <= 192000):
            return value
        raise fail(f"must be 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000; got {value}")


def is_lustre_capacity(gib: int) -> bool:
    """FSx for Lustre PERSISTENT_2 SSD sizes: 1200, 2400, then multiples of 2400 GiB."""
    return gib in (1200, 2400) or (gib > 0 and gib % 2400 == 0)


def lustre_capacity_problem(gib: int) -> str | None:
    """A size FSx for Lustre does not make (`is_lustre_capacity`), with the nearest it does.

    >>> lustre_capacity_problem(3600)
    'must be 1200, 2400 or a multiple of 2400 GiB; got 3600 (nearest: 2400 or 4800)'
    """
    if is_lustre_capacity(gib):
        return None
    below = [c for c in (1200, 2400, gib // 2400 * 2400) if 0 < c < gib]
    nearest = f"{max(below)} or {next_lustre_capacity(gib)}" if below else "1200"
    return f"must be 1200, 2400 or a multiple of 2400 GiB; got {gib} (nearest: {nearest})"


def next_lustre_capacity(gib: int) -> int:
    """The smallest valid FSx for Lustre capacity above `gib`."""
    return 1200 if gib < 1200 else 2400 if gib < 2400 else (gib // 2400 + 1) * 2400


NO_FILE_SYSTEM = "none"
"""`storage.lustre: none`: a cluster without a shared file system. Said explicitly, never by leaving the section out:
a file without `storage.lustre` has always meant the default file system, and reading it as "none" would make the next
deploy of such a file take the file system away from a running cluster (homes, the imported training image and
checkpoints on /fsx)."""


class Storage(_Model):
    """`storage`: the shared file system (None with `lustre: none`) and what happens to data on `cdk destroy`."""

    lustre: Lustre | None = Lustre()
    retain_on_delete: bool = True

    @field_validator("lustre", mode="before")
    @classmethod
    def _no_file_system(cls, value: object) -> object:
        if value == NO_FILE_SYSTEM:
            return None
        if not isinstance(value, dict | Lustre):
            raise fail(
                f"must be the file system's settings (a mapping), or {NO_FILE_SYSTEM!r} for a cluster without a "
                f"shared file system; got {value!r}"
            )
        return value

    @property
    def creates_file_system(self) -> bool:
        """fmcluster creates (and by default retains) the file system: not with `lustre: none` or `file_system_id`."""
        return self.lustre is not None and not self.lustre.existing

    @property
    def repositories(self) -> tuple[Repository, ...]:
        """The file system's S3 links; none without a file system."""
        return self.lustre.repositories if self.lustre is not None else ()


MAX_MODEL_PARAMETERS = 1e15


def _parameter_count(value: object) -> object:
    """'70B' -> 7e10; numbers pass through; anything else is left for the type check to reject."""
    if isinstance(value, bool):
        return value
    count = value
    if isinstance(value, int | float):
        count = float(value)
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KkMBbT]?)\s*", value)
        if not match:
            raise fail(f"must be a parameter count like 7B, 70B, 1.5T or 7e9; got {value!r}")
        scale = {"": 1, "K": 1e3, "k": 1e3, "M": 1e6, "B": 1e9, "b": 1e9, "T": 1e12}[match[2]]
        count = float(match[1]) * scale
    if isinstance(count, float) and not count < MAX_MODEL_PARAMETERS:  # also catches inf and nan
        raise fail(f"must be a parameter count below 1e15 (1000T); got {value!r}")
    return count


class Training(_Model):
    """`training`: sizing inputs for `fmcluster plan` and the checkpoint-time warning."""

    model_parameters: Annotated[float, BeforeValidator(_parameter_count), Field(gt=0)]
    checkpoint_write_seconds: Annotated[int, Field(ge=1)] = 120


def _nccl_key(key: str) -> str:
    if not nccl.ENV_KEY_PATTERN.match(key):
        raise fail(f"{key!r} is not an NCCL or libfabric variable; keys must match {nccl.ENV_KEY_PATTERN.pattern}")
    return key


def _env_value(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, bool):
        raise fail(f"must be a string or a whole number; got {value!r} (quote it: YAML reads yes/no/true as booleans)")
    return value


class Nccl(_Model):
    """`nccl`: extra or overriding NCCL/libfabric variables for every training job."""

    env: dict[Annotated[str, AfterValidator(_nccl_key)], Annotated[str, BeforeValidator(_env_value)]] = {}


# --- the training image --------------------------------------------------------------------------------------------
# One released, mutually compatible set for current P5/P6 (Hopper, Blackwell B200 and B300):
# - base_image: AWS Deep Learning Containers' CUDA 13.0.0 base for EC2 on Ubuntu 22.04 (CUDA toolkit, cuDNN 9.13,
#   Python 3.12 with pip, build tools), listed with this ECR Public URI in aws/deep-learning-containers
#   docs/releasenotes/base/base-13.0-gpu-ec2.md (the Dockerfile checks its nvcc release before anything else).
#   It sits on Amazon ECR Public, not Docker Hub: CodeBuild reaches Docker Hub from addresses shared with other AWS
#   customers, so anonymous pulls run into Docker Hub's 100-pulls-per-6-hours limit ("toomanyrequests") however
#   rarely one project builds. ECR Public is AWS's own registry, its quotas are per second and per account, and the
#   buildspec signs in to it for the higher authenticated ones. The EFA 1.44.0 and NCCL 2.27.7 it ships are
#   replaced by the pinned versions below.
# - cuda 13.0: the base's toolkit; PyTorch publishes CUDA 13.0 wheels since 2.9 (PyTorch 2.9 release notes,
#   index download.pytorch.org/whl/cu130); CUDA 13.0 compiles for sm_90 (H100/H200), sm_100 (B200) and sm_103
#   (B300; added in CUDA 12.9, unconfirmed). Nodes need an NVIDIA driver of the R580 branch or later (CUDA 13.0
#   toolkit release notes).
# - pytorch 2.14.1: a patch release whose PyPI wheel for Linux x86_64 is the CUDA 13.0 build (its metadata pins
#   cuda-toolkit 13.0.3 and nvidia-nccl-cu13 2.30.7, read with `pip install --dry-run --report`, 2026-11).
# - efa_installer 1.50.0, aws_ofi_nccl 1.21.1, nccl 2.31.2: the set AWS pins for nccl-tests on P5/P6
#   (awslabs/awsome-distributed-ai micro-benchmarks/nccl-tests README and buildspec.yaml): EFA installer 1.50.0 bundles
#   aws-ofi-nccl 1.21.1 (libfabric 2.6.0amzn1.0), whose release notes name NCCL 2.31.2-1 as tested. NCCL 2.31.2 is
#   also published as nvidia-nccl-cu13 on PyPI. The same set is fmcluster.nccl's default for the NCCL tuning.
DEFAULT_BASE_IMAGE = "public.ecr.aws/deep-learning-containers/base:13.0.0-gpu-py312-cu130-ubuntu22.04-ec2"
DEFAULT_CUDA_VERSION = "13.0"
DEFAULT_PYTORCH_VERSION = "2.14.1"
DEFAULT_EFA_INSTALLER_VERSION = "1.50.0"
DEFAULT_AWS_OFI_NCCL_VERSION = "1.21.1"
DEFAULT_NCCL_VERSION = "2.31.2"

IMAGE_VERSION_PATTERN = re.compile(r"^\d+(\.\d+){1,3}(-\d+)?$")
CONTAINER_IMAGE_PATTERN = re.compile(
    r"^(?:(?P<registry>[a-zA-Z0-9.-]+(?::\d+)?)/)?"
    r"(?P<path>[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)
"""A container image reference: [registry/]path[:tag][@sha256:digest] (the Docker distribution reference grammar)."""

P5_MIN_CUDA = (12, 0, 0)
"""cuda>=12.0 on P5-class instances (aws-ofi-nccl doc/efa-env-var.md, "p5.48xlarge"). The NCCL, plugin and EFA
installer floors of that list live in `fmcluster.nccl` (`floor_problems`, `floor_warnings`)."""
IMAGE_KEY_OF_NCCL_PROP = {
    "nccl_version": "nccl",
    "ofi_nccl_version": "aws_ofi_nccl",
    "efa_installer_version": "efa_installer",
}
"""`fmcluster.nccl`'s version names -> this section's keys."""
BLACKWELL_MIN_CUDA = (12, 8, 0)
"""Blackwell (p6*) needs CUDA 12.8 or later, the first toolkit for sm_100 (CUDA 12.8 release notes; issue 6)."""
MIN_AWS_OFI_NCCL = (1, 6, 0)
"""The oldest plugin the image builds: older ones need FI_PROVIDER=efa and NCCL_PROTO=simple set by hand
(aws-ofi-nccl doc/efa-env-var.md), which an image cannot set for some plugins and not others."""
MIN_PYTORCH_FOR_CUDA = (((13, 0, 0), (2, 9, 0), "2.9"), ((12, 8, 0), (2, 7, 0), "2.7"))
"""The first PyTorch with wheels for a CUDA line: CUDA 12.8 in 2.7 (the Blackwell release), 13.0 in 2.9."""
MIN_NCCL_FOR_CUDA_13 = (2, 27, 7)
"""NCCL builds for CUDA 13 from 2.27.7 on (the first release of nvidia-nccl-cu13 on PyPI; DLC CUDA 13.0 base)."""

_IMAGE_VERSION_SHAPES = {
    "cuda": (re.compile(r"^\d+\.\d+(\.\d+)?$"), 'major.minor, e.g. "13.0"'),
    "pytorch": (re.compile(r"^\d+\.\d+\.\d+$"), 'major.minor.patch, e.g. "2.14.1"'),
    "efa_installer": (re.compile(r"^\d+\.\d+\.\d+$"), 'major.minor.patch, e.g. "1.50.0"'),
    "aws_ofi_nccl": (re.compile(r"^\d+\.\d+\.\d+$"), 'major.minor.patch, e.g. "1.21.1"'),
    "nccl": (re.compile(r"^\d+\.\d+\.\d+(-\d+)?$"), 'major.minor.patch with an optional -N, e.g. "2.31.2"'),
}


def version_tuple(text: str) -> tuple[int, int, int]:
    """'2.31.2-1' -> (2, 31, 2); '13.0' -> (13, 0, 0). The text must match IMAGE_VERSION_PATTERN."""
    numbers = [int(part) for part in text.split("-", 1)[0].split(".")]
    return (*numbers, 0, 0)[:3]  # type: ignore[return-value]


def _show_version(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def _image_version(key: str) -> Callable[[object], object]:
    """A before-validator for one version key: YAML numbers where they are safe, the version shapes otherwise.

    YAML reads an unquoted 12.8 as a number, and numbers lose trailing zeros (2.10 becomes 2.1). `cuda` is the one
    key whose versions have two parts, and its minor versions are single digits (12.0-12.9, 13.x), so a number with
    exactly one decimal (12.8, 13.0) is read as that version. Any other number is refused with a request to quote
    it: three-part versions cannot be numbers at all, and a number with two or more decimals is no CUDA version.
    """
    shape, example = _IMAGE_VERSION_SHAPES[key]

    def before(value: object) -> object:
        if isinstance(value, bool):
            return value  # strict str rejects it: "must be a string (quote it)"
        if isinstance(value, float):
            text = repr(value)
            if key == "cuda" and re.fullmatch(r"\d+\.\d", text):
                return text
            dropped = "13.10 becomes 13.1" if key == "cuda" else "2.10 becomes 2.1"
            raise fail(
                f"YAML read {text} as a number; quote the version ({example}): numbers drop trailing zeros ({dropped})"
            )
        if isinstance(value, int):
            raise fail(f"must be a quoted version, {example}; got the number {value}")
        if isinstance(value, str) and not (IMAGE_VERSION_PATTERN.match(value) and shape.match(value)):
            raise fail(f"must be a version of the form {example}; got {value!r}")
        return value

    return before


class Image(_Model):
    """`image`: the PyTorch training image fmcluster builds into ECR (base image and pinned versions)."""

    base_image: str = DEFAULT_BASE_IMAGE
    cuda: Annotated[str, BeforeValidator(_image_version("cuda"))] = DEFAULT_CUDA_VERSION
    pytorch: Annotated[str, BeforeValidator(_image_version("pytorch"))] = DEFAULT_PYTORCH_VERSION
    efa_installer: Annotated[str, BeforeValidator(_image_version("efa_installer"))] = DEFAULT_EFA_INSTALLER_VERSION
    aws_ofi_nccl: Annotated[str, BeforeValidator(_image_version("aws_ofi_nccl"))] = DEFAULT_AWS_OFI_NCCL_VERSION
    nccl: Annotated[str, BeforeValidator(_image_version("nccl"))] = DEFAULT_NCCL_VERSION

    @field_validator("base_image")
    @classmethod
    def _reference(cls, value: str) -> str:
        if not CONTAINER_IMAGE_PATTERN.match(value) or not (":" in value.rsplit("/", 1)[-1] or "@" in value):
            raise fail(
                "must be a container image reference with a tag or digest, like "
                f"{DEFAULT_BASE_IMAGE} or nvcr.io/nvidia/cuda:13.0.2-devel-ubuntu24.04; got {value!r}"
            )
        return value

    @field_validator("cuda")
    @classmethod
    def _cuda_matches_base(cls, value: str, info: ValidationInfo) -> str:
        base_cuda = base_image_cuda(info.data.get("base_image") or "")
        if base_cuda and base_cuda != version_tuple(value)[:2]:
            raise fail(
                f"{value!r} differs from the CUDA {_show_version(base_cuda)} of base_image "
                f'{info.data["base_image"]}; set cuda: "{_show_version(base_cuda)}" or a base image of CUDA {value}'
            )
        return value

    @field_validator("pytorch")
    @classmethod
    def _pytorch_has_wheels(cls, value: str, info: ValidationInfo) -> str:
        cuda = info.data.get("cuda")
        if cuda is None:
            return value
        for cuda_line, minimum, shown in MIN_PYTORCH_FOR_CUDA:
            if version_tuple(cuda) >= cuda_line and version_tuple(value) < minimum:
                raise fail(
                    f"PyTorch {value} has no wheels for CUDA {cuda}; CUDA {_show_version(cuda_line[:2])} and later "
                    f'need PyTorch {shown} or later (e.g. "{DEFAULT_PYTORCH_VERSION}")'
                )
        return value

    @field_validator("aws_ofi_nccl")
    @classmethod
    def _plugin_selects_efa(cls, value: str) -> str:
        if version_tuple(value) < MIN_AWS_OFI_NCCL:
            raise fail(
                f"the training image builds aws-ofi-nccl 1.6.0 or later (older plugins need FI_PROVIDER=efa and "
                f'NCCL_PROTO=simple set by hand); got {value!r}, use "{DEFAULT_AWS_OFI_NCCL_VERSION}"'
            )
        return value

    @field_validator("nccl")
    @classmethod
    def _nccl_builds_with_cuda(cls, value: str, info: ValidationInfo) -> str:
        cuda = info.data.get("cuda")
        if cuda is not None and version_tuple(cuda) >= (13, 0, 0) and version_tuple(value) < MIN_NCCL_FOR_CUDA_13:
            raise fail(
                f"NCCL {value} does not build with CUDA {cuda}; CUDA 13 needs NCCL 2.27.7 or later "
                f'(e.g. "{DEFAULT_NCCL_VERSION}")'
            )
        return value

    def nccl_versions(self) -> NcclVersions:
        """The versions `fmcluster.nccl` judges (P5-class floors, plugin defaults, obsolete variables)."""
        return nccl.Versions(self.nccl, self.aws_ofi_nccl, self.efa_installer)

    def problems_for(self, instance_types: Iterable[str]) -> dict[str, str]:
        """Key -> message for each version too old for `instance_types` (P5-class floors, Blackwell's CUDA)."""
        types = sorted(set(instance_types))
        problems: dict[str, str] = {}
        p5_class = [name for name in types if name.startswith(nccl.P5_CLASS_FAMILIES)]
        if p5_class and version_tuple(self.cuda) < P5_MIN_CUDA:
            problems["cuda"] = (
                f"{self.cuda!r} is older than the {_show_version(P5_MIN_CUDA)} that P5-class instances "
                f"({', '.join(p5_class)}) need; use {_show_version(P5_MIN_CUDA)} or later "
                f'(default "{DEFAULT_CUDA_VERSION}")'
            )
        if p5_class:
            for floor in nccl.floor_problems(p5_class[0], self.nccl_versions()):
                problems[IMAGE_KEY_OF_NCCL_PROP[floor.path]] = floor.message
        blackwell = [name for name in types if name.startswith("p6")]
        if blackwell and version_tuple(self.cuda) < BLACKWELL_MIN_CUDA:
            problems["cuda"] = (
                f"{self.cuda!r} cannot build for Blackwell GPUs ({', '.join(blackwell)}): they need CUDA 12.8 or "
                f'later; use "{DEFAULT_CUDA_VERSION}" (with a base image of that CUDA)'
            )
        return problems


def base_image_cuda(reference: str) -> tuple[int, int] | None:
    """The CUDA major.minor a base image's tag names ('...:13.0.2-devel-ubuntu24.04' -> (13, 0)), else None."""
    match = CONTAINER_IMAGE_PATTERN.match(reference)
    tag = match["tag"] if match else None
    found = re.match(r"^(\d+)\.(\d+)(?:\.\d+)?(?:-|$)", tag or "")
    return (int(found[1]), int(found[2])) if found else None


class Observability(_Model):
    """`observability`: Prometheus, Grafana and where alarms go."""

    prometheus: Literal["managed", "none"] = "managed"
    grafana: Literal["self-hosted", "managed", "none"] = "self-hosted"
    alarm_email: str | None = None

    @field_validator("alarm_email")
    @classmethod
    def _email(cls, value: str | None) -> str | None:
        if value is not None and not EMAIL_PATTERN.match(value):
            raise fail(f"must be an email address like ops@example.com; got {value!r}")
        return value


def _tag_key(key: str) -> str:
    if key.lower().startswith("aws:"):
        raise fail(f"{key!r}: tag keys starting with 'aws:' are reserved by AWS")
    if not TAG_KEY_PATTERN.match(key):
        raise fail(f"{key!r}: tag keys are 1-128 letters, digits, spaces and _.:/=+-@")
    return key


def _tag_value(value: str) -> str:
    if not TAG_VALUE_PATTERN.match(value):
        raise fail(f"tag values are 0-256 letters, digits, spaces and _.:/=+-@; got {value!r}")
    return value


class User(_Model):
    """One entry of `users`: a Linux account with the same uid (and a group of its name, gid = uid) on every node,
    its home on the shared file system, and a Slurm association in the cluster's default account."""

    name: str
    uid: int
    ssh_key: str | None = None
    admin: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if problem := user_rules.user_name_problem(value):
            raise fail(problem)
        return value

    @field_validator("uid")
    @classmethod
    def _uid(cls, value: int) -> int:
        if problem := user_rules.uid_problem(value):
            raise fail(problem)
        return value

    @field_validator("ssh_key")
    @classmethod
    def _ssh_key(cls, value: str | None) -> str | None:
        if value is not None and (problem := user_rules.ssh_key_problem(value)):
            raise fail(problem)
        return value


def rendered_users(users: Iterable[User]) -> str:
    """`users` as every node receives them (`fmcluster.config.users.rendered`)."""
    return user_rules.rendered((user.name, user.uid, user.admin, user.ssh_key) for user in users)


class ClusterConfig(_Model):
    """A whole cluster file. Build it with `fmcluster.config.load(path)` or `parse(data)`."""

    name: str
    region: str
    account: str | None = None
    availability_zone_id: str
    secondary_availability_zone_id: str | None = None
    network: Network = Network()
    orchestrator: Orchestrator = Orchestrator()
    compute: Annotated[tuple[ComputeGroup, ...], Field(min_length=1, max_length=16)]
    storage: Storage = Storage()
    training: Training | None = None
    nccl: Nccl = Nccl()
    image: Image = Image()
    observability: Observability = Observability()
    compliance: Literal["baseline", "control-tower"] = "baseline"
    users: tuple[User, ...] = ()
    tags: dict[Annotated[str, AfterValidator(_tag_key)], Annotated[str, AfterValidator(_tag_value)]] = {}

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if problem := cluster_name_problem(value):
            raise fail(problem)
        return value

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if value not in REGIONS:
            hint = ""
            if AZ_NAME_PATTERN.match(value):
                hint = f" (that is an availability zone name; the region is {value[:-1]!r})"
            raise fail(f"must be an AWS region code like us-east-1; got {value!r}{hint}")
        return value

    @field_validator("account", mode="before")
    @classmethod
    def _account(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            raise fail(
                'must be a quoted string of 12 digits, e.g. "012345678901" (YAML drops leading zeros of numbers)'
            )
        if isinstance(value, str) and not re.fullmatch(r"\d{12}", value):
            raise fail(f"must be 12 digits; got {value!r}")
        return value

    @field_validator("availability_zone_id", "secondary_availability_zone_id")
    @classmethod
    def _az_id(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        region = info.data.get("region")
        if AZ_NAME_PATTERN.match(value):
            raise fail(
                f"{value!r} is an AZ name; give the AZ ID (like {az_id_prefix(region or 'us-east-1')}-az1): "
                "names map to different zones in each account, IDs do not "
                "(aws ec2 describe-availability-zones lists both)"
            )
        if not AZ_ID_PATTERN.match(value):
            raise fail(f"must be an AZ ID like use1-az6; got {value!r}")
        if region:
            owner = region_of_az_id(value)
            if value.split("-az", 1)[0] != az_id_prefix(region):
                where = f"is in {owner}" if owner else "belongs to no known region"
                raise fail(f"{value!r} {where}, not in region {region} (its AZ IDs start with {az_id_prefix(region)}-)")
        if info.field_name == "secondary_availability_zone_id" and value == info.data.get("availability_zone_id"):
            raise fail(f"must differ from availability_zone_id; both are {value!r}")
        return value

    @field_validator("compute", mode="before")
    @classmethod
    def _list(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("image")
    @classmethod
    def _image_fits_compute(cls, value: Image, info: ValidationInfo) -> Image:
        """The P5-class version floors and Blackwell's CUDA, for the compute groups' instance types."""
        groups = info.data.get("compute") or ()
        problems = value.problems_for(group.instance_type for group in groups)
        if problems:
            raise ValidationError.from_exception_data(
                "Image",
                [
                    InitErrorDetails(type=fail(message), loc=(key,), input=getattr(value, key))
                    for key, message in problems.items()
                ],
            )
        return value

    @field_validator("users", mode="before")
    @classmethod
    def _users_list(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("users")
    @classmethod
    def _users_unique(cls, value: tuple[User, ...], info: ValidationInfo) -> tuple[User, ...]:
        orchestrator = info.data.get("orchestrator")
        if orchestrator is not None and (problem := orchestrators.of(orchestrator.type).users_problem(value)):
            raise fail(problem)
        details = []
        for key in ("name", "uid"):
            seen: dict[object, int] = {}
            for index, user in enumerate(value):
                given = getattr(user, key)
                if given in seen:
                    message = f"{given!r} is users[{seen[given]}].{key} already; every user needs its own {key}"
                    details.append(InitErrorDetails(type=fail(message), loc=(index, key), input=given))
                else:
                    seen[given] = index
        if details:
            raise ValidationError.from_exception_data("User", details)
        if problem := user_rules.size_problem(rendered_users(value)):
            raise fail(problem)
        return value

    @field_validator("tags")
    @classmethod
    def _tag_count(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > 40:
            raise fail(f"at most 40 tags (AWS allows 50 per resource and fmcluster adds its own); got {len(value)}")
        return value

    @property
    def total_nodes(self) -> int:
        return sum(group.count for group in self.compute)

    @property
    def pcs_size(self) -> str:
        """`orchestrator.size`, or the default for the compute nodes and the head node (PCS files only)."""
        if self.orchestrator.size is not None:
            return self.orchestrator.size
        return pcs.default_size(pcs.nodes(self.orchestrator, self.observability, self.total_nodes))
