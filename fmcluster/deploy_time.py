"""How long a deploy takes, from a synthesized cloud assembly's dependency graph: stacks, then resources.

The weights are `deploy_times.yaml` (package data): minutes per resource type, each with its source or marked as an
estimate. A stack takes as long as its longest chain of resources (CloudFormation creates every resource whose
dependencies are done, in parallel), where a resource depends on what its `DependsOn`, `Ref`, `Fn::GetAtt` and
`Fn::Sub` name. The deploy takes as long as the longest chain of stacks in manifest.json's dependencies, deployed
as soon as their dependencies are (`cdk deploy --all --concurrency N`); without `--concurrency` the CLI deploys
one stack at a time and the deploy takes the sum.

>>> estimate = estimate_assembly("cdk.out")  # doctest: +SKIP
>>> estimate.summary()  # doctest: +SKIP
'deploy ~52 min: network 3 > storage 20 > cluster 27; image 38 in parallel'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

import yaml

from fmcluster.names import MIRROR_STACK, NETWORK_STACK, NODE_IMAGE_TAG

STACK_ARTIFACT = "aws:cloudformation:stack"
CLUSTER_TYPES = ("AWS::SageMaker::Cluster", "AWS::PCS::Cluster")
"""A stack holding one of these is the cluster stack: when it is done, nodes take jobs."""
IMAGE_TYPE = "Custom::TrainingImage"
"""A stack holding this builds the training image: container jobs need it (and its import)."""
NODE_GROUP_TYPE = "AWS::PCS::ComputeNodeGroup"
NODE_IMAGE_TYPE = "AWS::ImageBuilder::Image"
"""A stack holding this bakes the node image (orchestrator.node_image: baked); the cluster stack waits for it."""
MIRROR_TYPE = "Custom::ArtifactMirror"
"""The stack holding the artifact mirror: the storage stack with a boot node image, the mirror stack with a baked one
(`fmcluster.stacks.mirror.mirror_has_own_stack`), which the node-image stack waits for, with the network stack."""
NODE_IMAGES = ("boot", "baked")
_SUB_NAME = re.compile(r"\$\{([A-Za-z0-9]+)(?:\.[A-Za-z0-9.]+)?\}")


@dataclass(frozen=True)
class Weights:
    """Minutes per resource type, as in deploy_times.yaml."""

    default: float
    stack_overhead: float
    types: Mapping[str, float]
    deep_health_checks: Mapping[str, float]
    image_import: float
    node_boot: Mapping[str, float] = field(default_factory=dict)
    """Minutes from launch until a PCS node takes jobs, by node image (`NODE_IMAGES`); none: no such term."""
    node_image: str | None = None
    """Every PCS node group booted as this node image; None: as its template says (the node-image tag: baked)."""

    @classmethod
    def load(cls, data: Mapping | None = None) -> Weights:
        """The package's deploy_times.yaml, or `data` of the same shape."""
        if data is None:
            data = yaml.safe_load(resources.files("fmcluster").joinpath("deploy_times.yaml").read_text())
        return cls(
            default=float(data["default"]["minutes"]),
            stack_overhead=float(data["stack_overhead"]["minutes"]),
            types={name: float(entry["minutes"]) for name, entry in data["types"].items()},
            deep_health_checks={name: float(entry["minutes"]) for name, entry in data["deep_health_checks"].items()},
            image_import=float(data["image_import"]["minutes"]),
            node_boot={name: float(entry["minutes"]) for name, entry in (data.get("node_boot") or {}).items()},
        )

    def node_boot_minutes(self, resource: Mapping) -> float:
        """A PCS node group's per-node boot by its node image (0 for other resources, or without `node_boot`)."""
        if resource.get("Type") != NODE_GROUP_TYPE or not self.node_boot:
            return 0.0
        baked = NODE_IMAGE_TAG in (resource.get("Properties", {}).get("Tags") or {})
        return self.node_boot[self.node_image or ("baked" if baked else "boot")]

    def deep_health_minutes(self, resource: Mapping) -> float:
        """The slowest instance group's deep health checks of an AWS::SageMaker::Cluster (0 for other resources)."""
        if resource.get("Type") != "AWS::SageMaker::Cluster":
            return 0.0
        groups = resource.get("Properties", {}).get("InstanceGroups") or []
        return max(
            (sum(self.deep_health_checks[c] for c in g.get("OnStartDeepHealthChecks") or []) for g in groups),
            default=0.0,
        )

    def minutes(self, resource: Mapping) -> float:
        """How long CloudFormation takes to create `resource` (a template's resource entry)."""
        kind = resource.get("Type", "")
        return (
            self.types.get(kind, self.default) + self.deep_health_minutes(resource) + self.node_boot_minutes(resource)
        )


@dataclass
class StackEstimate:
    """One stack: its minutes, its slowest chain of resources, its deep health checks' share."""

    name: str
    minutes: float
    chain: list[str]
    deep_health_minutes: float = 0.0
    depends_on: list[str] = field(default_factory=list)
    resource_types: set[str] = field(default_factory=set)
    template: Mapping = field(default_factory=dict, repr=False)


@dataclass
class DeployEstimate:
    """Every stack's estimate and when each is done, deployed as soon as its dependencies are."""

    stacks: dict[str, StackEstimate]
    weights: Weights
    finish: dict[str, float] = field(default_factory=dict)
    critical: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in _topological(self.stacks):
            stack = self.stacks[name]
            start = max((self.finish[d] for d in stack.depends_on), default=0.0)
            self.finish[name] = start + stack.minutes
        last = max(self.finish, key=lambda n: self.finish[n])
        while True:
            self.critical.insert(0, last)
            deps = self.stacks[last].depends_on
            if not deps:
                break
            last = max(deps, key=lambda n: self.finish[n])

    @property
    def total(self) -> float:
        return max(self.finish.values())

    @property
    def sequential(self) -> float:
        """One stack at a time, as `cdk deploy --all` does without --concurrency."""
        return sum(stack.minutes for stack in self.stacks.values())

    def _with(self, types: tuple[str, ...]) -> StackEstimate | None:
        found = [s for s in self.stacks.values() if s.resource_types & set(types)]
        return found[0] if found else None

    @property
    def first_job(self) -> float | None:
        """Minutes until nodes take jobs: the cluster stack is done."""
        cluster = self._with(CLUSTER_TYPES)
        return self.finish[cluster.name] if cluster else None

    @property
    def first_container_job(self) -> float | None:
        """Minutes until container jobs run: nodes up, and the image built and imported."""
        image = self._with((IMAGE_TYPE,))
        if self.first_job is None or image is None:
            return self.first_job
        return max(self.first_job, self.finish[image.name] + self.weights.image_import)

    def first_job_with(self, node_image: str) -> float | None:
        """Minutes until nodes take jobs were every PCS node group on `node_image` ("boot" or "baked"), with the stacks
        `fmcluster.stacks.build` makes for it: for boot, the node-image and mirror stacks taken out (the storage stack
        holds the mirror then, beside FSx); for baked, the mirror in a stack of its own (its job's minutes, when the
        file's mirror is in the storage stack) and the node-image stack after it and the network (its image build,
        `AWS::ImageBuilder::Image`, per architecture in parallel), beside storage. Every node group's boot is that of
        the image."""
        weights = replace(self.weights, node_image=node_image)
        baking = {name for name, stack in self.stacks.items() if NODE_IMAGE_TYPE in stack.resource_types}
        own_mirror = f"{self._prefix}{MIRROR_STACK}"
        moves = {*baking, own_mirror} if node_image == "boot" else set()
        keep = [name for name in self.stacks if name not in moves]
        stacks = {}
        for name in keep:
            stack = self.stacks[name]
            again = estimate_template(name, stack.template, weights) if stack.template else replace(stack)
            again.depends_on = [d for d in stack.depends_on if d in keep]
            stacks[name] = again
        cluster, mirror = self._with(CLUSTER_TYPES), self._with((MIRROR_TYPE,))
        if node_image == "baked" and not baking and cluster is not None and NODE_GROUP_TYPE in cluster.resource_types:
            if mirror is not None and own_mirror not in stacks:  # the mirror leaves the storage stack
                stacks[own_mirror] = StackEstimate(
                    name=own_mirror,
                    minutes=weights.types.get(MIRROR_TYPE, weights.default) + weights.stack_overhead,
                    chain=[MIRROR_TYPE],
                    depends_on=[],
                )
                mirror = stacks[own_mirror]
            bake = StackEstimate(
                name=f"{self._prefix}node-image",
                minutes=weights.types.get(NODE_IMAGE_TYPE, weights.default) + weights.stack_overhead,
                chain=[NODE_IMAGE_TYPE],
                depends_on=[
                    name for name in (f"{self._prefix}{NETWORK_STACK}", mirror and mirror.name) if name in stacks
                ],
            )
            stacks[bake.name] = bake
            stacks[cluster.name].depends_on.append(bake.name)
        return DeployEstimate(stacks, weights).first_job

    def node_image_times(self) -> str | None:
        """Time to first job with each node image and the per-node boot of each, for a cluster of PCS node groups
        (None otherwise: HyperPod takes no baked image from fmcluster yet). Figures: deploy_times.yaml (node_boot:
        AWS's PCS reference; the image build: an estimate)."""
        cluster = self._with(CLUSTER_TYPES)
        if cluster is None or NODE_GROUP_TYPE not in cluster.resource_types or not self.weights.node_boot:
            return None
        boot, baked = (self.first_job_with(mode) for mode in NODE_IMAGES)
        this = "baked" if self._with((NODE_IMAGE_TYPE,)) else "boot"
        build = self.weights.types.get(NODE_IMAGE_TYPE, self.weights.default)
        return (
            f"time to first job by orchestrator.node_image (this file: {this}): boot ~{boot:.0f} min, each node "
            f"~{self.weights.node_boot['boot']:.0f} min from launch to its first job (enroot and pyxis installed at "
            f"first boot; AWS's PCS reference: 8-12 min); baked ~{baked:.0f} min, the image build ~{build:.0f} min "
            f"(estimate) beside the storage stack and before the cluster stack, then each node "
            f"~{self.weights.node_boot['baked']:.0f} min (AWS's PCS reference: ~3 min); every replacement, scale-up "
            "and capacity-block start pays a node's boot again"
        )

    def summary(self) -> str:
        """`deploy ~52 min: network 3 > storage 20 > cluster 27; image 38 in parallel`."""
        path = " > ".join(self._label(self.stacks[n]) for n in self.critical)
        beside = [self._label(s) for n, s in self.stacks.items() if n not in self.critical]
        text = f"deploy ~{self.total:.0f} min: {path}"
        return text + (f"; {', '.join(beside)} in parallel" if beside else "")

    @property
    def _prefix(self) -> str:
        """What every stack name starts with, up to a '-' (the cluster's name and '-'), dropped in the summary."""
        common: list[str] = []
        for words in zip(*(name.split("-") for name in self.stacks), strict=False):
            if len(set(words)) > 1 or len(self.stacks) == 1:
                break
            common.append(words[0])
        return "".join(f"{word}-" for word in common)

    def _label(self, stack: StackEstimate) -> str:
        label = f"{stack.name.removeprefix(self._prefix)} {stack.minutes:.0f}"
        if stack.deep_health_minutes:
            label += f" (deep health checks {stack.deep_health_minutes:.0f})"
        return label


def estimate_assembly(outdir: str | Path, weights: Weights | None = None) -> DeployEstimate:
    """The deploy estimate of the cloud assembly in `outdir` (what `cdk synth` writes, with manifest.json)."""
    weights = weights or Weights.load()
    outdir = Path(outdir)
    manifest = json.loads((outdir / "manifest.json").read_text())
    artifacts = manifest.get("artifacts", {})
    stacks = {name: a for name, a in artifacts.items() if a.get("type") == STACK_ARTIFACT}
    estimates: dict[str, StackEstimate] = {}
    for name, artifact in stacks.items():
        template = json.loads((outdir / artifact["properties"]["templateFile"]).read_text())
        estimate = estimate_template(name, template, weights)
        estimate.depends_on = [d for d in artifact.get("dependencies", []) if d in stacks]
        estimates[name] = estimate
    return DeployEstimate(estimates, weights)


def estimate_template(name: str, template: Mapping, weights: Weights) -> StackEstimate:
    """A stack's minutes: its longest chain of resources by weight, plus the stack overhead."""
    resources_ = template.get("Resources", {})
    edges = resource_dependencies(template)
    finish: dict[str, float] = {}
    before: dict[str, str | None] = {}
    for logical_id in _topological({r: edges[r] for r in resources_}):
        deps = [d for d in edges[logical_id] if d in resources_]
        previous = max(deps, key=lambda d: finish[d], default=None)
        before[logical_id] = previous
        finish[logical_id] = (finish[previous] if previous else 0.0) + weights.minutes(resources_[logical_id])
    chain: list[str] = []
    last = max(finish, key=lambda r: finish[r], default=None)
    while last is not None:
        chain.insert(0, last)
        last = before[last]
    return StackEstimate(
        name=name,
        minutes=(max(finish.values(), default=0.0)) + weights.stack_overhead,
        chain=chain,
        deep_health_minutes=max((weights.deep_health_minutes(r) for r in resources_.values()), default=0.0),
        resource_types={r.get("Type", "") for r in resources_.values()},
        template=template,
    )


def resource_dependencies(template: Mapping) -> dict[str, set[str]]:
    """For each resource, the resources of the same template it waits for (DependsOn, Ref, GetAtt, Sub)."""
    resources_ = template.get("Resources", {})
    edges: dict[str, set[str]] = {}
    for logical_id, resource in resources_.items():
        depends = resource.get("DependsOn", [])
        named = set([depends] if isinstance(depends, str) else depends)
        named |= set(_references(resource.get("Properties", {})))
        edges[logical_id] = {n for n in named if n in resources_ and n != logical_id}
    return edges


def _references(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and isinstance(value, str):
                yield value
            elif key == "Fn::GetAtt":
                yield value[0] if isinstance(value, list) else str(value).split(".")[0]
            elif key == "Fn::Sub":
                text = value[0] if isinstance(value, list) else value
                yield from (match[1] for match in _SUB_NAME.finditer(str(text)))
                if isinstance(value, list):
                    yield from _references(value[1:])
            else:
                yield from _references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _references(item)


def _topological(edges: Mapping[str, Iterable[str] | StackEstimate]) -> list[str]:
    """Names in an order where each comes after the names it depends on (`edges[name]` or `.depends_on`)."""
    order: list[str] = []
    state: dict[str, int] = {}

    def deps(name: str) -> list[str]:
        value = edges[name]
        listed = value.depends_on if isinstance(value, StackEstimate) else value
        return sorted(d for d in listed if d in edges)

    def visit(name: str) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise ValueError(f"dependency cycle through {name}")
        state[name] = 1
        for dep in deps(name):
            visit(dep)
        state[name] = 2
        order.append(name)

    for name in edges:
        visit(name)
    return order
