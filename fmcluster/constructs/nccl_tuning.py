"""NcclTuning: the NCCL environment of each compute group, written to SSM for the nodes.

`NcclTuning` computes, per compute group, the environment `fmcluster.nccl.nccl_environment` gives for its instance
type and the image's versions, and writes it through a Lambda-backed custom resource (CDK Provider framework) to the
SSM parameter `/fmcluster/<cluster>/<group>/nccl-env`, which `fmcluster/node/nccl-env.sh` reads on every node.
`fmcluster.constructs.nccl_validation` judges the nccl-tests results; the pure rules live in `fmcluster.nccl`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from fmcluster import names
from fmcluster.config.value_rules import (
    GROUP_NAME_PATTERN,
    cluster_name_problem,
    repeated_group_name,
    unknown_instance_type,
)
from fmcluster.constructs.acknowledgments import acknowledge_deploy_time_functions, acknowledge_wildcards
from fmcluster.constructs.functions import (
    LAMBDA_RUNTIME,
    function_log_group,
    function_role,
    lambda_code,
    quiet_redundant_depends_on,
)
from fmcluster.nccl import (
    DEFAULT_EFA_INSTALLER_VERSION,
    DEFAULT_NCCL_VERSION,
    DEFAULT_OFI_NCCL_VERSION,
    Versions,
    floor_problems,
    nccl_environment,
    obsolete_variables,
    user_env_problems,
)
from fmcluster.problems import Problem, raise_if_any
from fmcluster.tokens import is_token


def parameter_name(cluster_name: str, group: str) -> str:
    """The SSM parameter the nodes of `group` read their NCCL environment from."""
    return names.nccl_parameter_name(names.parameter_prefix(cluster_name), group)


def group_pair_problems(cluster_name: str, groups: Sequence[tuple[str, str]]) -> list[Problem]:
    problems = []
    if not is_token(cluster_name) and (problem := cluster_name_problem(cluster_name)):
        problems.append(Problem("cluster_name", problem))
    if not groups:
        problems.append(Problem("groups", "give at least one (group name, instance type) pair"))
    seen: dict[str, int] = {}
    for index, group in enumerate(groups):
        where = f"groups[{index}]"
        if not (isinstance(group, tuple | list) and len(group) == 2):
            problems.append(Problem(where, f"must be a (group name, instance type) pair; got {group!r}"))
            continue
        name, instance_type = group
        if not isinstance(name, str) or not GROUP_NAME_PATTERN.match(name) or name.endswith("-"):
            problems.append(
                Problem(
                    where,
                    "group name must be a lowercase letter, then up to 19 lowercase letters, digits or '-', not "
                    f"ending with '-'; got {name!r}",
                )
            )
        elif name in seen:
            problems.append(Problem(where, repeated_group_name(name, f"groups[{seen[name]}]")))
        else:
            seen[name] = index
        if problem := unknown_instance_type(instance_type):
            problems.append(Problem(where, problem))
    return problems


class NcclTuning(Construct):
    """The NCCL environment of each compute group, written to SSM for the nodes, through one custom resource each.

    For every `(group, instance type)` in `groups` the environment is `fmcluster.nccl.nccl_environment(instance type,
    versions..., user_env)`: `NCCL_SOCKET_IFNAME=^docker,lo,veth` and whatever older plugins still need, nothing the
    aws-ofi-nccl plugin sets itself, no obsolete variable, then `user_env` on top. It is stored as a JSON object in the
    SSM String parameter `/fmcluster/<cluster_name>/<group>/nccl-env` (`parameter_names[group]`), which
    `fmcluster/node/nccl-env.sh` lays over its defaults on the node; the node role needs `grant_read`.

    One `custom_resources.Provider` serves every group; its on_event Lambda (Python, boto3 only,
    fmcluster/lambdas/nccl_env) puts the parameter on Create/Update and deletes it on Delete. Its role may put and
    delete parameters under `/fmcluster/<cluster_name>/` only; both functions log to log groups kept for
    `log_retention`. A version below the P5-class floors, an unknown instance type or a bad group name raises
    ValueError at synth time (every problem at once); a variable of `user_env` that is obsolete or that the plugin
    sets itself gives a synth warning (`warnings`) and is still applied: the user's value wins.

    Example::

        tuning = NcclTuning(stack, "Nccl", cluster_name="llm-pretrain", groups=[("gpu", "p5.48xlarge")],
                            user_env={"NCCL_DEBUG": "WARN"})
        tuning.grant_read(node_role)
        node_lifecycle_actions(nccl_parameter_name=tuning.parameter_names["gpu"], ...)

    Args:
        cluster_name: the cluster's name (2-24 lowercase letters, digits, '-'); the parameters' path prefix.
        groups: (group name, EC2 instance type) per compute group; at least one. A type outside the catalog (no
            EFA) gets only NCCL_SOCKET_IFNAME and `user_env`.
        nccl_version: NCCL in the training image; omitted: `fmcluster.nccl.DEFAULT_NCCL_VERSION`.
        ofi_nccl_version: aws-ofi-nccl in the image; omitted: `DEFAULT_OFI_NCCL_VERSION`.
        efa_installer_version: the EFA installer of the image; omitted: `DEFAULT_EFA_INSTALLER_VERSION`.
        user_env: variables for every job (the cluster file's `nccl.env`), winning over fmcluster's; omitted: none.
        without_efa: names of groups whose nodes have no EFA device (the cluster file's `efa: false`): no NCCL_NET
            for them, which would make every communicator fail; omitted: none.
        log_retention: how long the functions' logs are kept; omitted: one year.
        removal_policy: what `cdk destroy` does to those log groups; omitted: RETAIN. (The parameters are always
            deleted with their custom resources: they are derived data, rebuilt on the next deploy.)
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        groups: Sequence[tuple[str, str]],
        nccl_version: str = DEFAULT_NCCL_VERSION,
        ofi_nccl_version: str = DEFAULT_OFI_NCCL_VERSION,
        efa_installer_version: str = DEFAULT_EFA_INSTALLER_VERSION,
        user_env: Mapping[str, str] = MappingProxyType({}),
        without_efa: Sequence[str] = (),
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        groups = [tuple(group) if isinstance(group, list) else group for group in groups]
        problems = group_pair_problems(cluster_name, groups)
        try:
            versions: Versions | None = Versions(nccl_version, ofi_nccl_version, efa_installer_version)
        except ValueError as error:
            problems += [Problem("", line) for line in str(error).splitlines()]
            versions = None
        problems += user_env_problems(user_env)
        environments: dict[str, dict[str, str]] = {}
        warnings: dict[str, list[Problem]] = {}
        if versions is not None and not problems:
            for index, (name, instance_type) in enumerate(groups):
                floors = floor_problems(instance_type, versions)
                problems += [
                    replace(floor, path=f"groups[{index}] ({name}, {instance_type}): {floor.path}") for floor in floors
                ]
                if floors:
                    continue
                environments[name] = nccl_environment(
                    instance_type,
                    nccl_version=nccl_version,
                    ofi_nccl_version=ofi_nccl_version,
                    efa_installer_version=efa_installer_version,
                    user_env=user_env,
                    efa=name not in without_efa,
                )
                warnings[name] = obsolete_variables(user_env, versions, instance_type=instance_type)
        raise_if_any("NcclTuning", problems)
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)

        self.cluster_name = cluster_name
        self.environments: Mapping[str, Mapping[str, str]] = MappingProxyType(environments)
        """The environment written for each group, by group name."""
        self.parameter_names: Mapping[str, str] = MappingProxyType(
            {name: parameter_name(cluster_name, name) for name, _ in groups}
        )
        """The SSM parameter of each group, by group name (what the node bootstrap reads)."""
        self.warnings: Mapping[str, tuple[str, ...]] = MappingProxyType(
            {name: tuple(found.line for found in found_here) for name, found_here in warnings.items()}
        )
        """Per group: variables of `user_env` to remove, and why (also reported as synth warnings)."""
        for name, found_here in warnings.items():
            for found in found_here:
                cdk.Annotations.of(self).add_warning_v2(
                    f"fmcluster:nccl-env:{name}:{found.path}", f"nccl.env for group {name!r}: {found.line}"
                )

        self.log_group = function_log_group(self, "HandlerLogs", log_retention, removal_policy)
        """The on_event function's logs (JSON lines)."""
        role = function_role(
            self, "HandlerRole", f"fmcluster {cluster_name}: writes the NCCL environment SSM parameters", self.log_group
        )
        parameters_arn = stack.format_arn(
            service="ssm", resource="parameter", resource_name=f"fmcluster/{cluster_name}/*"
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["ssm:PutParameter", "ssm:DeleteParameter"], resources=[parameters_arn])
        )
        acknowledge_wildcards(
            role,
            resources=[parameters_arn],
            reason=(
                "The handler writes /fmcluster/<cluster>/<group>/nccl-env and must also delete the parameter of a "
                "group that was renamed or removed: CloudFormation deletes the old custom resource in the update's "
                "cleanup phase, after this policy already lists only the new groups. The wildcard is limited to "
                "this cluster's own parameter path and to ssm:PutParameter/DeleteParameter."
            ),
        )
        self.function = lambda_.Function(
            self,
            "Handler",
            runtime=LAMBDA_RUNTIME,
            handler="handler.on_event",
            code=lambda_code("nccl_env"),
            role=role,
            log_group=self.log_group,
            timeout=cdk.Duration.seconds(30),
            memory_size=128,
            description=f"fmcluster {cluster_name}: NCCL environment per compute group to SSM (custom resource)",
        )
        """The custom resource's on_event handler."""
        quiet_redundant_depends_on(self.function)

        framework_logs = function_log_group(self, "ProviderLogs", log_retention, removal_policy)
        framework_role = function_role(
            self,
            "ProviderRole",
            f"fmcluster {cluster_name}: custom-resource framework for the NCCL environment",
            framework_logs,
        )
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.function,
            framework_on_event_role=framework_role,
            log_group=framework_logs,
        )
        """The Provider framework in front of `function` (it answers CloudFormation, so a failure never hangs)."""
        quiet_redundant_depends_on(self.provider.node.find_child("framework-onEvent"))
        acknowledge_deploy_time_functions(self.function, "writes this cluster's NCCL SSM parameters (ssm:PutParameter)")
        acknowledge_deploy_time_functions(
            self.provider, "invokes the NCCL parameter handler", resource_type="AWS::Lambda::Function"
        )
        acknowledge_wildcards(
            framework_role,
            resources=[f"{self.function.function_arn}:*"],
            reason=(
                "CDK's Provider framework grants lambda:InvokeFunction on the on_event function and its "
                "versions/aliases (function ARN + ':*'); it invokes that one function only."
            ),
        )

        self.resources: Mapping[str, cdk.CustomResource] = MappingProxyType(
            {
                name: cdk.CustomResource(
                    self,
                    f"Environment-{name}",
                    service_token=self.provider.service_token,
                    resource_type="Custom::NcclEnvironment",
                    properties={
                        "ParameterName": self.parameter_names[name],
                        "Environment": json.dumps(environments[name], sort_keys=True, separators=(",", ":")),
                        "Description": f"NCCL environment for compute group {name} ({instance_type}), by fmcluster",
                    },
                )
                for name, instance_type in groups
            }
        )
        """The custom resource of each group, by group name."""

    def parameter_arn(self, group: str) -> str:
        """The ARN of `group`'s SSM parameter."""
        if group not in self.parameter_names:
            raise KeyError(f"unknown group {group!r}; known: {', '.join(self.parameter_names)}")
        return cdk.Stack.of(self).format_arn(
            service="ssm", resource="parameter", resource_name=self.parameter_names[group].lstrip("/")
        )

    def grant_read(self, grantee: iam.IGrantable, *groups: str) -> iam.Grant:
        """Let `grantee` (a node role) read the NCCL parameters of `groups` (omitted: every group)."""
        arns = [self.parameter_arn(group) for group in (groups or self.parameter_names)]
        return iam.Grant.add_to_principal(grantee=grantee, actions=["ssm:GetParameter"], resource_arns=arns)
