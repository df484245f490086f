"""Does this machine have GCP credentials? Asked before an operator command calls the
cloud, so a missing login is one line in a second or two — not the SDKs' retries (gcsfs
retries an anonymous bucket list for ~50 s) and their tracebacks.

Application Default Credentials are a key file (`GOOGLE_APPLICATION_CREDENTIALS`), the
file `gcloud auth application-default login` writes, or the metadata server of a Google VM
(told by the SMBIOS product name, as google-auth does, without a network probe).
https://cloud.google.com/docs/authentication/application-default-credentials
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

GCE_PRODUCT_FILE = Path("/sys/class/dmi/id/product_name")

GCP_FIX = ("run `gcloud auth application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS "
           "to a service-account key file)")


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
