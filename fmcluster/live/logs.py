"""The last lines of a CloudWatch Logs stream, read back page by page until there are enough or the stream ends.

CloudWatch Logs API reference, GetLogEvents (botocore's logs model carries the text): "A returned page might only be
partially full, or even empty ... Partially full or empty pages don't necessarily mean that pagination is finished.
As long as the nextBackwardToken or nextForwardToken returned is NOT equal to the nextToken that you passed into
the API call, there might be more log events available"; "If you have reached the end of the stream, it returns the
same token you passed in". botocore has no paginator for GetLogEvents, so the pages are walked here, backwards from
the newest event (startFromHead false).
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from fmcluster.live.aws import Aws, error_code

MAX_PAGES = 20
"""Pages read at most for one tail: empty pages come in runs when a stream had a quiet time; 20 is far past any seen."""


def log_tail(aws: Aws, group: str, stream: str, lines: int) -> list[str] | None:
    """The last `lines` messages of the stream (oldest first), or None when the stream (or group) does not exist."""
    events: list[dict] = []
    token: str | None = None
    params = {"logGroupName": group, "logStreamName": stream, "limit": lines, "startFromHead": False}
    try:
        for _ in range(MAX_PAGES):
            page = aws.call("logs", "GetLogEvents", **params, **({"nextToken": token} if token else {}))
            events = page.get("events", []) + events
            following = page.get("nextBackwardToken")
            if len(events) >= lines or not following or following == token:
                break
            token = following
    except ClientError as error:
        if error_code(error) != "ResourceNotFoundException":
            raise
        return None
    return [event["message"].rstrip() for event in events[-lines:]]
