"""The `start`, `stop` and `done` Lambdas: one archive of `functions/` + `spotbench/` + `workloads/`
(`infra.function_source.function_source`), one handler (`functions.lambda_handler.handler`), the
action chosen by `SPOTBENCH_ACTION`. `done` gets a function URL with `AWS_IAM` auth: members
sign their call with the instance role, and the handler reads the caller from it. The URL's
paths: `/` (and `/done`) stops the caller's group, `/grant` mints its storage grant, `/keys`
hands it its group's entries (functions/aws_grants.py).

Third-party dependencies (pydantic, pyyaml, croniter, fsspec, s3fs, …) come from a Lambda
layer the program builds itself when `pulumi up` runs it (`infra.aws.layer.ensure`: pip,
once per requirements digest, in the user cache); a failed build stops the deploy with its
cause and the command, so functions without their dependencies are never deployed. Under
the offline preview's mocks the layer is declared from the folder it would be built in.
"""

from __future__ import annotations

import json
from pathlib import Path
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.aws import layer as lambda_layer
from infra.function_source import SOURCE_DIRS, function_source
from infra.preview import mocked
from spotbench import PROJECT_ROOT, limits
from spotbench.spec import SweepSpec

RUNTIME = "python3.12"
HANDLER = "functions.lambda_handler.handler"
TIMEOUTS = {"start": 900, "stop": 900, "done": 300}  # start/stop wait for EC2 (bounded)
ACTIONS = ("start", "stop", "done")


def tree_bytes(*dirs: Path) -> int:
    """Bytes of the files under `dirs` (no byte-code caches): what Lambda unpacks."""
    return sum(f.stat().st_size for d in dirs if d.is_dir() for f in d.rglob("*")
               if f.is_file() and "__pycache__" not in f.parts)


def check_package(root: Path = PROJECT_ROOT, layer: Path | None = None) -> None:
    """The functions' code and layer within Lambda's sizes (spotbench.limits): the code as
    unpacked bounds its zip (50 MB uploaded directly), code and layer unpacked (250 MB)."""
    layer = layer or lambda_layer.folder()
    code = tree_bytes(*(root / d for d in SOURCE_DIRS))
    limits.require("lambda.zip", "the functions' code (unzipped, bounding its zip)", code)
    limits.require("lambda.unzipped", "the functions' code and layer, unzipped",
                   code + tree_bytes(layer))


def measured_env(function: str, variables: dict[str, pulumi.Input[str]]) -> pulumi.Output[dict[str, str]]:
    """A Lambda's environment, measured once its values are known: Lambda refuses more than
    4 KB of keys and values together (spotbench.limits, `lambda.env`)."""
    def check(values: dict[str, str]) -> dict[str, str]:
        limits.require("lambda.env", f"function {function}: environment variables "
                       f"({', '.join(sorted(values))})", limits.env_bytes(values))
        return values

    return pulumi.Output.all(**variables).apply(check)


def function_name(sweep: str, action: str) -> str:
    return f"{sweep}-{action}"


def log_group_name(sweep: str, action: str) -> str:
    """Where Lambda writes the function's logs (the program declares it, with retention)."""
    return f"/aws/lambda/{function_name(sweep, action)}"


@dataclass
class AwsFunctionsArgs:
    spec: SweepSpec
    role_arn: pulumi.Input[str]
    results_url: pulumi.Input[str]
    tags: dict[str, str]
    # the file names of a group's entries under the sweep's parameter path (its ssh keys,
    # a container's env): what the `keys` path reads for the calling instance's group
    secret_files: list[str] = field(default_factory=list)


class AwsFunctions(pulumi.ComponentResource):
    def __init__(self, name: str, args: AwsFunctionsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:aws:Functions", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        spec = args.spec
        archive, digest = function_source("aws")
        layer_dir = lambda_layer.folder()
        if not mocked() and not lambda_layer.built(layer_dir):
            pulumi.log.info(f"building the Lambda layer in {layer_dir} (pip, once per "
                            "requirements)")
            layer_dir = lambda_layer.ensure()
        check_package(layer=layer_dir)
        self.layer = aws.lambda_.LayerVersion(
            f"{name}-deps", layer_name=f"{spec.name}-deps",
            code=pulumi.FileArchive(str(layer_dir)), compatible_runtimes=[RUNTIME],
            opts=child,
        )
        layers: list[pulumi.Input[str]] = [self.layer.arn]
        self.functions: dict[str, aws.lambda_.Function] = {}
        for action in ACTIONS:
            log_group = aws.cloudwatch.LogGroup(
                f"{name}-{action}-logs", name=log_group_name(spec.name, action),
                retention_in_days=14, tags=args.tags, opts=child,
            )
            self.functions[action] = aws.lambda_.Function(
                f"{name}-{action}",
                name=function_name(spec.name, action),
                description=f"spotbench {spec.name}: {action} (code {digest})",
                runtime=RUNTIME,
                handler=HANDLER,
                code=archive,
                role=args.role_arn,
                layers=layers,
                timeout=TIMEOUTS[action],
                memory_size=512,
                environment={"variables": measured_env(function_name(spec.name, action), {
                    "SPOTBENCH_CLOUD": "aws",
                    "SPOTBENCH_ACTION": action,
                    "SPOTBENCH_SPEC": spec.model_dump_json(),
                    "SPOTBENCH_RESULTS_URL": args.results_url,
                    **({"SPOTBENCH_SECRET_FILES": json.dumps(args.secret_files)}
                       if args.secret_files else {}),
                })},
                tags=args.tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[log_group]),
            )
        self.done_url = aws.lambda_.FunctionUrl(
            f"{name}-done-url", function_name=self.functions["done"].name,
            authorization_type="AWS_IAM", opts=child,
        )
        self.arns = {a: f.arn for a, f in self.functions.items()}
        self.urls = {"done": self.done_url.function_url}
        self.register_outputs({"arns": self.arns, "done_url": self.done_url.function_url})
