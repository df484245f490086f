"""Does this machine have credentials for the cloud? Asked before an operator command calls
it, so a missing login is one line in a second or two — not the SDKs' retries (gcsfs retries
an anonymous bucket list for ~50 s, boto3 probes the instance metadata service per client)
and their tracebacks.

GCP: Application Default Credentials are a key file (`GOOGLE_APPLICATION_CREDENTIALS`), the
file `gcloud auth application-default login` writes, or the metadata server of a Google VM
(told by the SMBIOS product name, as google-auth does, without a network probe).
https://cloud.google.com/docs/authentication/application-default-credentials
AWS: the SDK's default credential chain (environment, shared files, SSO, container and
instance metadata), asked once.
https://docs.aws.amazon.com/sdkref/latest/guide/standardized-credentials.html
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

GCE_PRODUCT_FILE = Path("/sys/class/dmi/id/product_name")

GCP_FIX = ("run `gcloud auth application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS "
           "to a service-account key file)")
AWS_FIX = ("run `aws configure` or `aws sso login` (or set AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
           "AWS_SECRET_ACCESS_KEY)")


def gcloud_adc_file(env: Mapping[str, str]) -> Path:
    """Where `gcloud auth application-default login` writes (CLOUDSDK_CONFIG moves it)."""
    config = env.get("CLOUDSDK_CONFIG") or str(Path(env.get("HOME", str(Path.home()))) / ".config" / "gcloud")
    return Path(config) / "application_default_credentials.json"


def on_google_vm(product_file: Path = GCE_PRODUCT_FILE) -> bool:
    try:
        return product_file.read_text().strip().startswith("Google")
    except OSError:
        return False


def gcp_problem(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    key = env.get("GOOGLE_APPLICATION_CREDENTIALS")
    if key:
        return None if Path(key).is_file() else (
            f"GOOGLE_APPLICATION_CREDENTIALS names {key}, which does not exist: {GCP_FIX}")
    if gcloud_adc_file(env).is_file() or on_google_vm():
        return None
    return f"no GCP credentials on this machine: {GCP_FIX}"


def aws_problem(env: Mapping[str, str] | None = None) -> str | None:
    import boto3

    env = os.environ if env is None else env
    try:
        found = boto3.Session(profile_name=env.get("AWS_PROFILE") or None).get_credentials()
    except Exception as exc:  # noqa: BLE001 - a broken profile is a credentials problem too
        return f"AWS credentials cannot be read ({exc}): {AWS_FIX}"
    return None if found is not None else f"no AWS credentials on this machine: {AWS_FIX}"
