"""The boot step that fetches a group's ssh private keys, executed with shims for what it calls.

A VM whose keys cannot be read (grant missing or not yet applied, secret gone, metadata server
down) cannot run its group; it must power itself off rather than idle, billing, until the
group's deadline. A VM that reads them must not. The scripts are the ones the renderers put in
the boot documents (`fetch_keys_script`); `curl`, `sleep` and `systemctl` are shims on PATH
(curl answers by URL; sleep returns at once so the minute of retries takes no time).
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest

from infra.aws.user_data import fetch_keys_script as aws_script
from infra.gcp.cloud_init import fetch_keys_script as gcp_script

pytestmark = pytest.mark.fidelity

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nsim\n-----END OPENSSH PRIVATE KEY-----\n"

CURL = """#!/bin/sh
# answers by the last argument (the URL); a refused secret is curl -f's exit 22
for url; do :; done
echo "$url" >> "$SHIMS/curl.log"
case "$url" in
  *service-accounts/default/token) echo '{"access_token": "tok", "expires_in": 3599}' ;;
  *service-accounts/default/identity*) echo id-token ;;
  */api/token) echo tok ;;
  */security-credentials/) echo member-role ;;
  */security-credentials/member-role)
    echo '{"AccessKeyId": "AK", "SecretAccessKey": "SK", "Token": "ST"}' ;;
  *) if [ -n "$SECRET_ANSWER" ]; then echo "$SECRET_ANSWER"; else exit 22; fi ;;
esac
"""


def _run(tmp_path: Path, script: str, secret_answer: str) -> tuple[subprocess.CompletedProcess, Path]:
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, body in {"curl": CURL, "sleep": "#!/bin/sh\nexit 0\n",
                       "systemctl": '#!/bin/sh\necho "$*" >> "$SHIMS/systemctl.log"\n'}.items():
        (shims / name).write_text(body)
        (shims / name).chmod(0o755)
    (tmp_path / "fetch-keys").write_text(script)
    env = {"PATH": f"{shims}:/usr/bin:/bin", "SHIMS": str(shims), "SECRET_ANSWER": secret_answer}
    done = subprocess.run(["sh", str(tmp_path / "fetch-keys")], env=env, capture_output=True,
                          text=True, timeout=60)
    return done, shims


def _poweroffs(shims: Path) -> list[str]:
    log = shims / "systemctl.log"
    return [l for l in log.read_text().splitlines() if "poweroff" in l] if log.exists() else []


def _gcp(tmp_path: Path) -> str:
    return gcp_script({"id_ed25519": "id_ed25519"}, "https://r-p.cloudfunctions.net/s-grant",
                      ssh_dir=str(tmp_path / "ssh"))


def _aws(tmp_path: Path) -> str:
    return aws_script("eu-west-1", "https://x.lambda-url.eu-west-1.on.aws/keys",
                      {"id_ed25519": str(tmp_path / "ssh" / "id_ed25519")},
                      ssh_dir=str(tmp_path / "ssh"))


ANSWERS = {  # what each cloud answers when it grants the read: the sweep's function
    # (issue #29: the group's entries come through the function, never a per-group grant)
    "gcp": json.dumps({"group": "g", "file": "id_ed25519",
                       "data": base64.b64encode(KEY.encode()).decode()}),
    "aws": json.dumps({"group": "g", "files": {"id_ed25519": base64.b64encode(KEY.encode()).decode()}}),
}


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_a_vm_refused_its_keys_powers_itself_off_gcp_and_aws(tmp_path, cloud):
    script = {"gcp": _gcp, "aws": _aws}[cloud](tmp_path)
    done, shims = _run(tmp_path, script, secret_answer="")
    assert done.returncode != 0, done.stderr
    assert _poweroffs(shims) == ["poweroff"], done.stderr
    assert not (tmp_path / "ssh" / "id_ed25519").exists()


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_a_vm_that_reads_its_keys_keeps_running_gcp_and_aws(tmp_path, cloud):
    script = {"gcp": _gcp, "aws": _aws}[cloud](tmp_path)
    done, shims = _run(tmp_path, script, secret_answer=ANSWERS[cloud])
    assert done.returncode == 0, done.stderr
    assert _poweroffs(shims) == []
    key = tmp_path / "ssh" / "id_ed25519"
    assert key.read_text() == KEY and key.stat().st_mode & 0o777 == 0o600
