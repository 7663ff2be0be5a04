"""The redactor against a corpus of the secret shapes that really appear in what `diagnose` reads, and against what
must stay readable. Each entry names where its shape comes from (an AWS or RFC example, a tool's documented output);
the values are those examples' or of the same form. `SECRETS` lists every secret value of the corpus, so the collect
test (test_diagnose.py) can assert that none of them reaches the archive.
"""

from __future__ import annotations

import json

import pytest

from fmcluster.live.redact import REDACTED, redact, redact_text

SESSION_TOKEN = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQDsampleSessionTokenValue0123456789abcdefXYZ="
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = (  # RFC 7519, section 3.1: the example JWT
    "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvb"
    "S9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
)
PEM_BODY = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
)
"""Lines of RFC 7468's RSA private key example, section 10 (the body of a PKCS #1 key)."""

CORPUS: dict[str, tuple[object, tuple[str, ...]]] = {
    # EC2 user guide, "Retrieve security credentials from instance metadata": the document IMDS returns at
    # /latest/meta-data/iam/security-credentials/<role>, here printed into a node log by `curl`.
    "imds-credentials-json": (
        '{\n  "Code" : "Success",\n  "LastUpdated" : "2026-11-30T09:35:00Z",\n  "Type" : "AWS-HMAC",\n'
        f'  "AccessKeyId" : "ASIAIOSFODNN7EXAMPLE",\n  "SecretAccessKey" : "{SECRET_KEY}",\n'
        f'  "Token" : "{SESSION_TOKEN}",\n  "Expiration" : "2026-11-30T15:35:00Z"\n}}',
        ("ASIAIOSFODNN7EXAMPLE", SECRET_KEY, SESSION_TOKEN),
    ),
    # The same document as one console line after cloud-init's prefix (not parseable as JSON as a whole).
    "imds-credentials-in-a-log-line": (
        f'[   14.2] cloud-init[1714]: {{"Code":"Success","AccessKeyId":"ASIAIOSFODNN7EXAMPLE","SecretAccessKey":'
        f'"{SECRET_KEY}","Token":"{SESSION_TOKEN}"}}',
        ("ASIAIOSFODNN7EXAMPLE", SECRET_KEY, SESSION_TOKEN),
    ),
    # AWS CLI command reference, `aws sts assume-role`, example output (JSON).
    "sts-assume-role-json": (
        {
            "AssumedRoleUser": {
                "AssumedRoleId": "AROA3XFRBF535PLBIFPI4:s3-access-example",
                "Arn": "arn:aws:sts::123456789012:assumed-role/xaccounts3access/s3-access-example",
            },
            "Credentials": {
                "SecretAccessKey": "9drTJvcXLB89EXAMPLELB8923FB892xMFI",
                "SessionToken": "AQoXdzELDDY//////////wEaoAK1wvxJY12r2IrDWWEXAMPLEtoken",
                "Expiration": "2016-03-15T00:05:07Z",
                "AccessKeyId": "ASIAJEXAMPLEXEG2JICEA",
            },
        },
        (
            "9drTJvcXLB89EXAMPLELB8923FB892xMFI",
            "AQoXdzELDDY//////////wEaoAK1wvxJY12r2IrDWWEXAMPLEtoken",
            "ASIAJEXAMPLEXEG2JICEA",
        ),
    ),
    # The same with `--output yaml` (AWS CLI user guide, output formats), as text.
    "sts-assume-role-yaml": (
        "Credentials:\n  AccessKeyId: ASIAJEXAMPLEXEG2JICEA\n  Expiration: '2016-03-15T00:05:07+00:00'\n"
        "  SecretAccessKey: 9drTJvcXLB89EXAMPLELB8923FB892xMFI\n"
        "  SessionToken: AQoXdzELDDY//////////wEaoAK1wvxJY12r2IrDWWEXAMPLEtoken\n",
        (
            "9drTJvcXLB89EXAMPLELB8923FB892xMFI",
            "AQoXdzELDDY//////////wEaoAK1wvxJY12r2IrDWWEXAMPLEtoken",
            "ASIAJEXAMPLEXEG2JICEA",
        ),
    ),
    # AWS CLI user guide, "Configuration and credential file settings": ~/.aws/credentials, spaces around '='.
    "aws-credentials-file": (
        f"[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = {SECRET_KEY}\n"
        f"aws_session_token = {SESSION_TOKEN}\n",
        ("AKIAIOSFODNN7EXAMPLE", SECRET_KEY, SESSION_TOKEN),
    ),
    # Environment dumps (`env`, `export`): AWS CLI environment variables; Hugging Face docs, "User access tokens"
    # (hf_ + letters and digits); Weights & Biases' WANDB_API_KEY.
    "environment": (
        f"export AWS_SECRET_ACCESS_KEY={SECRET_KEY} HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 "
        "WANDB_API_KEY='k-0123456789abcdef' NCCL_DEBUG=WARN",
        (SECRET_KEY, "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "k-0123456789abcdef"),
    ),
    # Slurm documentation, "JSON Web Tokens (JWT) Authentication": `scontrol token` prints SLURM_JWT=<token>.
    "slurm-jwt": (f"SLURM_JWT={JWT}", (JWT,)),
    # RFC 6750, section 2.1: the Authorization request header with the example bearer token.
    "bearer-header": ('curl -H "Authorization: Bearer mF_9.B5f-4.1JqM" https://api.example.com', ("mF_9.B5f-4.1JqM",)),
    # A bare JWT in a log line (RFC 7519 example), with no name in front of it.
    "bare-jwt": (f"2026-11-30T09:40:01Z slurmrestd: rejected {JWT} (expired)", (JWT,)),
    # pip documentation, "Authentication" (credentials in the index URL); git remote URLs of the same form.
    "password-in-url": (
        "pip install --index-url https://ml-user:Pa55-w0rd-9f8e@pypi.example.com/simple torch",
        ("Pa55-w0rd-9f8e",),
    ),
    # docker login --password (Docker CLI reference); AWS CLI v1 `aws ecr get-login` printed `docker login -u AWS
    # -p <token> <registry>`.
    "password-option": (
        "docker login --username AWS --password s3cr3t-0f-the-day 123456789012.dkr.ecr.us-east-1.amazonaws.com; "
        "docker login -u AWS -p eyJwYXlsb2FkIjoiZGF0YSJ9x https://123456789012.dkr.ecr.us-east-1.amazonaws.com",
        ("s3cr3t-0f-the-day", "eyJwYXlsb2FkIjoiZGF0YSJ9x"),
    ),
    # curl(1): `-u, --user <user:password>`; the MySQL client's `-p[password]` takes the password with no space
    # (MySQL reference manual, "Specifying passwords on the command line").
    "password-attached-to-its-option": (
        "curl -fsS -u admin:hunt3r-2-curl https://grafana.internal:3000/api/health; "
        "curl --user=ops:s3cond-curl-pw https://x.example; mysql -h db.internal -u slurm -pMy5ql-pass-77 slurm_acct",
        ("hunt3r-2-curl", "s3cond-curl-pw", "My5ql-pass-77"),
    ),
    # RFC 7468, section 10: a PEM private key in one string, and split over a console's lines.
    "pem-private-key": (
        "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END RSA PRIVATE KEY-----",
        PEM_BODY,
    ),
    "pem-private-key-lines": (
        ["cloud-init[1714]: -----BEGIN OPENSSH PRIVATE KEY-----", *PEM_BODY, "-----END OPENSSH PRIVATE KEY-----"],
        PEM_BODY,
    ),
    # GitHub docs, "About authentication to GitHub", GitHub's token formats (ghp_ personal, github_pat_ fine-grained).
    "github-tokens": (
        "git clone https://github.com/org/repo.git # GH_PAT ghp_16C7e42F292c6912E7710c838347Ae178B4a and "
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789abcdefghijkl",
        (
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789abcdefghijkl",
        ),
    ),
    # CloudFormation API reference, DescribeStacks: Parameters (ParameterKey/ParameterValue) and Tags (Key/Value).
    "cloudformation-parameters-and-tags": (
        {
            "Parameters": [
                {"ParameterKey": "DbPassword", "ParameterValue": "Sup3r-S3cret-P4ram"},
                {"ParameterKey": "InstanceType", "ParameterValue": "p5.48xlarge"},
            ],
            "Tags": [{"Key": "deploy-token", "Value": "tok-5c7e9a1b3d"}, {"Key": "team", "Value": "ml-platform"}],
        },
        ("Sup3r-S3cret-P4ram", "tok-5c7e9a1b3d"),
    ),
    # CloudFormation API reference, StackEvent.ResourceProperties: the resource's properties as JSON text.
    "stack-event-resource-properties": (
        {
            "LogicalResourceId": "Database",
            "ResourceProperties": json.dumps(
                {"MasterUsername": "admin", "MasterUserPassword": "Db-Pa55w0rd-77", "Engine": "postgres"}
            ),
        },
        ("Db-Pa55w0rd-77",),
    ),
    # The same event as `aws cloudformation describe-stack-events` prints it (JSON), in a line cut short (a console
    # keeps its last 64 KB): no longer parseable, its escaped pairs are still found.
    "stack-event-in-a-cut-line": (
        '  "ResourceProperties": "{\\"MasterUsername\\":\\"admin\\",\\"MasterUserPassword\\":\\"Db-Pa55w0rd-88\\",'
        '\\"Eng',
        ("Db-Pa55w0rd-88",),
    ),
    # CodeBuild API reference, EnvironmentVariable (name/value/type).
    "codebuild-environment": (
        {
            "environmentVariables": [
                {"name": "HF_TOKEN", "value": "hf_zyxwvutsrqponmlkjihgfedcba987", "type": "PLAINTEXT"}
            ]
        },
        ("hf_zyxwvutsrqponmlkjihgfedcba987",),
    ),
}

SECRETS: tuple[str, ...] = tuple(value for _, values in CORPUS.values() for value in values)

READABLE = (
    "i-0123456789abcdef0",
    "ami-0123456789abcdef0",
    "cr-0123456789abcdef0",
    "arn:aws:iam::123456789012:instance-profile/aws-pcs/llm-pretrain-nodes",
    "arn:aws:secretsmanager:us-east-1:123456789012:secret:db-password-AbCdEf",
    "arn:aws:kms:us-east-1:123456789012:key/0a1b2c3d-4e5f-6789-abcd-ef0123456789",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "Request ID: 0949dbfc-5e0a-4f03-bf89-d7e74540f8ec",
    "(RequestToken: 3c1d1f4e-8a33-4f7b-b7b4-6a3e0e0e2f10, HandlerErrorCode: InvalidRequest)",
    "User is not authorized to perform: ssm:GetParameter",
    "mount -t lustre fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh /fsx",
    "NCCL_DEBUG=WARN FI_PROVIDER=efa",
    "[   73.202020] cloud-init[1714]: 2026-11-30T09:36:11Z bootstrap.sh[1802] ERROR: mount-lustre failed [rc 1]",
    "2026-11-30T09:35:12Z bootstrap.sh[1802] INFO: basic checks passed; bearer of the lease: slurmctld",
)
"""Ids, ARNs (one of a secret: its name is no secret), a SHA-256 digest, request ids, and lines of real tails."""


def flatten(data: object) -> str:
    return data if isinstance(data, str) else json.dumps(data)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_secret_shape_of_the_corpus_is_redacted(name):
    data, secrets = CORPUS[name]
    out = flatten(redact(data))
    assert REDACTED in out
    assert [secret for secret in secrets if secret in out] == []


def test_what_the_shapes_surround_stays_readable():
    assert redact(CORPUS["cloudformation-parameters-and-tags"][0])["Parameters"][1] == {
        "ParameterKey": "InstanceType",
        "ParameterValue": "p5.48xlarge",
    }
    assert redact_text(CORPUS["environment"][0]).endswith("NCCL_DEBUG=WARN")
    assert "https://ml-user:<redacted>@pypi.example.com/simple" in redact_text(CORPUS["password-in-url"][0])
    assert json.loads(redact(CORPUS["stack-event-resource-properties"][0])["ResourceProperties"]) == {
        "MasterUsername": "admin",
        "MasterUserPassword": REDACTED,
        "Engine": "postgres",
    }
    assert redact(CORPUS["pem-private-key-lines"][0])[-1] == "-----END OPENSSH PRIVATE KEY-----"


@pytest.mark.parametrize("text", READABLE)
def test_ids_arns_hashes_and_request_ids_stay_readable(text):
    assert redact_text(text) == text
    assert redact({"PhysicalResourceId": text, "Tags": [{"Key": "Name", "Value": text}]}) == {
        "PhysicalResourceId": text,
        "Tags": [{"Key": "Name", "Value": text}],
    }


def test_a_long_text_with_many_unclosed_braces_is_redacted_quickly():
    """A failed JSON parse counts lines up to where it failed; searched only within a window, 5,000 console lines
    with an unclosed object each stay fast (seconds, not minutes: measured 0.9 s here, 14 s without the window)."""
    import time

    line = '[   73.2] cloud-init[1714]: ERROR: {"a": [1, 2, {"x": "y" token=abc'
    started = time.monotonic()
    out = redact_text("\n".join([line] * 5000))
    assert time.monotonic() - started < 10
    assert out.count("token=<redacted>") == 5000


def test_pagination_tokens_stay():
    kept = {"NextToken": "abc", "ClientRequestToken": "Console-1", "nextForwardToken": "f/1"}
    assert redact(kept) == kept


def test_a_long_line_of_name_value_pairs_without_spaces_is_redacted_in_linear_time():
    """A presigned S3 URL (S3 API reference, "Authenticating Requests: Using Query Parameters": X-Amz-Algorithm,
    X-Amz-Credential, X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders, X-Amz-Security-Token, X-Amz-Signature, joined
    by '&') is one word of `name=value` pairs. Every pair whose name does not say secret used to be re-matched to the
    end of the word (a bare value runs over '&' and '='), so a 60 KB line (GetConsoleOutput returns up to 64 KB)
    took minutes: measured 101 s for 100,000 characters of `a=`. Now well under a second."""
    import time

    query = "&".join(f"p{index}=v{index}" for index in range(6000))
    text = f"GET https://b.s3.amazonaws.com/k?{query}&X-Amz-Security-Token={SESSION_TOKEN}"
    started = time.monotonic()
    out = redact_text(text)
    assert time.monotonic() - started < 2
    assert SESSION_TOKEN not in out
    assert out.startswith("GET https://b.s3.amazonaws.com/k?p0=v0&p1=v1&")


@pytest.mark.parametrize(
    "word",
    [
        pytest.param("a.b-c" * 13_000, id="dotted-and-dashed"),
        pytest.param(("x" * 60 + "-") * 1_000, id="base64url-blob"),
        pytest.param("login " * 10_000, id="many-logins-on-one-line"),
    ],
)
def test_a_console_sized_line_is_redacted_quickly(word):
    """GetConsoleOutput returns up to the last 64 KB of a console (EC2 API reference, GetConsoleOutput), which can be
    one line: a base64url blob (RFC 4648 section 5: '-' and '_' in its alphabet) or a dotted name. A pattern that
    rescans the rest of a word from every word boundary in it (the URL scheme before '://', the text after 'login')
    took 5 s for 30 KB and grows with the square of the length."""
    import time

    started = time.monotonic()
    assert redact_text(word) == word
    assert time.monotonic() - started < 2


def test_deeply_nested_json_in_a_log_line_is_redacted_without_a_traceback():
    """CPython's json decoder recurses once per nesting level and raises RecursionError, not ValueError, past the
    interpreter's recursion limit (1,000 by default: sys.getrecursionlimit; seen here from json/decoder.py
    scan_once); a node log holding such text must still be redacted, as text, not stop `--collect` with a
    traceback."""
    text = '{"a": ' * 3000 + '"x", "password": "hunter2"'
    out = redact_text(text)
    assert "hunter2" not in out
    assert out.startswith('{"a": {"a": ')
