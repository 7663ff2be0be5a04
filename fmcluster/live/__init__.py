"""Read-only checks of a live AWS account, for `fmcluster validate --live` (and `fmcluster diagnose`).

One module per family of checks (preflight: capacity, instances, quotas, images, data, bootstrap; diagnosis:
stacks, hyperpod, pcs, image, validation, with causes, findings, logs and redact), on a small shared layer:
`aws` (session, paginators, the IAM action of every call, denied, throttled and credential errors, rate limits)
and `runner` (concurrent checks with a progress display; a check that could not run is "not checked", never ok).
Nothing here runs at synth time.
"""

from fmcluster.live.aws import ACTIONS, Aws, Denied, NoCredentials
from fmcluster.live.diagnose import diagnose
from fmcluster.live.preflight import preflight
from fmcluster.live.runner import is_error, is_unchecked

__all__ = ["ACTIONS", "Aws", "Denied", "NoCredentials", "diagnose", "is_error", "is_unchecked", "preflight"]
