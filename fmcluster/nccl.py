"""NCCL over EFA: the environment a training job needs, per instance type and software versions.

`nccl_environment()` answers "which variables must a job set?" for one instance type and one set of versions of
NCCL, the aws-ofi-nccl plugin and the EFA installer:

* what is still needed: `NCCL_SOCKET_IFNAME=^docker,lo,veth` (NCCL's bootstrap sockets stay off container,
  loopback and veth links; EFA devices are not IP interfaces, so never an `rdmap*` name), on EFA GPU instances
  `NCCL_NET` naming the aws-ofi-nccl plugin (`net_plugin_name`: NCCL then fails rather than silently running over
  its Socket transport when the plugin cannot load), and, for plugins
  older than 1.7, the variables those plugins relied on users for (the presets of aws-ofi-nccl
  `doc/efa-env-var.md`);
* nothing the plugin already sets for itself on that instance type at that version (`plugin_defaults()`):
  setting one overrides a choice the plugin makes per platform;
* no obsolete variable (`obsolete_variables()` names each one and why);
* the floors of P5-class instances (p5*, p6*): below a stated requirement a ValueError (`floor_problems`), between
  the requirement and the recommendation a warning (`floor_warnings`);
* the user's own variables (the cluster file's `nccl.env`) laid over all of that, winning every conflict.

`obsolete_variables()` checks any environment (the user's, or an existing job's) and returns one warning per
variable to remove, with the reason.

Sources (aws/aws-ofi-nccl at tag v1.21.1, the default plugin version, unless another version is named):
  [doc]  aws/aws-ofi-nccl doc/efa-env-var.md (the EFA cheatsheet: presets by plugin version, obsolete variables)
  [src]  aws/aws-ofi-nccl src/platform-aws.cpp (`platform_data_map`: per-platform env; `configure_nvls_option`,
         `configure_tuner`, FI_EFA_FORK_SAFE, OFI_NCCL_SKIP_NICS_WITHOUT_ACCEL_AT_SAME_PCI_LEVEL on p6e-gb200;
         include/nccl_ofi_param.h names the parameter SKIP_NICS_WITHOUT_ACCEL_AT_SAME_PCI_LEVEL)
  [rel]  aws/aws-ofi-nccl RELEASENOTES.md: v1.16.0 "NCCL_BUFFSIZE, NCCL_P2P_NET_CHUNKSIZE,
         NCCL_NVLSTREE_MAX_CHUNKSIZE, NCCL_NVLS_CHUNKSIZE, NCCL_NET_FORCE_FLUSH may be set by the plugin" and
         "enable collective algorithm tuner by default"; v1.16.1 SKIP_NICS_WITHOUT_ACCEL
  [pr]   aws/aws-ofi-nccl PR #932 (2025-06-18, always set NCCL_TUNER_PLUGIN; merged before the v1.16.0 release PR
         #941 of 2025-06-27), PR #1005 (2025-09-19, NCCL_NETDEVS_POLICY=max:1 on P5en/P6-B200; merged before
         the v1.17.0 release PR #1010 of 2025-09-26)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from fmcluster import catalog
from fmcluster.problems import Problem, raise_if_any, warning

# --- default versions ---------------------------------------------------------------------------------------------
# One mutually compatible, released set for current P5/P6 instances: the set the AWS nccl-tests sample pins
# (awslabs/awsome-distributed-ai micro-benchmarks/nccl-tests/README.md and nccl-tests.Dockerfile, 2026): EFA
# installer 1.50.0 bundles aws-ofi-nccl 1.21.1 (and libfabric 2.6.0amzn1.0), and NCCL 2.31.2-1 is the release the
# aws-ofi-nccl 1.21.1 notes name as tested. The bundling and the "tested with" claim come second-hand from that
# README, which cites the EFA changelog and the plugin's release notes (unconfirmed against those two directly).
# Each release exists: NCCL v2.31.2-1 (coreweave/nccl-tests PR #98, 2026-08-13), aws-ofi-nccl v1.21.1
# (HewlettPackard/shs-ccl-docs PR #37, 2026-08-25), EFA installer 1.50.0 (its tarball resolves; awsome-distributed-ai
# PR #1240 review, 2026-08-25).
DEFAULT_NCCL_VERSION = "2.31.2"
DEFAULT_OFI_NCCL_VERSION = "1.21.1"
DEFAULT_EFA_INSTALLER_VERSION = "1.50.0"

SOCKET_IFNAME = "^docker,lo,veth"
"""NCCL's bootstrap and socket traffic: anything but docker, loopback and veth links ([doc]; the AWS samples)."""

ENV_KEY_PATTERN = re.compile(r"^(NCCL|FI|OFI_NCCL)_[A-Z0-9_]+$")
"""Variable names the nodes accept from SSM (fmcluster/node/nccl-env.sh); the cluster file's `nccl.env` keys."""

Version = tuple[int, int, int]
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:-(?:\d+|aws))?$")


def parse_version(value: str, what: str) -> Version:
    """'2.27.7-1', 'v2.27.7-1', '1.13.2-aws', '1.29' -> (major, minor, patch); ValueError names `what`."""
    match = _VERSION.match(value.strip()) if isinstance(value, str) else None
    if not match:
        raise ValueError(
            f"{what}: must be a release version like 1.2.3 (a leading 'v' and a '-1' or '-aws' suffix are "
            f"accepted); got {value!r}"
        )
    return int(match[1]), int(match[2]), int(match[3] or 0)


def _show(version: Version) -> str:
    return ".".join(map(str, version))


@dataclass(frozen=True)
class Versions:
    """The versions of NCCL, the aws-ofi-nccl plugin and the EFA installer in a training image."""

    nccl: str = DEFAULT_NCCL_VERSION
    ofi_nccl: str = DEFAULT_OFI_NCCL_VERSION
    efa_installer: str = DEFAULT_EFA_INSTALLER_VERSION

    def __post_init__(self) -> None:
        problems = []
        for what, value in (("nccl_version", self.nccl), ("ofi_nccl_version", self.ofi_nccl)):
            try:
                parse_version(value, what)
            except ValueError as error:
                problems.append(str(error))
        try:
            parse_version(self.efa_installer, "efa_installer_version")
        except ValueError as error:
            problems.append(str(error))
        if problems:
            raise ValueError("\n".join(problems))

    @property
    def nccl_v(self) -> Version:
        return parse_version(self.nccl, "nccl_version")

    @property
    def ofi_nccl_v(self) -> Version:
        return parse_version(self.ofi_nccl, "ofi_nccl_version")

    @property
    def efa_installer_v(self) -> Version:
        return parse_version(self.efa_installer, "efa_installer_version")


# --- version floors -----------------------------------------------------------------------------------------------
P5_CLASS_FAMILIES = ("p5", "p6")
"""Families the P5 floors apply to: p5, p5e, p5en, p6-b200, p6-b300, p6e-gb200 (NVSwitch with NVLS, EFA v2+)."""


@dataclass(frozen=True)
class Floor:
    prop: str
    minimum: Version
    """The stated requirement: below it, fail."""
    recommended: Version
    """The stated recommendation: between `minimum` and this, warn."""
    why: str


P5_FLOORS = (
    Floor(
        "nccl_version",
        (2, 18, 0),
        (2, 18, 5),
        "below 2.18.5 the plugin disables NVLS on NVLink Switch platforms; aws-ofi-nccl doc/efa-env-var.md",
    ),
    Floor("ofi_nccl_version", (1, 7, 2), (1, 7, 3), "aws-ofi-nccl doc/efa-env-var.md, p5.48xlarge"),
    Floor(
        "efa_installer_version",
        (1, 29, 0),
        (1, 29, 0),
        "older EFA installers make NCCL >= 2.19 raise libfabric errors; aws-ofi-nccl doc/efa-env-var.md",
    ),
)
"""aws-ofi-nccl doc/efa-env-var.md, "p5.48xlarge": "nccl>=2.18.0 (recommend at least 2.18.5)", "aws-ofi-nccl>=1.7.2
(recommend at least 1.7.3)", efa-installer>=1.29.0. CUDA >= 12 is the image's business (not an input here)."""


def is_p5_class(instance: catalog.InstanceType) -> bool:
    return instance.family.startswith(P5_CLASS_FAMILIES)


def is_nvidia(instance: catalog.InstanceType) -> bool:
    return instance.accelerator.startswith("NVIDIA")


def gpudirect_rdma(instance: catalog.InstanceType) -> bool:
    """EFA with GPUDirect RDMA: the p4 and later P families ([doc] "Sample Presets"; P6 carries it too)."""
    return instance.supports_efa and instance.family.startswith(("p4", "p5", "p6"))


# --- what the plugin sets itself ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PluginDefault:
    """A variable aws-ofi-nccl sets when the user has not, on some instance types, from some version on."""

    name: str
    value: str
    since: Version
    applies: Callable[[catalog.InstanceType], bool]
    where: str


def _types(*names: str) -> Callable[[catalog.InstanceType], bool]:
    return lambda instance: instance.name in names


def _efa_nvidia(instance: catalog.InstanceType) -> bool:
    return instance.supports_efa and is_nvidia(instance)


_P4D = ("p4d.24xlarge", "p4de.24xlarge")
_P5_PLUS = (
    "p5.48xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "p6-b200.48xlarge",
    "p6-b300.48xlarge",
    "p6e-gb200.36xlarge",
)

PLUGIN_DEFAULTS: tuple[PluginDefault, ...] = (
    # [doc] FI_PROVIDER=efa was for aws-ofi-nccl <= 1.5.0; later plugins select the efa provider on AWS ([src]).
    PluginDefault("FI_PROVIDER", "efa", (1, 6, 0), lambda i: i.supports_efa, "every EFA instance"),
    # [doc] "all reasonably recent versions of the plugin (since at least v1.2) always set this flag"; [src] skips
    # it on Neuron (Trainium) platforms.
    PluginDefault("FI_EFA_FORK_SAFE", "1", (1, 2, 0), _efa_nvidia, "every EFA GPU instance"),
    # [rel] v1.16.0; [src] platform_data_map entries p4d/p4de, p5/p5e and "p-series" (p5en, p6*).
    PluginDefault("NCCL_BUFFSIZE", "8388608", (1, 16, 0), _types(*_P4D, *_P5_PLUS), "P4d and later"),
    PluginDefault("NCCL_P2P_NET_CHUNKSIZE", "524288", (1, 16, 0), _types(*_P4D, *_P5_PLUS), "P4d and later"),
    PluginDefault("NCCL_NVLSTREE_MAX_CHUNKSIZE", "524288", (1, 16, 0), _types(*_P5_PLUS), "P5 and later"),
    PluginDefault("NCCL_NVLS_CHUNKSIZE", "524288", (1, 16, 0), _types(*_P5_PLUS), "P5 and later"),
    PluginDefault("NCCL_NET_FORCE_FLUSH", "0", (1, 16, 0), _types(*_P5_PLUS), "P5 and later"),
    # [pr] #1005: P5en and P6-B200 have two GPUs and two NICs per PCIe switch.
    PluginDefault(
        "NCCL_NETDEVS_POLICY", "max:1", (1, 17, 0), _types("p5en.48xlarge", "p6-b200.48xlarge"), "P5en, P6-B200"
    ),
    # [pr] #932 / [rel] v1.16.0: the plugin names itself as the tuner (libnccl-net-ofi.so) when unset. Secondary
    # summaries date this 1.17; the merge dates put it in 1.16.0 (trusting the primary source).
    PluginDefault("NCCL_TUNER_PLUGIN", "(the plugin itself)", (1, 16, 0), _efa_nvidia, "every EFA GPU instance"),
    # [src] static topology files for P4d/P4de (long before 1.6; 1.6.0 is a safe lower bound).
    PluginDefault("NCCL_TOPO_FILE", "(the plugin's p4d topology)", (1, 6, 0), _types(*_P4D), "P4d, P4de"),
    # [rel] v1.16.1 added the parameter; [src] turns it on for p6e-gb200 (the version it did so from is unconfirmed).
    PluginDefault(
        "OFI_NCCL_SKIP_NICS_WITHOUT_ACCEL_AT_SAME_PCI_LEVEL", "1", (1, 16, 1), _types("p6e-gb200.36xlarge"), "P6e-GB200"
    ),
)


def _instance(instance_type: str) -> catalog.InstanceType:
    """The catalog row, or the general-purpose row of another type EC2 offers (no EFA: only the socket settings)."""
    from fmcluster.config.value_rules import hyperpod_prefix_problem, unknown_instance_type  # config imports nccl

    if not isinstance(instance_type, str):
        raise ValueError(f"unknown instance type {instance_type!r}: give an EC2 instance type name")
    if problem := hyperpod_prefix_problem(instance_type) or unknown_instance_type(instance_type):
        raise ValueError(problem)
    return catalog.lookup(instance_type)


def plugin_defaults(instance_type: str, versions: Versions) -> dict[str, str]:
    """The variables aws-ofi-nccl `versions.ofi_nccl` sets itself on `instance_type` when the job leaves them unset.

    The NCCL_NVLS_ENABLE=0 the plugin sets for NCCL < 2.18.5 is included for such NCCL versions ([src]).
    """
    instance = _instance(instance_type)
    plugin = versions.ofi_nccl_v
    found = {d.name: d.value for d in PLUGIN_DEFAULTS if plugin >= d.since and d.applies(instance)}
    if is_nvidia(instance) and instance.supports_efa and plugin >= (1, 7, 0) and versions.nccl_v < (2, 18, 5):
        found["NCCL_NVLS_ENABLE"] = "0"
    return found


# --- what the job must still set ----------------------------------------------------------------------------------
def net_plugin_name(versions: Versions) -> str:
    """The network name NCCL_NET must give to make NCCL use the aws-ofi-nccl plugin `versions.ofi_nccl` or fail.

    NCCL initializes only the network (plugin or internal: IB, Socket) whose name equals NCCL_NET, case aside, and
    with none left fails ("Failed to initialize any NET plugin", ncclInvalidUsage: NVIDIA/nccl src/plugin/net.cc
    `ncclNetInit`, v2.30.7-1; the snapshot holds no v2.31.2 tag, so the default NCCL's code is unconfirmed). Unset, a
    plugin that fails to load is skipped and NCCL silently takes its Socket transport over the ENA interface.
    The plugin's name ([nvidia], aws/aws-ofi-nccl src/nccl_ofi_interface_nvidia.c(pp)): "AWS Libfabric" up to
    v1.12.1-aws; "Libfabric" from v1.13.0-aws, whose `nvidia_plugin_name_fixup` also answers to NCCL_NET="AWS
    Libfabric" or "OFI" (still so at v1.21.1). "Libfabric" has no space for a shell or an env file to split.

    >>> net_plugin_name(Versions(ofi_nccl="1.21.1")), net_plugin_name(Versions(ofi_nccl="1.11.0-aws"))
    ('Libfabric', 'AWS Libfabric')
    """
    return "Libfabric" if versions.ofi_nccl_v >= (1, 13, 0) else "AWS Libfabric"


def _required(instance: catalog.InstanceType, versions: Versions, efa: bool = True) -> dict[str, str]:
    """[doc] "Sample Presets": what each plugin generation needs from the user, plus the socket interfaces; on EFA GPU
    instances NCCL_NET, so that NCCL fails instead of falling back to sockets (`net_plugin_name`). Not when the group
    runs without EFA (`efa: false` on an EFA type): with no EFA device aws-ofi-nccl fails to initialize, and
    NCCL_NET naming it would make NCCL fail every communicator ("Failed to initialize any NET plugin")."""
    env = {"NCCL_SOCKET_IFNAME": SOCKET_IFNAME}
    if not (efa and instance.supports_efa and is_nvidia(instance)):
        return env
    env["NCCL_NET"] = net_plugin_name(versions)
    plugin = versions.ofi_nccl_v
    if plugin < (1, 6, 0):  # aws-ofi-nccl <= 1.5.0
        env["FI_PROVIDER"] = "efa"
        env["NCCL_PROTO"] = "simple"
        if gpudirect_rdma(instance):
            env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    elif plugin < (1, 7, 0) and gpudirect_rdma(instance):  # aws-ofi-nccl >= 1.6.0, < 1.7.0 on p4/p5
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return env


def _floor_versions(instance_type: str, versions: Versions) -> list[tuple[Floor, str, Version]]:
    if not is_p5_class(_instance(instance_type)):
        return []
    given = {
        "nccl_version": (versions.nccl, versions.nccl_v),
        "ofi_nccl_version": (versions.ofi_nccl, versions.ofi_nccl_v),
        "efa_installer_version": (versions.efa_installer, versions.efa_installer_v),
    }
    return [(floor, *given[floor.prop]) for floor in P5_FLOORS]


def floor_problems(instance_type: str, versions: Versions) -> list[Problem]:
    """One problem per version below the P5-class requirement of `instance_type` (none for other types)."""
    return [
        Problem(
            floor.prop,
            f"P5-class instances (p5*, p6*) need {_show(floor.minimum)} or later; got {text!r} ({floor.why})",
            nearest=_show(floor.minimum),
        )
        for floor, text, version in _floor_versions(instance_type, versions)
        if version < floor.minimum
    ]


def floor_warnings(instance_type: str, versions: Versions) -> list[Problem]:
    """One warning per version that meets the P5-class requirement but not the recommendation.

    >>> floor_warnings("p5.48xlarge", Versions(nccl="2.18.3", ofi_nccl="1.7.3", efa_installer="1.29.0"))[0].path
    'nccl_version'
    """
    return [
        warning(
            floor.prop,
            f"aws-ofi-nccl recommends {_show(floor.recommended)} or later on P5-class instances (p5*, p6*); "
            f"got {text!r} ({floor.why})",
        )
        for floor, text, version in _floor_versions(instance_type, versions)
        if floor.minimum <= version < floor.recommended
    ]


def nccl_environment(
    instance_type: str,
    *,
    nccl_version: str,
    ofi_nccl_version: str,
    efa_installer_version: str,
    user_env: Mapping[str, str] = MappingProxyType({}),
    efa: bool = True,
) -> dict[str, str]:
    """The NCCL/libfabric environment a training job on `instance_type` needs with these versions.

    `efa=False`: the nodes have no EFA device (the group's `efa: false`), so nothing EFA-only (no NCCL_NET).

    What is still needed (`NCCL_SOCKET_IFNAME`; on EFA GPU instances `NCCL_NET`, so that a job whose NCCL cannot use
    the plugin fails instead of running over sockets; and the variables plugins before 1.7 relied on), nothing the
    plugin sets itself (`plugin_defaults`), no obsolete variable (`obsolete_variables`), then `user_env` on top: the
    user's value wins every conflict, obsolete or not (warn about those with `obsolete_variables`).

    >>> nccl_environment("p5.48xlarge", nccl_version="2.27.7", ofi_nccl_version="1.16.3",
    ...                  efa_installer_version="1.43.2", user_env={"NCCL_DEBUG": "WARN"})
    {'NCCL_SOCKET_IFNAME': '^docker,lo,veth', 'NCCL_NET': 'Libfabric', 'NCCL_DEBUG': 'WARN'}

    Raises ValueError naming every problem: an unknown instance type (with the known ones), a malformed version,
    a version below the P5-class requirements on p5*/p6* (NCCL 2.18.0, aws-ofi-nccl 1.7.2, EFA installer 1.29.0), a
    user variable the nodes would refuse (names must match ^(NCCL|FI|OFI_NCCL)_[A-Z0-9_]+$, values one line).
    """
    instance = _instance(instance_type)
    try:
        versions = Versions(nccl=nccl_version, ofi_nccl=ofi_nccl_version, efa_installer=efa_installer_version)
    except ValueError as error:
        raise ValueError(f"{instance.name}: {error}".replace("\n", f"\n{instance.name}: ")) from None
    raise_if_any(instance.name, floor_problems(instance.name, versions) + user_env_problems(user_env))
    env = _required(instance, versions, efa)
    env.update(user_env)
    return env


def user_env_problems(user_env: Mapping[str, str]) -> list[Problem]:
    """One problem per variable of `user_env` the nodes would refuse (bad name, or not a one-line string)."""
    if not isinstance(user_env, Mapping):
        return [Problem("user_env", f"must be a mapping of variable names to values; got {type(user_env).__name__}")]
    problems = []
    for name, value in user_env.items():
        if not isinstance(name, str) or not ENV_KEY_PATTERN.match(name):
            problems.append(
                Problem(
                    "user_env",
                    f"{name!r} is not an NCCL, libfabric or aws-ofi-nccl variable; names must match "
                    f"{ENV_KEY_PATTERN.pattern} (the nodes ignore the whole parameter otherwise)",
                )
            )
        elif not isinstance(value, str) or any(c in value for c in "\n\r\0"):
            problems.append(Problem("user_env", f"{name}: the value must be a one-line string; got {value!r}"))
    return problems


# --- what to remove -----------------------------------------------------------------------------------------------
NOT_FOR_EFA = ("NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD")
LEAVE_OUT = ("NCCL_MIN_CHANNELS", "NCCL_MIN_NCHANNELS")


def obsolete_variables(
    env: Mapping[str, str], versions: Versions, *, instance_type: str | None = None
) -> list[Problem]:
    """One warning per variable of `env` to remove with these versions (on `instance_type`, when given), and why.

    Version rules always apply; what the plugin sets for a given platform is checked only with `instance_type`.

    >>> [(found.path, found.message[:9]) for found in obsolete_variables({"FI_EFA_USE_DEVICE_RDMA": "1"}, Versions())]
    [('FI_EFA_USE_DEVICE_RDMA', 'remove it')]
    """
    instance = _instance(instance_type) if instance_type is not None else None
    plugin, nccl = versions.ofi_nccl_v, versions.nccl_v
    warnings = []
    needed = _required(instance, versions) if instance is not None else {}
    sets = plugin_defaults(instance.name, versions) if instance is not None else {}
    for name in sorted(env):
        value = str(env[name])
        why = _why_obsolete(name, value, plugin, nccl, instance, needed)
        if why is None and instance is not None and name in sets:
            why = (
                f"aws-ofi-nccl {versions.ofi_nccl} sets {name}={sets[name]} itself on {instance.name}; "
                "setting it overrides the plugin's per-platform choice (aws-ofi-nccl src/platform-aws.cpp)"
            )
        if why is None and name == "NCCL_BUFFSIZE":
            why = "NCCL's default buffer size is recommended with EFA (aws-ofi-nccl doc/efa-env-var.md)"
        if why is not None:
            warnings.append(warning(name, f"remove it; {why}"))
    return warnings


def _why_obsolete(
    name: str,
    value: str,
    plugin: Version,
    nccl: Version,
    instance: catalog.InstanceType | None,
    needed: Mapping[str, str],
) -> str | None:
    if name in needed and needed[name] == value and name != "NCCL_SOCKET_IFNAME":
        return None  # an old plugin still relies on it
    if name == "RDMAV_FORK_SAFE":
        return (
            "it is an rdma-core variable that can break things on newer kernels; the plugin sets FI_EFA_FORK_SAFE "
            "where it still matters (aws-ofi-nccl doc/efa-env-var.md)"
        )
    if name.startswith("RDMAV_"):
        return "rdma-core RDMAV_* variables are not for NCCL jobs (aws-ofi-nccl doc/efa-env-var.md)"
    if name == "FI_EFA_USE_DEVICE_RDMA" and plugin >= (1, 7, 0):
        return (
            "aws-ofi-nccl >= 1.7.0 with libfabric >= 1.18 enables GPUDirect RDMA itself "
            "(aws-ofi-nccl doc/efa-env-var.md)"
        )
    if name == "FI_EFA_ENABLE_SHM_TRANSFER":
        return "libfabric turns SHM transfer off itself for the plugin (aws-ofi-nccl doc/efa-env-var.md)"
    if name == "FI_PROVIDER" and value == "efa" and plugin >= (1, 6, 0):
        return "aws-ofi-nccl >= 1.6 selects the efa provider itself (it was for <= 1.5.0; doc/efa-env-var.md)"
    if name == "FI_EFA_FORK_SAFE" and plugin >= (1, 2, 0):
        return "the plugin sets it itself where it still matters (aws-ofi-nccl doc/efa-env-var.md)"
    if name == "NCCL_PROTO" and value.lower() == "simple" and plugin >= (1, 6, 0):
        return (
            "NCCL_PROTO=simple was for aws-ofi-nccl <= 1.5.0; newer plugins force the simple protocol themselves "
            "only where EFA lacks byte ordering (aws-ofi-nccl doc/efa-env-var.md, src/platform-aws.cpp)"
        )
    if name in ("NCCL_PROTO", "NCCL_ALGO") and plugin >= (1, 16, 0):
        return (
            "it overrides the aws-ofi-nccl tuner (on by default since 1.16.0), which picks the algorithm and "
            "protocol per message size; with NCCL < 2.21 the tuner refuses to load (aws/aws-ofi-nccl issue 982)"
        )
    if name == "NCCL_NVLS_ENABLE" and value == "0" and nccl >= (2, 18, 5):
        return (
            f"NVLS needs disabling only for NCCL < 2.18.5 (the plugin does it itself there); with NCCL "
            f"{_show(nccl)} it only costs NVLink SHARP bandwidth"
        )
    if name in NOT_FOR_EFA and (instance is None or instance.supports_efa):
        return "it tunes NCCL's socket transport and does not apply to EFA (aws-ofi-nccl doc/efa-env-var.md)"
    if name in LEAVE_OUT:
        return (
            "NCCL's default channel count is right for EFA; more channels split messages too small to keep EFA busy "
            "(aws-ofi-nccl doc/efa-env-var.md)"
        )
    if name == "NCCL_SOCKET_IFNAME" and re.search(r"(^|[\^,=])rdmap", value):
        return (
            "EFA devices (rdmap*) are not IP interfaces; leave fmcluster's ^docker,lo,veth "
            "(aws-ofi-nccl doc/efa-env-var.md)"
        )
    return None


# --- nccl-tests baselines -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PublishedBusBandwidth:
    """A published nccl-tests all_reduce_perf bus bandwidth for `nodes` instances at one message size."""

    instance_type: str
    nodes: int
    message_bytes: int
    bus_gbs: float
    source: str


_AWS_SAMPLES = "aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/README.md"
_AWS_PCS_TESTS = "awslabs/awsome-distributed-ai architectures/aws-pcs/tests/compute-test.md (2026)"
PUBLISHED_ALL_REDUCE: tuple[PublishedBusBandwidth, ...] = (
    PublishedBusBandwidth("p4de.24xlarge", 2, 2 * 1024**3, 78.3, _AWS_SAMPLES),
    PublishedBusBandwidth("p5.48xlarge", 2, 16 * 1024**3, 487.0, _AWS_SAMPLES),
    PublishedBusBandwidth("p5.48xlarge", 2, 2 * 1024**3, 443.0, _AWS_SAMPLES),
    PublishedBusBandwidth("p6-b300.48xlarge", 2, 16 * 1024**3, 654.0, _AWS_PCS_TESTS),
    PublishedBusBandwidth("p6-b300.48xlarge", 2, 64 * 1024**3, 751.0, _AWS_PCS_TESTS),
    PublishedBusBandwidth("p6-b200.48xlarge", 4, 16 * 1024**3, 377.0, _AWS_PCS_TESTS + ', "not a peak-tuned number"'),
)
"""AWS's published all_reduce_perf bus bandwidths (each figure's `source`), applied to runs on the same instance type
and node count only. AWS's PCS tests also give ~480 GB/s for 2x p5 at 16 GiB, which agrees with the samples' 487 (kept:
the exact figure). The 4x p6-b200 figure is AWS's own untuned number, so 90% of it is a floor, not a target; on
p6-b300 a 128 GiB message ran out of memory, so 64 GiB is the largest measured. Nothing is published for p5en or
other node counts (a third-party 684 GB/s for 2x p6-b200 is unconfirmed and not used): those runs fall back to the
line-rate fraction."""
NCCL_TESTS_MAX_BYTES = "64G"
"""The sweep's largest message (nccl-tests.sbatch `-e`): the largest size a published figure was measured at (2x
p6-b300, 64 GiB). nccl-tests lowers it to what fits in GPU memory (src/common.cu: send, receive and expected buffers
within the device memory less a reserve, "Reducing maxBytes ... due to memory limitation"), so an 80 GB H100 stops
at 16 GiB, the size of its published figure."""

PUBLISHED_MARGIN = 0.9
"""A run below 90% of a published figure is below baseline: the margin nccl-tests gives its own expected-bandwidth
check (NVIDIA/nccl-tests src/util.cu, writeResultFooter: FAILED below 0.9 x the expected value)."""
LINE_RATE_FRACTION = 0.7
"""Where nothing is published: the largest message's bus bandwidth should reach 70% of the EFA line rate in GB/s (a
floor: 2x p5's published 487 GB/s exceeds the 400 GB/s line rate, since bus bandwidth counts NVLink traffic too)."""
MIN_BASELINE_MESSAGE_BYTES = 1024**3
"""Runs whose largest message is below 1 GiB are latency-bound there; no baseline is evaluated for them."""


def baseline_spec(instance_type: str) -> dict[str, object]:
    """What the nccl-results Lambda needs to judge runs on `instance_type`: GPUs, line rate and published figures."""
    instance = _instance(instance_type)
    return {
        "gpus": instance.accelerator_count,
        "efa_gbps": instance.efa_gbps,
        "published": [
            {"nodes": p.nodes, "message_bytes": p.message_bytes, "bus_gbs": p.bus_gbs, "source": p.source}
            for p in PUBLISHED_ALL_REDUCE
            if p.instance_type == instance.name
        ],
    }
