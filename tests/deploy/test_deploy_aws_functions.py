"""The AWS Lambdas as the Lambda runtime loads them: the shipped zip and layer, nothing else.

The program is declared as `pulumi up` runs it (not the offline preview: `mocked()` is
false, so it builds the layer it declares, `infra.aws.layer.ensure`, cached by requirements
digest in the user cache); each declared function's code archive is zipped as the engine
zips it and unpacked into an empty `task/` (Lambda's `/var/task`), the layer it names into
`opt/` (`/opt`, whose `python/` the runtime puts on the path). A fresh interpreter of the
runtime's version, isolated (`-I -S`: no site-packages, no PYTHONPATH, no user site), with
only `task/` and `opt/python` on `sys.path` and the declared environment, loads the
declared handler, builds what a call builds (the spec, the EC2 driver, the results store,
the grants) and answers an event the platform could send — and every module it loaded
must come from the zip, the layer or the interpreter itself, never the dev venv.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from infra.aws import layer as lambda_layer
from infra.preview import _computed
from spotbench.spec import load_spec
from tests.deploy.artifacts import runtime_python, unpack, zip_of
from tests.infra.conftest import snapshot

pytestmark = [pytest.mark.fidelity, pytest.mark.timeout(900)]

FUNCTION = "aws:lambda/function:Function"
LAYER = "aws:lambda/layerVersion:LayerVersion"
SPEC = {"name": "shp", "cloud": "aws", "region": "eu-west-1", "zone": "eu-west-1a",
        "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5n.large"]},
        "trials": 1, "placement": "none", "results": "s3://res-bucket/runs/shp",
        "image": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/spotbench/osu:1",
        "schedule": {"cron": "0 3 * * 1-5"}, "deadline": "45m"}  # fmt: skip


def declared_as_pulumi_up(monkeypatch) -> Any:
    """What the AWS program declares when `pulumi up` runs it (the layer built)."""
    from infra.aws import AwsSweep, AwsSweepArgs

    import infra.aws.functions as functions

    monkeypatch.setattr(functions, "mocked", lambda: False)
    spec = load_spec(SPEC)
    return snapshot(lambda: AwsSweep(spec.name, AwsSweepArgs(spec=spec)), {})


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> dict[str, Any]:
    mp = pytest.MonkeyPatch()
    try:
        mocks = declared_as_pulumi_up(mp)
    finally:
        mp.undo()
    root: Path = tmp_path_factory.mktemp("lambda")
    layers = {_computed(LAYER, d.name, d.inputs)["arn"]: d for d in mocks.of_type(LAYER)}
    unpacked: dict[bytes, Path] = {}  # one folder per distinct zip (the three share both)

    def folder(archive: Any, kind: str) -> Path:
        data = zip_of(archive)
        if data not in unpacked:
            unpacked[data] = unpack(data, root / f"{kind}{len(unpacked)}")
        return unpacked[data]

    out = {}
    for fn in mocks.of_type(FUNCTION):
        (arn,) = fn.inputs["layers"]
        out[fn.inputs["name"]] = {"fn": fn.inputs, "task": folder(fn.inputs["code"], "task"),
                                  "opt": folder(layers[arn].inputs["code"], "opt")}
    return out


PROBE = r"""
import json, os, sys, types
task, opt = sys.argv[1], sys.argv[2]
sys.path[:0] = [task, os.path.join(opt, "python")]
module, _, attr = os.environ["_HANDLER"].rpartition(".")
handler = getattr(__import__(module, fromlist=[attr]), attr)
from functions.app import FunctionConfig
config = FunctionConfig(env=dict(os.environ))
config.sweep  # the spec, the EC2 driver, the s3 results store
import functions.aws_grants, spotbench.clouds.aws.grants  # the URL's /grant and /keys: STS, SSM
url_event = {"requestContext": {"http": {"method": "POST"}}, "rawPath": "/", "body": "{}"}
context = types.SimpleNamespace(  # what the runtime hands the handler
    invoked_function_arn="arn:aws:lambda:eu-west-1:123456789012:function:"
                         + os.environ["AWS_LAMBDA_FUNCTION_NAME"])
answer = handler(url_event, context)
print(json.dumps({"answer": answer,
                  "files": {n: getattr(m, "__file__", None) for n, m in sys.modules.items()},
                  "base": sys.base_prefix}))
"""


def test_deploy_aws_every_function_names_the_layer_the_program_built(shipped):
    """Old program: no layer unless `make lambda-layer` had been run by hand (a warning, and
    functions that fail at import)."""
    assert {s["fn"]["name"].rsplit("-", 1)[1] for s in shipped.values()} == {"start", "stop", "done"}
    for s in shipped.values():
        assert (s["opt"] / "python" / "pydantic_core").is_dir()
        assert (s["opt"] / "python" / "s3fs").is_dir()
    assert lambda_layer.built(lambda_layer.folder())


@pytest.mark.parametrize("action", ["start", "stop", "done"])
def test_deploy_aws_each_handler_loads_from_its_zip_and_layer_alone(shipped, action):
    s = shipped[f"shp-{action}"]
    fn = s["fn"]
    python = runtime_python(fn["runtime"].removeprefix("python"))
    assert not python.mismatch, f"no {fn['runtime']} here: the layer's wheels would not load"
    env = {**fn["environment"]["variables"], "_HANDLER": fn["handler"], "PATH": "/usr/bin:/bin",
           "AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "eu-west-1",
           "AWS_LAMBDA_FUNCTION_NAME": fn["name"], "LAMBDA_TASK_ROOT": str(s["task"]),
           "AWS_ACCESS_KEY_ID": "ASIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
           "AWS_SESSION_TOKEN": "token", "AWS_EC2_METADATA_DISABLED": "true"}
    ran = subprocess.run([python.path, "-I", "-S", "-c", PROBE, str(s["task"]), str(s["opt"])],
                         capture_output=True, text=True, timeout=300, env=env, cwd=s["task"])
    assert ran.returncode == 0, ran.stderr[-3000:]
    got = json.loads(ran.stdout.splitlines()[-1])
    status = got["answer"]["statusCode"]
    # done: an unsigned URL call is refused by the function itself; start/stop: no URL
    assert status == (401 if action == "done" else 403), got["answer"]
    homes = (str(s["task"]), str(s["opt"]), got["base"])
    strays = {n: f for n, f in got["files"].items() if f and not f.startswith(homes)}
    assert not strays, f"loaded from outside the zip and the layer: {strays}"


def test_deploy_aws_a_layer_that_cannot_build_stops_the_deploy_with_the_command(tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv("SPOTBENCH_CACHE", str(tmp_path))
    with pytest.raises(lambda_layer.LayerBuildError) as err:
        lambda_layer.ensure("spotbench-no-such-distribution==0.0.1\n")
    assert "make lambda-layer" in str(err.value)
    assert "spotbench-no-such-distribution" in str(err.value)
    assert not lambda_layer.built(lambda_layer.folder("spotbench-no-such-distribution==0.0.1\n"))
