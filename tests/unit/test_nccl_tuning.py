"""fmcluster.nccl: the NCCL environment per instance type and versions, the P5 floors, what the plugin sets itself,
obsolete variables, the user's variables winning; and a property over generated inputs.

Pure Python: no CDK app, no AWS.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fmcluster import catalog, nccl
from fmcluster.nccl import (
    DEFAULT_EFA_INSTALLER_VERSION,
    DEFAULT_NCCL_VERSION,
    DEFAULT_OFI_NCCL_VERSION,
    SOCKET_IFNAME,
    Versions,
    baseline_spec,
    nccl_environment,
    obsolete_variables,
    parse_version,
    plugin_defaults,
)

SOCKETS = {"NCCL_SOCKET_IFNAME": SOCKET_IFNAME}
# NCCL_NET names the aws-ofi-nccl plugin on EFA GPU instances, so that NCCL fails instead of using sockets: NCCL
# initializes only the network named so (NVIDIA/nccl src/plugin/net.cc ncclNetInit, strcasecmp, v2.30.7-1); the
# plugin's name is "AWS Libfabric" up to v1.12.1-aws and "Libfabric" from v1.13.0-aws (aws/aws-ofi-nccl
# src/nccl_ofi_interface_nvidia.c(pp) at those tags)
EFA_GPU = [name for name, i in catalog.CATALOG.items() if i.supports_efa and i.accelerator.startswith("NVIDIA")]
CURRENT_NET = {"NCCL_NET": "Libfabric"}
OLD_NET = {"NCCL_NET": "AWS Libfabric"}


def needed(instance_type: str, net: dict[str, str]) -> dict[str, str]:
    return {**SOCKETS, **net} if instance_type in EFA_GPU else SOCKETS


P5_CLASS = [name for name in catalog.CATALOG if name.startswith(("p5", "p6"))]
OTHERS = [name for name in catalog.CATALOG if name not in P5_CLASS]


def lines(problems) -> list[str]:
    """`key: message` of each Problem, the text these functions once returned as plain strings."""
    return [problem.line for problem in problems]


def env(instance_type: str, nccl_version: str = "2.27.7", ofi: str = "1.16.3", efa: str = "1.43.2", **user: str):
    return nccl_environment(
        instance_type, nccl_version=nccl_version, ofi_nccl_version=ofi, efa_installer_version=efa, user_env=user
    )


# --- the environment per instance type and versions ---------------------------------------------------------------


@pytest.mark.parametrize("instance_type", list(catalog.CATALOG))
def test_current_versions_need_only_the_socket_interfaces_and_the_plugin_on_every_type(instance_type):
    assert env(instance_type) == needed(instance_type, CURRENT_NET)
    assert nccl_environment(
        instance_type,
        nccl_version=DEFAULT_NCCL_VERSION,
        ofi_nccl_version=DEFAULT_OFI_NCCL_VERSION,
        efa_installer_version=DEFAULT_EFA_INSTALLER_VERSION,
    ) == needed(instance_type, CURRENT_NET)


@pytest.mark.parametrize(
    ("instance_type", "ofi", "expected"),
    [
        # aws-ofi-nccl <= 1.5.0 on GPUDirect RDMA instances: the doc's full preset
        (
            "p4d.24xlarge",
            "1.5.0",
            {"FI_PROVIDER": "efa", "NCCL_PROTO": "simple", "FI_EFA_USE_DEVICE_RDMA": "1"},
        ),
        ("p4de.24xlarge", "1.4.0", {"FI_PROVIDER": "efa", "NCCL_PROTO": "simple", "FI_EFA_USE_DEVICE_RDMA": "1"}),
        # ... on EFA instances without GPUDirect RDMA: no FI_EFA_USE_DEVICE_RDMA
        ("g5.48xlarge", "1.5.0", {"FI_PROVIDER": "efa", "NCCL_PROTO": "simple"}),
        # 1.6.x on p4: only FI_EFA_USE_DEVICE_RDMA
        ("p4d.24xlarge", "1.6.0", {"FI_EFA_USE_DEVICE_RDMA": "1"}),
        ("p4de.24xlarge", "v1.6.1-aws", {"FI_EFA_USE_DEVICE_RDMA": "1"}),
        ("g5.48xlarge", "1.6.0", {}),
        # 1.7.0 and later: nothing beyond the socket interfaces
        ("p4d.24xlarge", "1.7.0", {}),
        ("p4d.24xlarge", "v1.9.2-aws", {}),
        # no EFA, or no NVIDIA GPU: the plugin presets do not apply
        ("g5.4xlarge", "1.5.0", {}),
        ("trn1.32xlarge", "1.5.0", {}),
        ("trn2.48xlarge", "1.6.0", {}),
    ],
)
def test_old_plugins_get_the_variables_they_relied_on(instance_type, ofi, expected):
    net = CURRENT_NET if nccl.parse_version(ofi, "ofi") >= (1, 13, 0) else OLD_NET
    assert env(instance_type, nccl_version="2.12.12", ofi=ofi, efa="1.18.0") == {
        **needed(instance_type, net),
        **expected,
    }


def test_the_floors_do_not_apply_below_p5():
    for instance_type in OTHERS:
        assert env(instance_type, nccl_version="2.12.12", ofi="1.7.0", efa="1.20.0") == needed(instance_type, OLD_NET)


@pytest.mark.parametrize("instance_type", P5_CLASS)
def test_p5_class_floors_at_the_requirement_pass_with_a_warning(instance_type):
    # aws-ofi-nccl doc/efa-env-var.md, p5.48xlarge: "nccl>=2.18.0 (recommend at least 2.18.5)",
    # "aws-ofi-nccl>=1.7.2 (recommend at least 1.7.3)", efa-installer>=1.29.0
    assert env(instance_type, nccl_version="2.18.0-1", ofi="v1.7.2-aws", efa="1.29.0") == needed(instance_type, OLD_NET)
    assert lines(nccl.floor_warnings(instance_type, Versions(nccl="2.18.0-1", ofi_nccl="v1.7.2-aws"))) == [
        "nccl_version: aws-ofi-nccl recommends 2.18.5 or later on P5-class instances (p5*, p6*); got '2.18.0-1' "
        "(below 2.18.5 the plugin disables NVLS on NVLink Switch platforms; aws-ofi-nccl doc/efa-env-var.md)",
        "ofi_nccl_version: aws-ofi-nccl recommends 1.7.3 or later on P5-class instances (p5*, p6*); got 'v1.7.2-aws' "
        "(aws-ofi-nccl doc/efa-env-var.md, p5.48xlarge)",
    ]
    assert nccl.floor_warnings(instance_type, Versions(nccl="2.18.5", ofi_nccl="1.7.3", efa_installer="1.29")) == []


def test_the_floor_warnings_do_not_apply_below_p5():
    for instance_type in OTHERS:
        assert nccl.floor_warnings(instance_type, Versions(nccl="2.18.0", ofi_nccl="1.7.2")) == []


FLOOR_MESSAGES = {
    "nccl": "nccl_version: P5-class instances (p5*, p6*) need 2.18.0 or later; got '2.17.1' (below 2.18.5 the "
    "plugin disables NVLS on NVLink Switch platforms; aws-ofi-nccl doc/efa-env-var.md)",
    "ofi": "ofi_nccl_version: P5-class instances (p5*, p6*) need 1.7.2 or later; got '1.7.1-aws' (aws-ofi-nccl "
    "doc/efa-env-var.md, p5.48xlarge)",
    "efa": "efa_installer_version: P5-class instances (p5*, p6*) need 1.29.0 or later; got '1.28' (older EFA "
    "installers make NCCL >= 2.19 raise libfabric errors; aws-ofi-nccl doc/efa-env-var.md)",
}


@pytest.mark.parametrize("instance_type", P5_CLASS)
@pytest.mark.parametrize(
    ("versions", "broken"),
    [
        ({"nccl_version": "2.17.1"}, ["nccl"]),
        ({"ofi": "1.7.1-aws"}, ["ofi"]),
        ({"efa": "1.28"}, ["efa"]),
        ({"nccl_version": "2.17.1", "ofi": "1.7.1-aws", "efa": "1.28"}, ["nccl", "ofi", "efa"]),
    ],
)
def test_p5_class_floors_are_enforced_with_every_problem_at_once(instance_type, versions, broken):
    with pytest.raises(ValueError) as error:
        env(instance_type, **versions)
    assert str(error.value).splitlines() == [f"{instance_type}: {FLOOR_MESSAGES[key]}" for key in broken]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("p5.96xlarge", "unknown instance type 'p5.96xlarge': EC2 offers no such type (botocore ec2 InstanceType); "
         "did you mean 'p5.4xlarge'?"),
        ("ml.p5.48xlarge", "give the EC2 name 'p5.48xlarge'; HyperPod's 'ml.' prefix is added for you"),
        ("", "unknown instance type '': EC2 offers no such type (botocore ec2 InstanceType)"),
        (None, "unknown instance type None: give an EC2 instance type name"),
    ],
)  # fmt: skip
def test_unknown_instance_type_is_judged_by_ec2s_list(name, message):
    with pytest.raises(ValueError) as error:
        env(name)
    assert str(error.value) == message


def test_a_general_purpose_type_gets_only_the_socket_interfaces():
    """No EFA on a type outside the catalog: nothing for the plugin, only NCCL_SOCKET_IFNAME (and the user's)."""
    assert env("c6i.4xlarge") == {"NCCL_SOCKET_IFNAME": "^docker,lo,veth"}
    assert baseline_spec("c6i.4xlarge") == {"gpus": 0, "efa_gbps": 0, "published": []}


@pytest.mark.parametrize(
    ("versions", "message"),
    [
        (
            {"nccl_version": "latest"},
            "p5.48xlarge: nccl_version: must be a release version like 1.2.3 (a leading 'v' and a '-1' or '-aws' "
            "suffix are accepted); got 'latest'",
        ),
        (
            {"ofi": "1.x"},
            "p5.48xlarge: ofi_nccl_version: must be a release version like 1.2.3 (a leading 'v' and a '-1' or '-aws' "
            "suffix are accepted); got '1.x'",
        ),
        (
            {"efa": "1"},
            "p5.48xlarge: efa_installer_version: must be a release version like 1.2.3 (a leading 'v' and a '-1' or "
            "'-aws' suffix are accepted); got '1'",
        ),
    ],
)
def test_malformed_versions_are_rejected(versions, message):
    with pytest.raises(ValueError) as error:
        env("p5.48xlarge", **versions)
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("text", "version"),
    [("2.27.7", (2, 27, 7)), ("v2.27.7-1", (2, 27, 7)), ("1.13.2-aws", (1, 13, 2)), ("1.29", (1, 29, 0))],
)
def test_version_forms(text, version):
    assert parse_version(text, "x") == version


def test_the_defaults_are_real_releases_above_every_floor():
    defaults = Versions()
    assert (defaults.nccl, defaults.ofi_nccl, defaults.efa_installer) == ("2.31.2", "1.21.1", "1.50.0")
    for instance_type in P5_CLASS:
        assert nccl.floor_problems(instance_type, defaults) == []


# --- the user's variables -----------------------------------------------------------------------------------------


def test_user_env_is_added_and_wins_every_conflict():
    assert env("p5.48xlarge", NCCL_DEBUG="WARN", NCCL_SOCKET_IFNAME="^lo,docker0") == {
        "NCCL_SOCKET_IFNAME": "^lo,docker0",
        "NCCL_NET": "Libfabric",
        "NCCL_DEBUG": "WARN",
    }
    # a job that must run without the plugin names another network itself
    assert env("p5.48xlarge", NCCL_NET="Socket")["NCCL_NET"] == "Socket"
    # even an obsolete variable or one the plugin sets: the user's choice stands (obsolete_variables warns)
    kept = env("p4d.24xlarge", ofi="1.5.0", NCCL_PROTO="LL128", FI_EFA_USE_DEVICE_RDMA="0", NCCL_BUFFSIZE="4194304")
    assert kept["NCCL_PROTO"] == "LL128" and kept["FI_EFA_USE_DEVICE_RDMA"] == "0"
    assert kept["NCCL_BUFFSIZE"] == "4194304"


@pytest.mark.parametrize(
    ("user_env", "message"),
    [
        (
            {"RDMAV_FORK_SAFE": "1"},
            "p5.48xlarge: user_env: 'RDMAV_FORK_SAFE' is not an NCCL, libfabric or aws-ofi-nccl variable; names must "
            "match ^(NCCL|FI|OFI_NCCL)_[A-Z0-9_]+$ (the nodes ignore the whole parameter otherwise)",
        ),
        (
            {"NCCL_DEBUG": "WARN\nINFO"},
            "p5.48xlarge: user_env: NCCL_DEBUG: the value must be a one-line string; got 'WARN\\nINFO'",
        ),
        ({"NCCL_DEBUG": 3}, "p5.48xlarge: user_env: NCCL_DEBUG: the value must be a one-line string; got 3"),
    ],
)
def test_user_env_the_nodes_would_refuse_is_rejected(user_env, message):
    with pytest.raises(ValueError) as error:
        nccl_environment(
            "p5.48xlarge", nccl_version="2.27.7", ofi_nccl_version="1.16.3", efa_installer_version="1.43.2",
            user_env=user_env,
        )  # fmt: skip
    assert str(error.value) == message


# --- what the plugin sets itself ----------------------------------------------------------------------------------
TUNED = {"NCCL_BUFFSIZE", "NCCL_P2P_NET_CHUNKSIZE"}
NVLS = {"NCCL_NVLSTREE_MAX_CHUNKSIZE", "NCCL_NVLS_CHUNKSIZE", "NCCL_NET_FORCE_FLUSH"}
ALWAYS_GPU = {"FI_PROVIDER", "FI_EFA_FORK_SAFE", "NCCL_TUNER_PLUGIN"}


@pytest.mark.parametrize(
    ("instance_type", "ofi", "expected"),
    [
        ("p5.48xlarge", "1.21.1", ALWAYS_GPU | TUNED | NVLS),
        ("p5e.48xlarge", "1.16.0", ALWAYS_GPU | TUNED | NVLS),
        ("p5en.48xlarge", "1.21.1", ALWAYS_GPU | TUNED | NVLS | {"NCCL_NETDEVS_POLICY"}),
        ("p5en.48xlarge", "1.16.3", ALWAYS_GPU | TUNED | NVLS),
        ("p6-b200.48xlarge", "1.17.0", ALWAYS_GPU | TUNED | NVLS | {"NCCL_NETDEVS_POLICY"}),
        ("p6-b300.48xlarge", "1.21.1", ALWAYS_GPU | TUNED | NVLS),
        (
            "p6e-gb200.36xlarge",
            "1.21.1",
            ALWAYS_GPU | TUNED | NVLS | {"OFI_NCCL_SKIP_NICS_WITHOUT_ACCEL_AT_SAME_PCI_LEVEL"},
        ),
        ("p5.48xlarge", "1.15.0", {"FI_PROVIDER", "FI_EFA_FORK_SAFE"}),
        ("p4d.24xlarge", "1.21.1", ALWAYS_GPU | TUNED | {"NCCL_TOPO_FILE"}),
        ("p4de.24xlarge", "1.5.0", {"FI_EFA_FORK_SAFE"}),
        ("g5.48xlarge", "1.21.1", ALWAYS_GPU),
        ("g5.4xlarge", "1.21.1", set()),  # no EFA: the plugin falls back to NCCL's sockets
        ("trn1.32xlarge", "1.21.1", {"FI_PROVIDER"}),  # Neuron: no fork-safe flag, no CUDA tuner
    ],
)
def test_plugin_defaults_by_instance_type_and_version(instance_type, ofi, expected):
    assert set(plugin_defaults(instance_type, Versions(nccl="2.27.7", ofi_nccl=ofi))) == expected


def test_the_plugin_disables_nvls_itself_for_old_nccl():
    assert plugin_defaults("p4d.24xlarge", Versions(nccl="2.18.3", ofi_nccl="1.7.3"))["NCCL_NVLS_ENABLE"] == "0"
    assert "NCCL_NVLS_ENABLE" not in plugin_defaults("p5.48xlarge", Versions(nccl="2.18.5", ofi_nccl="1.7.3"))


# --- obsolete variables -------------------------------------------------------------------------------------------
CURRENT = Versions()


@pytest.mark.parametrize(
    ("variables", "versions", "instance_type", "flagged"),
    [
        ({"RDMAV_FORK_SAFE": "1", "RDMAV_HUGEPAGES_SAFE": "1"}, CURRENT, None,
         ["RDMAV_FORK_SAFE", "RDMAV_HUGEPAGES_SAFE"]),
        ({"FI_EFA_USE_DEVICE_RDMA": "1"}, CURRENT, None, ["FI_EFA_USE_DEVICE_RDMA"]),
        ({"FI_EFA_USE_DEVICE_RDMA": "1"}, Versions(nccl="2.12.12", ofi_nccl="1.6.0"), "p4d.24xlarge", []),
        ({"NCCL_PROTO": "simple", "FI_PROVIDER": "efa"}, CURRENT, None, ["FI_PROVIDER", "NCCL_PROTO"]),
        ({"NCCL_PROTO": "simple", "FI_PROVIDER": "efa"}, Versions(nccl="2.12.12", ofi_nccl="1.5.0"), "p4d.24xlarge",
         []),
        ({"NCCL_PROTO": "LL128", "NCCL_ALGO": "Ring"}, CURRENT, None, ["NCCL_ALGO", "NCCL_PROTO"]),
        ({"NCCL_ALGO": "Ring"}, Versions(nccl="2.18.5", ofi_nccl="1.15.0"), None, []),
        ({"NCCL_NVLS_ENABLE": "0"}, CURRENT, None, ["NCCL_NVLS_ENABLE"]),
        ({"NCCL_NVLS_ENABLE": "0"}, Versions(nccl="2.18.3", ofi_nccl="1.7.3"), "p4d.24xlarge", ["NCCL_NVLS_ENABLE"]),
        ({"NCCL_NVLS_ENABLE": "0"}, Versions(nccl="2.18.3", ofi_nccl="1.7.3"), None, []),
        ({"FI_EFA_FORK_SAFE": "1", "FI_EFA_ENABLE_SHM_TRANSFER": "1"}, CURRENT, None,
         ["FI_EFA_ENABLE_SHM_TRANSFER", "FI_EFA_FORK_SAFE"]),
        ({"NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "2"}, CURRENT, "p5.48xlarge",
         ["NCCL_NSOCKS_PERTHREAD", "NCCL_SOCKET_NTHREADS"]),
        ({"NCCL_SOCKET_NTHREADS": "4"}, CURRENT, "g5.4xlarge", []),  # no EFA: NCCL's sockets do the work
        ({"NCCL_MIN_NCHANNELS": "32"}, CURRENT, None, ["NCCL_MIN_NCHANNELS"]),
        ({"NCCL_BUFFSIZE": "8388608"}, Versions(nccl="2.27.7", ofi_nccl="1.15.0"), "p5.48xlarge", ["NCCL_BUFFSIZE"]),
        ({"NCCL_NETDEVS_POLICY": "max:1", "NCCL_NET_FORCE_FLUSH": "0"}, CURRENT, "p5en.48xlarge",
         ["NCCL_NETDEVS_POLICY", "NCCL_NET_FORCE_FLUSH"]),
        ({"NCCL_NETDEVS_POLICY": "max:1"}, CURRENT, "p5.48xlarge", []),
        ({"NCCL_SOCKET_IFNAME": "rdmap16s27"}, CURRENT, None, ["NCCL_SOCKET_IFNAME"]),
        ({"NCCL_SOCKET_IFNAME": "^docker,lo,veth"}, CURRENT, "p5.48xlarge", []),
        ({"FI_EFA_USE_HUGE_PAGE": "0", "NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1"}, CURRENT, "p5.48xlarge", []),
    ],
)  # fmt: skip
def test_obsolete_variables_are_named_with_a_reason(variables, versions, instance_type, flagged):
    warnings = lines(obsolete_variables(variables, versions, instance_type=instance_type))
    assert [warning.split(":")[0] for warning in warnings] == flagged
    for warning in warnings:
        _, rest = warning.split(": ", 1)
        assert rest.startswith("remove it; ") and len(rest) > 40, warning


def test_obsolete_warnings_read_well():
    assert lines(obsolete_variables({"NCCL_BUFFSIZE": "8388608"}, CURRENT, instance_type="p5.48xlarge")) == [
        "NCCL_BUFFSIZE: remove it; aws-ofi-nccl 1.21.1 sets NCCL_BUFFSIZE=8388608 itself on p5.48xlarge; setting it "
        "overrides the plugin's per-platform choice (aws-ofi-nccl src/platform-aws.cpp)"
    ]
    assert lines(obsolete_variables({"RDMAV_FORK_SAFE": "1"}, CURRENT)) == [
        "RDMAV_FORK_SAFE: remove it; it is an rdma-core variable that can break things on newer kernels; the plugin "
        "sets FI_EFA_FORK_SAFE where it still matters (aws-ofi-nccl doc/efa-env-var.md)"
    ]


# --- the property -------------------------------------------------------------------------------------------------
VARIABLE_POOL = sorted(
    {d.name for d in nccl.PLUGIN_DEFAULTS}
    | {"FI_EFA_USE_DEVICE_RDMA", "FI_EFA_ENABLE_SHM_TRANSFER", "NCCL_PROTO", "NCCL_ALGO", "NCCL_NVLS_ENABLE"}
    | {"NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "FI_EFA_USE_HUGE_PAGE", "NCCL_MIN_NCHANNELS", "OFI_NCCL_PROTOCOL"}
)
versions_ = st.builds(
    lambda major, minor, patch: f"{major}.{minor}.{patch}",
    st.just(1) | st.just(2),
    st.integers(0, 35),
    st.integers(0, 9),
)


@settings(max_examples=400, deadline=None)
@given(
    instance_type=st.sampled_from(list(catalog.CATALOG)),
    nccl_version=st.sampled_from(["2.12.12", "2.18.3", "2.18.5", "2.21.5", "2.27.7", "2.31.2"]) | versions_,
    ofi=st.sampled_from(["1.4.0", "1.5.0", "1.6.0", "1.7.3", "1.15.0", "1.16.0", "1.17.2", "1.21.1"]) | versions_,
    efa=st.sampled_from(["1.18.0", "1.28.0", "1.29.0", "1.43.2", "1.50.0"]) | versions_,
    user_env=st.dictionaries(st.sampled_from(VARIABLE_POOL), st.sampled_from(["0", "1", "simple", "^lo"]), max_size=5),
)
def test_output_holds_no_obsolete_or_plugin_set_variable_the_user_did_not_set(
    instance_type, nccl_version, ofi, efa, user_env
):
    versions = Versions(nccl_version, ofi, efa)
    floors = lines(nccl.floor_problems(instance_type, versions))
    try:
        result = nccl_environment(
            instance_type,
            nccl_version=nccl_version,
            ofi_nccl_version=ofi,
            efa_installer_version=efa,
            user_env=user_env,
        )
    except ValueError as error:
        assert floors and str(error).splitlines() == [f"{instance_type}: {line}" for line in floors]
        return
    assert not floors
    sets = plugin_defaults(instance_type, versions)
    for name, value in result.items():
        if name in user_env:
            assert value == user_env[name]  # the user wins
            continue
        assert name not in sets, name
        assert obsolete_variables({name: value}, versions, instance_type=instance_type) == [], name
    assert result["NCCL_SOCKET_IFNAME"] == user_env.get("NCCL_SOCKET_IFNAME", SOCKET_IFNAME)


# --- baselines and documentation ----------------------------------------------------------------------------------


def test_baseline_spec_has_the_line_rate_and_the_published_figures():
    assert baseline_spec("p5.48xlarge") == {
        "gpus": 8,
        "efa_gbps": 3200,
        "published": [
            {"nodes": 2, "message_bytes": 16 * 1024**3, "bus_gbs": 487.0, "source": nccl._AWS_SAMPLES},
            {"nodes": 2, "message_bytes": 2 * 1024**3, "bus_gbs": 443.0, "source": nccl._AWS_SAMPLES},
        ],
    }
    assert baseline_spec("p4de.24xlarge")["published"][0]["bus_gbs"] == 78.3
    # GPUs per instance: AWS's accelerated-computing instance specifications (8 H100/H200/B300; 1 A10G on g5.4xlarge)
    assert baseline_spec("p5en.48xlarge") == {"gpus": 8, "efa_gbps": 3200, "published": []}
    # awsome-distributed-ai architectures/aws-pcs/tests/compute-test.md (FACTS.md): 2x p6-b300, 4x p6-b200
    assert [(p["nodes"], p["message_bytes"] // 1024**3, p["bus_gbs"]) for p in baseline_spec("p6-b300.48xlarge")[
        "published"]] == [(2, 16, 654.0), (2, 64, 751.0)]  # fmt: skip
    assert [(p["nodes"], p["message_bytes"] // 1024**3, p["bus_gbs"]) for p in baseline_spec("p6-b200.48xlarge")[
        "published"]] == [(4, 16, 377.0)]  # fmt: skip
    assert baseline_spec("p6-b300.48xlarge")["efa_gbps"] == 6400
    assert baseline_spec("g5.4xlarge") == {"gpus": 1, "efa_gbps": 0, "published": []}  # no EFA below g5.8xlarge
    with pytest.raises(ValueError, match=r"unknown instance type 'x\.large'"):
        baseline_spec("x.large")


@pytest.mark.parametrize(
    ("ofi", "name"),
    [
        # the name each tag's nvidia interface registers (aws/aws-ofi-nccl, `.name =` of ncclNetPlugin_v*)
        ("1.6.0", "AWS Libfabric"),
        ("v1.11.0-aws", "AWS Libfabric"),
        ("v1.12.1-aws", "AWS Libfabric"),
        ("v1.13.0-aws", "Libfabric"),
        ("1.16.3", "Libfabric"),
        ("1.21.1", "Libfabric"),
    ],
)
def test_nccl_net_names_the_plugin_each_version_registers(ofi, name):
    assert nccl.net_plugin_name(Versions(ofi_nccl=ofi)) == name
    assert env("p4d.24xlarge", nccl_version="2.18.5", ofi=ofi, efa="1.29.0")["NCCL_NET"] == name
    assert "NCCL_NET" not in env("g5.4xlarge", ofi=ofi)  # no EFA: NCCL's sockets are the network
    assert "NCCL_NET" not in env("trn1.32xlarge", ofi=ofi)  # no NVIDIA GPU: not NCCL's plugin


def test_without_efa_nothing_efa_only_is_set_even_on_an_efa_type():
    """efa=False (the group's `efa: false`): no NCCL_NET, which would make NCCL fail with no EFA device."""
    without = nccl_environment(
        "p5.48xlarge", nccl_version="2.27.7", ofi_nccl_version="1.16.3", efa_installer_version="1.43.2", efa=False
    )
    assert without == {"NCCL_SOCKET_IFNAME": "^docker,lo,veth"}
    assert env("p5.48xlarge")["NCCL_NET"] == "Libfabric"
