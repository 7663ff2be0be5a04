"""Each capacity block's and training plan's window (start, end, state), for `fmcluster info`.

Read-only: EC2 DescribeCapacityReservations (State, StartDate, EndDate) for every capacity block of the file, SageMaker
DescribeTrainingPlan (Status, StartTime, EndTime) for every training plan. The file holds only the ids, so the window
is known live only (`fmcluster plan` says so). A read that is refused, throttled or fails is a line saying why, never
a failure of `info`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig
from fmcluster.live.aws import Aws, Denied, Throttled
from fmcluster.live.capacity import window_text
from fmcluster.live.runner import stopped_reason


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

    def line(self, now: datetime) -> str:
        head = f"{self.kind} {self.name} ({', '.join(self.groups)})"
        if self.not_read:
            return f"{head}: window not read: {self.not_read}"
        drain = f"; its nodes drain {self.drain_minutes} min before its end" if self.drain_minutes else ""
        return f"{head}: {self.state}, {window_text(self.start, self.end, now)}{drain}"

    def as_json(self) -> dict:
        stamp = lambda moment: moment.astimezone(UTC).isoformat() if moment else None  # noqa: E731
        return {"kind": self.kind, "id": self.name, "groups": self.groups, "state": self.state or None,
                "start": stamp(self.start), "end": stamp(self.end),
                "drain_before_end_minutes": self.drain_minutes}  # fmt: skip


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
