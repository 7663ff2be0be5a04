"""The two enterprise-guardrail scanners the gates run over synthesized templates.

- The AWS Control Tower proactive controls, as the cfn-guard rules cdklabs ships in `cdklabs.cdk-validator-cfnguard`
  (`CfnGuardValidator`, pinned in the dev extra; it bundles the cfn-guard binary and runs offline). It is added to the
  test synth only; `@aws-cdk/core:failSynthOnValidationErrors` is off there so synth writes CDK's validation report
  (cdk.out/validation-report.json) instead of stopping, and the findings left after CDK's acknowledgments are read
  from that report.
- checkov, pinned in tests/gates/checkov-requirements.txt and installed by `make test` into its own virtual
  environment (.checkov/): it pins boto3, packaging and others that clash with the dev extra. It honours each
  resource's `Metadata.checkov.skip`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKOV = REPO / ".checkov" / "bin" / "checkov"
GUARD_PLUGIN = "cdk-validator-cfnguard"
NAG_PLUGIN = "AwsSolutions"
"""The name cdk-nag's AwsSolutionsChecks reports under in CDK's validation report."""
VALIDATION_REPORT = "validation-report.json"
FAIL_SYNTH_ON_VALIDATION_ERRORS = "@aws-cdk/core:failSynthOnValidationErrors"


def guard_validator():
    """The Control Tower rules as a CDK validation plugin (imported late: every jsii import costs a round trip)."""
    from cdklabs.cdk_validator_cfnguard import CfnGuardValidator

    return CfnGuardValidator()


def guard_findings(outdir: Path) -> list[str]:
    """`<rule> <construct path>` for every Control Tower finding CDK's acknowledgments left in the report."""
    return plugin_findings(outdir, GUARD_PLUGIN)


def plugin_findings(outdir: Path, name: str) -> list[str]:
    """`<rule> <construct path>` for every finding of validation plugin `name` CDK's acknowledgments left in the
    report (no report: none, as CDK writes it only when a plugin finds something)."""
    if not (outdir / VALIDATION_REPORT).is_file():
        return []
    report = json.loads((outdir / VALIDATION_REPORT).read_text())
    findings = []
    for plugin in report["pluginReports"]:
        if plugin.get("summary", {}).get("pluginName", plugin.get("pluginName")) != name:
            continue
        for violation in plugin.get("violations", []):
            for resource in violation.get("violatingConstructs", violation.get("violatingResources", [])):
                where = resource.get("constructPath") or resource.get("resourceLogicalId")
                findings.append(f"{violation['ruleName']} {where}")
    return sorted(findings)


def checkov_findings(templates: list[Path]) -> tuple[list[str], int]:
    """(`<check id> <resource> (<template>)` of every failed check, number of passed checks) over `templates`."""
    if not CHECKOV.exists():
        raise AssertionError(f"checkov is missing at {CHECKOV}: run `make test` (it installs it there)")
    command = [str(CHECKOV), "--framework", "cloudformation", "--output", "json", "--compact"]
    for template in templates:
        command += ["--file", str(template)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if result.returncode not in (0, 1):
        raise AssertionError(f"checkov failed ({result.returncode}): {result.stderr[-2000:]}")
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failed, passed = [], 0
    for report in reports:
        results = report.get("results", {})
        passed += len(results.get("passed_checks", []))
        for check in results.get("failed_checks", []):
            failed.append(f"{check['check_id']} {check['resource']} ({Path(check['file_path']).name})")
    return sorted(failed), passed
