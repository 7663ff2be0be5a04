"""Each capacity block's and training plan's window (start, end, state), for `fmcluster info`.

Read-only: EC2 DescribeCapacityReservations (State, StartDate, EndDate) for every capacity block of the file, then EC2
DescribeCapacityBlockStatus of its block (CapacityBlockId: InterconnectStatus ok | impaired | insufficient-data,
TotalCapacity, TotalUnavailableCapacity; botocore ec2), SageMaker DescribeTrainingPlan (Status, StartTime, EndTime) for
every training plan. The file holds only the ids, so the window is known live only (`fmcluster plan` says so). A read
that is refused, throttled or fails is a line saying why, never a failure of `info`; `diagnose` reports the same
windows as findings (`window_checks`): an impaired interconnect or unavailable instances are warnings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig
from fmcluster.live.aws import Aws, Denied, Throttled
from fmcluster.live.capacity import block_status, window_text
from fmcluster.live.findings import Collected, Finding, finding, unknown
from fmcluster.live.runner import Check, stopped_reason


@dataclass
class Window:
    kind: str
    """"capacity block" or "training plan"."""
    name: str
    groups: list[str]
    drain_minutes: int | None = None
    state: str = ""
    start: datetime | None = None
    end: datetime | None = None
    not_read: str = ""
    interconnect: str = ""
    """A capacity block's InterconnectStatus ("" when not read: no block id, or its status not read)."""
    total: int | None = None
    unavailable: int = 0
    status_not_read: str = ""

    @property
    def status(self) -> str:
        """'interconnect ok, 16 of 16 instances available', or why the block's status was not read ("" for a plan)."""
        if self.status_not_read:
            return f"status not read: {self.status_not_read}"
        if self.total is None:
            return ""
        return (
            f"interconnect {self.interconnect or 'unknown'}, {self.total - self.unavailable} of {self.total} instances "
            "available"
        )

    @property
    def degraded(self) -> bool:
        """The block reports an impaired interconnect or instances unavailable (a failed system status check)."""
        return self.interconnect == "impaired" or self.unavailable > 0

    def text(self, now: datetime) -> str:
        """The window, its status and its drain: 'active, started ..., ends ...; interconnect ok, ...; ...'."""
        if self.not_read:
            return f"window not read: {self.not_read}"
        drain = f"; its nodes drain {self.drain_minutes} min before its end" if self.drain_minutes else ""
        status = f"; {self.status}" if self.status else ""
        return f"{self.state}, {window_text(self.start, self.end, now)}{status}{drain}"

    def line(self, now: datetime) -> str:
        return f"{self.kind} {self.name} ({', '.join(self.groups)}): {self.text(now)}"

    def as_json(self) -> dict:
        stamp = lambda moment: moment.astimezone(UTC).isoformat() if moment else None  # noqa: E731
        return {"kind": self.kind, "id": self.name, "groups": self.groups, "state": self.state or None,
                "start": stamp(self.start), "end": stamp(self.end),
                "drain_before_end_minutes": self.drain_minutes, "interconnect": self.interconnect or None,
                "total_capacity": self.total,
                "unavailable_capacity": self.unavailable if self.total is not None else None}  # fmt: skip


def capacity_windows(config: ClusterConfig, aws: Aws) -> list[Window]:
    """The window of every capacity block and training plan `config` names, in file order."""
    windows: dict[str, Window] = {}
    for group in config.compute:
        key = group.reservation_id if group.capacity == "capacity-block" else group.training_plan_arn
        if not key:
            continue
        if key in windows:
            windows[key].groups.append(group.name)
            windows[key].drain_minutes = max(windows[key].drain_minutes or 0, group.drain_before_end_minutes or 0)
            continue
        kind = "capacity block" if group.capacity == "capacity-block" else "training plan"
        windows[key] = Window(kind, key.rsplit("/", 1)[-1], [group.name], group.drain_before_end_minutes or None)
    for window in windows.values():
        try:
            if window.kind == "capacity block":
                found = aws.call("ec2", "DescribeCapacityReservations", CapacityReservationIds=[window.name])
                row = found["CapacityReservations"][0]
                window.state, window.start, window.end = row.get("State", ""), row.get("StartDate"), row.get("EndDate")
                _read_block_status(window, aws, row)
            else:
                plan = aws.call("sagemaker", "DescribeTrainingPlan", TrainingPlanName=window.name)
                window.state, window.start, window.end = (
                    plan.get("Status", ""),
                    plan.get("StartTime"),
                    plan.get("EndTime"),
                )
        except (Denied, Throttled, ClientError) as error:
            window.not_read = stopped_reason(error)
    return list(windows.values())


def _read_block_status(window: Window, aws: Aws, reservation: dict) -> None:
    """The block's interconnect and capacity (DescribeCapacityBlockStatus), when the reservation names its block."""
    block_id = reservation.get("CapacityBlockId")
    if not block_id:
        return
    try:
        row, mine = block_status(aws, block_id, window.name)
    except (Denied, Throttled, ClientError) as error:
        window.status_not_read = stopped_reason(error)
        return
    if row is None or mine is None:
        window.status_not_read = f"EC2 DescribeCapacityBlockStatus returned no status for {block_id}"
        return
    window.interconnect = row.get("InterconnectStatus", "")
    window.total, window.unavailable = mine["TotalCapacity"], mine.get("TotalUnavailableCapacity", 0)


def window_checks(config: ClusterConfig, aws: Aws, kept: Collected, now: datetime | None = None) -> list[Check]:
    """`diagnose`'s check of every capacity block's and training plan's window and status (none when the file names
    none): one finding per window, ok, a warning for a degraded block, or unknown when it could not be read."""
    if not any(group.reservation_id or group.training_plan_arn for group in config.compute):
        return []
    return [Check("capacity windows", "compute[].capacity", lambda: window_findings(config, aws, kept, now))]


def window_findings(config: ClusterConfig, aws: Aws, kept: Collected, now: datetime | None = None) -> list[Finding]:
    windows = capacity_windows(config, aws)
    kept.keep("capacity-windows", [window.as_json() for window in windows])
    moment = now or datetime.now(UTC)
    findings = []
    for window in windows:
        subject = f"{window.kind} {window.name}"
        text = window.text(moment)
        if window.not_read:
            findings.append(unknown(subject, "its window", window.not_read, key="compute[].capacity"))
        elif window.status_not_read:
            findings.append(unknown(subject, f"its status ({text})", window.status_not_read, key="compute[].capacity"))
        else:
            findings.append(finding("warning" if window.degraded else "ok", subject, text, key="compute[].capacity"))
    return findings
