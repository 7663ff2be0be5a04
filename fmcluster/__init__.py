"""fmcluster: foundation-model training clusters on AWS from one cluster file, as a CDK app and a construct library.

Where to look:

- `config/` the cluster file: `models` (typed keys), `checks` (every rule the file and the constructs share, written
  once), `rules` (rules across sections), `errors` (`FILE: key.path: message`), `loader`, `source`, `regions`.
- `constructs/` the L3 constructs, each module named after the construct it holds (see its docstring);
  `constructs/hyperpod/` splits HyperPod into the cluster, its execution role and its lifecycle scripts.
- `stacks/` short mappings from a validated cluster file to construct props, one stack per deployable part.
- Pure logic with no CDK: `catalog` (instance types, EFA layout), `addressing` (subnet plan), `nccl` (the NCCL
  environment and baselines), `sizing` (Lustre and checkpoint sizing), `advice` (plan notes).
- `live/` read-only calls to a live account, never at synth time: `fmcluster validate --live` (preflight: capacity,
  instances, quotas, node_image, data, bootstrap) and `fmcluster diagnose` (stacks, hyperpod, pcs, image_build,
  results_and_alarms, the known-causes table `causes`), on a shared layer (`aws`: the IAM action of every call;
  `runner`).
- `node_scripts` (node user data and bundle) packs `node/` (the scripts run on nodes); `lambdas/` the function code;
  `dashboards/` and `image/` package data; `cli` the `fmcluster` command.
"""
