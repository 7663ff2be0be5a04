"""`fmcluster connect FILE`: a Session Manager session to the cluster's head node, or to a named group or node.

The target comes from `fmcluster.live.nodes` (HyperPod's `sagemaker-cluster:<id>_<group>-<instance>` form, or a PCS
instance id). The session is what `aws ssm start-session` would open, and the command that does the same is always
printed first, so nothing is hidden and it can be run by hand. Then, as the AWS CLI does
(aws-cli awscli/customizations/sessionmanager.py): StartSession through boto3, and the Session Manager plugin started
with the response (in the environment variable AWS_SSM_START_SESSION_RESPONSE for plugins newer than 1.2.497.0, as an
argument for older ones), the region, "StartSession", the profile, the request and the endpoint; Ctrl-C and friends
go to the plugin, not to this process. When the plugin cannot be started the session is terminated at once.

Session documents (SSM user guide, "Start a session"; "Turn on Run As support for Linux and macOS managed nodes"):
- default: a shell (SSM-SessionManagerRunShell). On HyperPod that shell is root (SageMaker developer guide,
  "Accessing your SageMaker HyperPod cluster nodes"), on PCS `ssm-user`, whom SSM Agent puts in sudoers.
- `--port-forward LOCAL:REMOTE`: AWS-StartPortForwardingSession with portNumber=REMOTE, localPortNumber=LOCAL, e.g.
  Grafana on the head node's 3000.
- `--user NAME`: Session Manager's own Run As is an account-wide preference or an `SSMSessionRunAs` tag on the caller's
  IAM user or role, not a per-session choice; for one session fmcluster runs AWS-StartInteractiveCommand with
  `sudo -iu NAME` (a login shell of that user), which needs the session's user to have sudo (root and ssm-user do;
  with Run As turned on account-wide, the Run As user must).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from fmcluster.config import ClusterConfig, orchestrators
from fmcluster.config.users import USER_NAME_PATTERN
from fmcluster.live.aws import Aws
from fmcluster.live.info import read_stack
from fmcluster.live.nodes import Node, NodeNotFound

PLUGIN = "session-manager-plugin"
PLUGIN_INSTALL = (
    "https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-working-with-install-plugin.html"
)
LAST_PLUGIN_WITHOUT_ENV = (1, 2, 497, 0)
"""Plugins newer than this read the StartSession response from AWS_SSM_START_SESSION_RESPONSE (aws-cli)."""
RESPONSE_VARIABLE = "AWS_SSM_START_SESSION_RESPONSE"
PORT_FORWARD = "AWS-StartPortForwardingSession"
INTERACTIVE_COMMAND = "AWS-StartInteractiveCommand"
PORTS = re.compile(r"^([0-9]{1,5}):([0-9]{1,5})$")
SIGNALS_TO_PLUGIN = (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP)
"""What aws-cli's ignore_user_entered_signals leaves to the plugin."""


class ConnectError(Exception):
    """One line for the user (exit 2)."""


@dataclass(frozen=True)
class SessionRequest:
    target: str
    document: str | None = None
    parameters: dict[str, list[str]] | None = None

    def api_parameters(self) -> dict:
        request: dict = {"Target": self.target}
        if self.document:
            request["DocumentName"] = self.document
        if self.parameters:
            request["Parameters"] = self.parameters
        return request

    def cli_command(self, region: str) -> str:
        """The `aws ssm start-session` command that opens the same session."""
        words = ["aws", "ssm", "start-session", "--region", region, "--target", self.target]
        if self.document:
            words += ["--document-name", self.document]
        if self.parameters:
            words += ["--parameters", json.dumps(self.parameters, separators=(",", ":"))]
        return shlex.join(words)


def session_request(target: str, *, user: str | None = None, port_forward: str | None = None) -> SessionRequest:
    """The StartSession request for `target`; ConnectError for a bad user or port pair.

    >>> session_request("i-0123456789abcdef0", port_forward="3000:3000").parameters
    {'portNumber': ['3000'], 'localPortNumber': ['3000']}
    >>> session_request("i-0123456789abcdef0", user="alice").parameters
    {'command': ['sudo -iu alice']}
    """
    if user is not None and port_forward is not None:
        raise ConnectError("--user and --port-forward do not go together: a forwarded port has no shell user")
    if port_forward is not None:
        local, remote = parse_ports(port_forward)
        return SessionRequest(target, PORT_FORWARD, {"portNumber": [str(remote)], "localPortNumber": [str(local)]})
    if user is not None:
        if not USER_NAME_PATTERN.match(user):
            raise ConnectError(f"--user: not a Linux user name (lowercase letters, digits, '_', '-'); got {user!r}")
        return SessionRequest(target, INTERACTIVE_COMMAND, {"command": [f"sudo -iu {user}"]})
    return SessionRequest(target)


def parse_ports(text: str) -> tuple[int, int]:
    """'8080:3000' -> (8080, 3000).

    >>> parse_ports("8080:3000")
    (8080, 3000)
    """
    match = PORTS.match(text)
    ports = (int(match[1]), int(match[2])) if match else ()
    if not ports or not all(1 <= port <= 65535 for port in ports):
        raise ConnectError(f"--port-forward: LOCAL:REMOTE ports of 1-65535, e.g. 3000:3000; got {text!r}")
    return ports


def find_node(config: ClusterConfig, aws: Aws, *, group: str | None = None, node: str | None = None) -> Node:
    """The node a session goes to: `node` (an instance id), else the first running node of `group`, else the head
    node the cluster stack names (the orchestrator's SESSION_NODE). NodeNotFound when there is none."""
    stack = read_stack(aws, "cluster", f"{config.name}-cluster")
    if stack.status is None:
        raise NodeNotFound(f"stack {stack.name} is not deployed")
    return orchestrators.resolve(orchestrators.of(config.orchestrator.type).SESSION_NODE)(
        config, aws, stack, group=group, node=node
    )


def placeholder_target(config: ClusterConfig, group: str | None, node: str | None) -> str:
    """The target's form, for the command printed when the real one cannot be looked up."""
    return orchestrators.of(config.orchestrator.type).placeholder_target(group, node)


def plugin_version(plugin: str, run: Callable[..., str] = subprocess.check_output) -> tuple[int, ...]:
    """The plugin's version as numbers; () when it prints something else."""
    text = re.sub(r"\s+", "", run([plugin, "--version"], text=True))
    return tuple(int(part) for part in text.split(".")) if re.fullmatch(r"\d+(\.\d+){0,3}", text) else ()


@contextlib.contextmanager
def signals_left_to_the_plugin() -> Iterator[None]:
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in SIGNALS_TO_PLUGIN}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def start(
    aws: Aws,
    request: SessionRequest,
    *,
    plugin: str,
    run: Callable[..., int] = subprocess.call,
    version: Callable[[str], tuple[int, ...]] = plugin_version,
    environ: dict[str, str] | None = None,
) -> int:
    """StartSession, then the plugin on the response, as the AWS CLI runs it; the plugin's exit status."""
    try:  # before StartSession: a plugin that cannot even say its version leaves no session open on the node
        plugin_is_new = version(plugin) > LAST_PLUGIN_WITHOUT_ENV
    except (OSError, subprocess.CalledProcessError) as error:
        raise ConnectError(f"could not run {plugin} --version: {error}") from None
    client = aws.client("ssm")
    parameters = request.api_parameters()
    response = aws.call("ssm", "StartSession", **parameters)
    session = json.dumps({key: response[key] for key in ("SessionId", "TokenValue", "StreamUrl")})
    env = dict(os.environ if environ is None else environ)
    argument = session
    if plugin_is_new:
        env[RESPONSE_VARIABLE] = session  # not on the command line, where `ps` shows it
        argument = RESPONSE_VARIABLE
    command = [plugin, argument, aws.region, "StartSession", env.get("AWS_PROFILE", ""), json.dumps(parameters),
               client.meta.endpoint_url]  # fmt: skip
    try:
        with signals_left_to_the_plugin():
            return run(command, env=env)
    except OSError as error:
        aws.call("ssm", "TerminateSession", SessionId=response["SessionId"])  # no session left open on the node
        raise ConnectError(f"could not start {plugin}: {error}") from None


def connect(
    config: ClusterConfig,
    aws: Aws,
    *,
    group: str | None = None,
    node: str | None = None,
    user: str | None = None,
    port_forward: str | None = None,
    say: Callable[[str], None] = print,
    which: Callable[[str], str | None] = shutil.which,
    **start_options,
) -> int:
    """Find the node, print the equivalent AWS CLI command, then open the session (ConnectError: one line, exit 2)."""
    session_request("-", user=user, port_forward=port_forward)  # bad options fail before any call
    try:
        chosen = find_node(config, aws, group=group, node=node)
    except NodeNotFound as error:
        raise ConnectError(str(error)) from None
    request = session_request(chosen.target, user=user, port_forward=port_forward)
    say(f"{chosen.group} {chosen.instance_id} ({chosen.found_by}); the same session by hand:")
    say(f"  {request.cli_command(aws.region)}")
    plugin = which(PLUGIN)
    if plugin is None:
        raise ConnectError(f"the Session Manager plugin ({PLUGIN}) is not on PATH; install it ({PLUGIN_INSTALL})")
    return start(aws, request, plugin=plugin, **start_options)
