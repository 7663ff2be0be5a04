"""`fmcluster connect FILE`: the node found (stubbed DescribeStacks, ListClusterNodes, GetComputeNodeGroup,
DescribeInstances), StartSession (stubbed ssm), and the Session Manager plugin started as the AWS CLI starts it
(aws-cli awscli/customizations/sessionmanager.py), mocked at the subprocess boundary: the test records the command
line and environment instead of running a plugin, which needs a live session. What stays emulated: the plugin itself
and the WebSocket session it would open."""

from __future__ import annotations

import json
import signal

import pytest

from fmcluster import cli
from fmcluster.live import connect as connect_module
from fmcluster.live.connect import ConnectError, connect, session_request
from tests.live.conftest import PCS_BLOCK, QUICKSTART, config_of
from tests.live.responses import (
    CLUSTER_ARN,
    HEAD_GROUP_ID,
    HYPERPOD_CLUSTER_OUTPUTS,
    PCS_CLUSTER_OUTPUTS,
    SESSION_ID,
    cluster_nodes,
    instances,
    pcs_group,
    session,
    stack_with_outputs,
)

HYPERPOD_ID = CLUSTER_ARN.rsplit("/", 1)[1]
CONTROLLER = f"sagemaker-cluster:{HYPERPOD_ID}_controller-i-0aaaaaaaaaaaaaaa0"
PLUGIN = "/usr/local/bin/session-manager-plugin"


class Plugin:
    """Stands in for subprocess.call of the plugin: records what it was given and which signals were ignored."""

    def __init__(self, status: int = 0, fail: OSError | None = None):
        self.status, self.fail = status, fail
        self.calls: list[tuple[list[str], dict[str, str]]] = []
        self.ignored: list[bool] = []

    def __call__(self, command: list[str], env: dict[str, str]) -> int:
        self.calls.append((command, env))
        self.ignored = [signal.getsignal(signum) == signal.SIG_IGN for signum in connect_module.SIGNALS_TO_PLUGIN]
        if self.fail is not None:
            raise self.fail
        return self.status


def queue_hyperpod(stub) -> None:
    outputs = HYPERPOD_CLUSTER_OUTPUTS
    stub.ok(
        "cloudformation",
        "DescribeStacks",
        stack_with_outputs("quickstart", "cluster", outputs),
        {"StackName": "quickstart-cluster"},
    )
    stub.ok(
        "sagemaker",
        "ListClusterNodes",
        cluster_nodes(
            ("controller", "i-0aaaaaaaaaaaaaaa0", "Running", ""),
            ("gpu", "i-0bbbbbbbbbbbbbbb0", "Running", ""),
            ("gpu", "i-0bbbbbbbbbbbbbbb1", "Running", ""),
        ),
        {"ClusterName": "quickstart"},
    )


def run(stub, config, plugin: Plugin, *, version=(1, 2, 694, 0), which=PLUGIN, **options) -> tuple[int, list[str]]:
    said: list[str] = []
    status = connect(
        config,
        stub.aws(),
        say=said.append,
        which=lambda name: which,
        run=plugin,
        version=lambda path: version,
        environ={"AWS_PROFILE": "research"},
        **options,
    )
    return status, said


def test_a_shell_on_the_hyperpod_controller_as_the_aws_cli_starts_it(stubs):
    stub = stubs()
    queue_hyperpod(stub)
    stub.ok("ssm", "StartSession", session(), {"Target": CONTROLLER})
    plugin = Plugin(status=0)
    before = signal.getsignal(signal.SIGINT)
    status, said = run(stub, config_of(QUICKSTART), plugin)
    assert status == 0
    assert said == [
        "controller i-0aaaaaaaaaaaaaaa0 (sagemaker ListClusterNodes ClusterName=quickstart); the same session by hand:",
        f"  aws ssm start-session --region us-east-1 --target {CONTROLLER}",
    ]
    [(command, env)] = plugin.calls
    # A plugin newer than 1.2.497.0 reads the response from the environment, not from its command line.
    assert command == [
        PLUGIN,
        "AWS_SSM_START_SESSION_RESPONSE",
        "us-east-1",
        "StartSession",
        "research",
        json.dumps({"Target": CONTROLLER}),
        "https://ssm.us-east-1.amazonaws.com",
    ]
    assert json.loads(env["AWS_SSM_START_SESSION_RESPONSE"]) == session()
    assert plugin.ignored == [True, True, True]  # Ctrl-C, Ctrl-\ and Ctrl-Z go to the plugin while it runs
    assert signal.getsignal(signal.SIGINT) == before  # and come back afterwards


def test_an_old_plugin_gets_the_response_as_its_first_argument(stubs):
    stub = stubs()
    queue_hyperpod(stub)
    stub.ok("ssm", "StartSession", session(), {"Target": CONTROLLER})
    plugin = Plugin()
    run(stub, config_of(QUICKSTART), plugin, version=(1, 2, 497, 0))
    [(command, env)] = plugin.calls
    assert json.loads(command[1]) == session() and "AWS_SSM_START_SESSION_RESPONSE" not in env


def test_a_named_group_a_cluster_user_and_a_port_forward(stubs):
    stub = stubs()
    second = f"sagemaker-cluster:{HYPERPOD_ID}_gpu-i-0bbbbbbbbbbbbbbb0"
    queue_hyperpod(stub)
    stub.ok(
        "ssm",
        "StartSession",
        session(),
        {
            "Target": second,
            "DocumentName": "AWS-StartInteractiveCommand",
            "Parameters": {"command": ["sudo -iu alice"]},
        },
    )
    queue_hyperpod(stub)
    stub.ok(
        "ssm",
        "StartSession",
        session(),
        {
            "Target": CONTROLLER,
            "DocumentName": "AWS-StartPortForwardingSession",
            "Parameters": {"portNumber": ["3000"], "localPortNumber": ["8300"]},
        },
    )
    plugin = Plugin()
    _, said = run(stub, config_of(QUICKSTART), plugin, group="gpu", user="alice")
    assert said[1] == (
        f"  aws ssm start-session --region us-east-1 --target {second} --document-name AWS-StartInteractiveCommand "
        """--parameters '{"command":["sudo -iu alice"]}'"""
    )
    _, said = run(stub, config_of(QUICKSTART), plugin, port_forward="8300:3000")
    assert said[1].endswith(
        "--document-name AWS-StartPortForwardingSession "
        """--parameters '{"portNumber":["3000"],"localPortNumber":["8300"]}'"""
    )


def test_pcs_login_node_and_a_compute_group_by_name(stubs):
    stub = stubs()
    config = config_of(PCS_BLOCK, orchestrator={"type": "pcs", "login_instance_type": "m5.4xlarge"})
    outputs = PCS_CLUSTER_OUTPUTS
    for group_id, instance in ((HEAD_GROUP_ID, "i-0ccccccccccccccc0"), ("pcs_5f6a7b8c9d", "i-0ddddddddddddddd0")):
        stub.ok(
            "cloudformation",
            "DescribeStacks",
            stack_with_outputs("llm-pretrain", "cluster", outputs),
            {"StackName": "llm-pretrain-cluster"},
        )
        if group_id != HEAD_GROUP_ID:
            stub.ok(
                "pcs",
                "GetComputeNodeGroup",
                pcs_group("gpu", group_id),
                {"clusterIdentifier": "llm-pretrain", "computeNodeGroupIdentifier": "gpu"},
            )
        stub.ok(
            "ec2",
            "DescribeInstances",
            instances(instance),
            {
                "Filters": [
                    {"Name": "instance-state-name", "Values": ["running"]},
                    {"Name": "tag:aws:pcs:compute-node-group-id", "Values": [group_id]},
                ]
            },
        )
        stub.ok("ssm", "StartSession", session(), {"Target": instance})
    plugin = Plugin()
    assert run(stub, config, plugin)[1][0].startswith("login i-0ccccccccccccccc0 (ec2 DescribeInstances tag:")
    assert run(stub, config, plugin, group="gpu")[1][0].startswith("gpu i-0ddddddddddddddd0 ")


def test_without_the_plugin_the_command_is_printed_and_no_session_is_opened(stubs):
    stub = stubs()
    queue_hyperpod(stub)  # no StartSession queued: calling it would fail the test
    said: list[str] = []
    with pytest.raises(ConnectError) as raised:
        connect(config_of(QUICKSTART), stub.aws(), say=said.append, which=lambda name: None)
    assert said[1] == f"  aws ssm start-session --region us-east-1 --target {CONTROLLER}"
    assert str(raised.value).startswith("the Session Manager plugin (session-manager-plugin) is not on PATH; install")


def test_a_plugin_that_cannot_start_terminates_the_session(stubs):
    stub = stubs()
    queue_hyperpod(stub)
    stub.ok("ssm", "StartSession", session(), {"Target": CONTROLLER})
    stub.ok("ssm", "TerminateSession", {"SessionId": SESSION_ID}, {"SessionId": SESSION_ID})
    with pytest.raises(ConnectError, match=r"could not start /usr/local/bin/session-manager-plugin: .*Exec format"):
        run(stub, config_of(QUICKSTART), Plugin(fail=OSError(8, "Exec format error")))


def test_no_running_node_is_one_line(stubs):
    stub = stubs()
    queue_hyperpod(stub)
    with pytest.raises(
        ConnectError,
        match=r"^HyperPod cluster quickstart has no node in group login \(groups: "
        r"controller, gpu\)$",
    ):
        run(stub, config_of(QUICKSTART), Plugin(), group="login")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"user": "Alice"}, "--user: not a Linux user name (lowercase letters, digits, '_', '-'); got 'Alice'"),
        ({"port_forward": "3000"}, "--port-forward: LOCAL:REMOTE ports of 1-65535, e.g. 3000:3000; got '3000'"),
        ({"port_forward": "0:3000"}, "--port-forward: LOCAL:REMOTE ports of 1-65535, e.g. 3000:3000; got '0:3000'"),
        (
            {"user": "alice", "port_forward": "1:2"},
            "--user and --port-forward do not go together: a forwarded port has no shell user",
        ),
    ],
)
def test_bad_options_fail_before_any_call(options, message):
    with pytest.raises(ConnectError) as raised:
        session_request("i-0123456789abcdef0", **options)
    assert str(raised.value) == message


def test_cli_connect_without_credentials_exits_2_with_one_line_and_the_command_to_run_later(
    tmp_path, monkeypatch, capsys
):
    path = tmp_path / "cluster.yaml"
    path.write_text(QUICKSTART)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    assert cli.main(["connect", str(path), "--port-forward", "3000:3000"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"{path}: connect: no AWS credentials found (Unable to locate credentials); set AWS_PROFILE or run `aws "
        "configure`",
        "  the session by hand, once you have credentials: aws ssm start-session --region us-east-1 --target "
        "'sagemaker-cluster:<cluster-id>_controller-<instance-id>' --document-name AWS-StartPortForwardingSession "
        """--parameters '{"portNumber":["3000"],"localPortNumber":["3000"]}'""",
    ]


def test_cli_connect_bad_port_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "cluster.yaml"
    path.write_text(QUICKSTART)
    assert cli.main(["connect", str(path), "--port-forward", "99999:1"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{path}: connect: --port-forward: LOCAL:REMOTE ports of 1-65535, e.g. 3000:3000; got '99999:1'"
    ]


def test_first_job_policy_advice_names_every_document_connect_starts():
    """docs/first-job.md tells readers which session documents to allow in ssm:StartSession; a plain session uses the
    default SSM-SessionManagerRunShell (SSM user guide, "Specify the default session document in IAM policies"), so
    leaving it out of the advice would make `fmcluster connect` fail with AccessDenied."""
    from pathlib import Path

    from fmcluster.live import connect as connect_module

    advice = (Path(__file__).parents[2] / "docs" / "first-job.md").read_text()
    documents = ("SSM-SessionManagerRunShell", connect_module.PORT_FORWARD, connect_module.INTERACTIVE_COMMAND)
    assert [document for document in documents if f"document/{document}" not in advice] == []


def test_a_plugin_that_cannot_say_its_version_fails_before_any_session_starts(stubs):
    """The version probe runs before StartSession (the Stubber has none queued: a StartSession would fail the test
    with an unstubbed call), so a broken plugin leaves no session open and prints one line, not a traceback."""
    import subprocess

    stub = stubs()
    queue_hyperpod(stub)

    def broken(path: str) -> tuple[int, ...]:
        raise subprocess.CalledProcessError(126, [path, "--version"])

    plugin = Plugin(status=0)
    with pytest.raises(ConnectError) as raised:
        connect(config_of(QUICKSTART), stub.aws(), say=lambda line: None, which=lambda name: PLUGIN, run=plugin,
                version=broken, environ={})  # fmt: skip
    assert str(raised.value) == (
        f"could not run {PLUGIN} --version: Command '['{PLUGIN}', '--version']' returned non-zero exit status 126."
    )
    assert plugin.calls == []
