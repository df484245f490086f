"""What AWS authorizes for an API request: action, resource ARN and request context.

From AWS's Service Authorization Reference (actions, resource types, condition keys) and the
services' docs, for the operations spotbench's code paths make:

- EC2 (query API): `Describe*` have no resource-level permissions (`*`); `Start/Stop/
  TerminateInstances` authorize each instance (`instance/ID`) and
  `CancelSpotInstanceRequests` each request (`spot-instances-request/ID`), with the
  resource's tags as `aws:ResourceTag/K` (and `ec2:ResourceTag/K`).
  `CreateFleet` of type `instant` launches with the caller's permissions (EC2 Fleet
  prerequisites: no service-linked role), so it is authorized as `ec2:CreateFleet` on the
  fleet (its `TagSpecifications` as `aws:RequestTag/K`) and, per launch-template config,
  `ec2:CreateFleet` + `ec2:RunInstances` on the template and its subnet (their tags), and
  the `ec2:RunInstances` the launch makes: security groups (tags), the network interface,
  the image, the instance and volume (the template's `TagSpecifications` as request tags),
  `ec2:CreateTags` for each tagged resource (`ec2:CreateAction`), and `iam:PassRole` of the
  instance profile's role (spotbench names the profile after its role) to `ec2.amazonaws.com`.
- S3 (REST, path style): `HeadBucket` and object listings are `s3:ListBucket` on the bucket,
  listings with `s3:prefix` (empty when no prefix is given) and `s3:delimiter`; `HEAD`/`GET`
  of a key is `s3:GetObject`; `PUT` a key (and multipart parts) `s3:PutObject`; a copy also
  `s3:GetObject` on the source; `DELETE` a key `s3:DeleteObject`. A missing key is answered
  403 instead of 404 to a caller without `s3:ListBucket` (evaluated here with no `s3:prefix`
  in the context: AWS does not document one for that check, so only an unconditioned
  grant is assumed to count).
- CloudWatch Logs, ECR (JSON 1.1 APIs): the log stream / repository ARN from the body.
- Lambda `Invoke` (REST): `lambda:InvokeFunction` on the function.
- SSM `GetParameter` (JSON 1.1): `ssm:GetParameter` on `parameter/<name>` (the boot's key
  fetch; SecureStrings under the AWS-managed key need no `kms:Decrypt` of the caller).
- The SSM agent: `ssm:UpdateInstanceInformation` on its instance, and the Session Manager
  channels it creates (`POST /v1/control-channel/ID`, `/v1/data-channel/ID` of
  `ssmmessages`: `ssmmessages:Create*Channel`, no resource ARN).
- STS `GetCallerIdentity` needs no permission; `AssumeRole` is `sts:AssumeRole` on the role
  (and the role's trust policy must name the caller's role: the front checks it).

An operation not listed raises `NotImplementedError`: the harness must never wave through a
call it cannot judge.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit
from xml.etree import ElementTree

from tests.iam.policy import Authorization

# operations whose IAM action is not `<service>:<operation>` (Service Authorization Reference;
# S3: "Required permissions for Amazon S3 API operations")
IAM_NAMES = {
    ("s3", "HeadBucket"): "s3:ListBucket",
    ("s3", "HeadObject"): "s3:GetObject",
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "ListObjects"): "s3:ListBucket",
    ("s3", "ListObjectVersions"): "s3:ListBucketVersions",
    ("s3", "ListMultipartUploads"): "s3:ListBucketMultipartUploads",
    ("s3", "ListParts"): "s3:ListMultipartUploadParts",
    ("s3", "CreateMultipartUpload"): "s3:PutObject",
    ("s3", "UploadPart"): "s3:PutObject",
    ("s3", "CompleteMultipartUpload"): "s3:PutObject",
    ("s3", "CopyObject"): "s3:PutObject",
    ("s3", "DeleteObjects"): "s3:DeleteObject",
    ("s3", "PutPublicAccessBlock"): "s3:PutBucketPublicAccessBlock",
    ("s3", "DeletePublicAccessBlock"): "s3:PutBucketPublicAccessBlock",
    ("s3", "GetPublicAccessBlock"): "s3:GetBucketPublicAccessBlock",
    ("s3", "PutBucketEncryption"): "s3:PutEncryptionConfiguration",
    ("s3", "DeleteBucketEncryption"): "s3:PutEncryptionConfiguration",
    ("s3", "GetBucketEncryption"): "s3:GetEncryptionConfiguration",
    ("s3", "GetBucketAccelerateConfiguration"): "s3:GetAccelerateConfiguration",
    ("s3", "PutBucketLifecycleConfiguration"): "s3:PutLifecycleConfiguration",
    ("s3", "DeleteBucketLifecycle"): "s3:PutLifecycleConfiguration",
    ("s3", "GetBucketLifecycleConfiguration"): "s3:GetLifecycleConfiguration",
    ("s3", "GetBucketReplication"): "s3:GetReplicationConfiguration",
    ("lambda", "Invoke"): "lambda:InvokeFunction",
    ("lambda", "GetFunctionConfiguration"): "lambda:GetFunctionConfiguration",
}
# moto authorizes a request under the operation's API name (moto 5.2: every S3 operation,
# `s3:HeadObject` for S3's s3:GetObject), so a role moto holds names both
MOTO_ACTIONS: dict[str, list[str]] = {}
for (_service, _operation), _action in IAM_NAMES.items():
    MOTO_ACTIONS.setdefault(_action, []).append(f"{_service}:{_operation}")

_SCOPE = re.compile(r"Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request")


@dataclass(frozen=True)
class Scope:
    access_key: str
    region: str
    service: str


def credential_scope(headers: dict[str, str]) -> Scope | None:
    auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    match = _SCOPE.search(auth)
    if not match:
        return None
    return Scope(match.group(1), match.group(3), match.group(4))


@dataclass
class AwsRequest:
    method: str
    path: str  # path + query, as received
    headers: dict[str, str]
    body: bytes
    scope: Scope

    @property
    def target(self) -> str:
        return next((v for k, v in self.headers.items() if k.lower() == "x-amz-target"), "")

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


class Lookup:
    """Reads the request context AWS would know (resource tags) with the harness's client."""

    def __init__(self, ec2: Any, account: str, region: str, functions: Any = None):
        self.ec2, self.account, self.region = ec2, account, region
        self.functions = functions or (lambda name: name)

    def instance_tags(self, instance_id: str) -> dict[str, str]:
        try:
            found = self.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        except Exception:  # noqa: BLE001 - an unknown id has no tags
            return {}
        insts = [i for r in found for i in r["Instances"]]
        return {t["Key"]: t["Value"] for i in insts for t in i.get("Tags", [])}

    def launch_template(self, template_id: str) -> tuple[dict[str, str], dict[str, Any]]:
        """(the template's tags, its default version's data)."""
        try:
            found = self.ec2.describe_launch_templates(LaunchTemplateIds=[template_id])
            data = self.ec2.describe_launch_template_versions(
                LaunchTemplateId=template_id, Versions=["$Default"])["LaunchTemplateVersions"]
        except Exception:  # noqa: BLE001 - an unknown template: no tags, no data
            return {}, {}
        tags = {t["Key"]: t["Value"] for lt in found["LaunchTemplates"] for t in lt.get("Tags", [])}
        return tags, (data[0]["LaunchTemplateData"] if data else {})

    def fleet_tags(self, fleet_id: str) -> dict[str, str]:
        try:
            found = self.ec2.describe_fleets(FleetIds=[fleet_id])["Fleets"]
        except Exception:  # noqa: BLE001
            return {}
        return {t["Key"]: t["Value"] for f in found for t in f.get("Tags", [])}

    def tags_of(self, kind: str, ids: list[str]) -> dict[str, dict[str, str]]:
        """Subnet or security group id → its tags."""
        if not ids:
            return {}
        if kind == "subnet":
            items = self.ec2.describe_subnets(SubnetIds=ids)["Subnets"]
            key = "SubnetId"
        else:
            items = self.ec2.describe_security_groups(GroupIds=ids)["SecurityGroups"]
            key = "GroupId"
        return {i[key]: {t["Key"]: t["Value"] for t in i.get("Tags", [])} for i in items}

    def spot_request_tags(self, request_id: str) -> dict[str, str]:
        try:
            found = self.ec2.describe_spot_instance_requests(
                SpotInstanceRequestIds=[request_id])["SpotInstanceRequests"]
        except Exception:  # noqa: BLE001
            return {}
        return {t["Key"]: t["Value"] for r in found for t in r.get("Tags", [])}


def _tag_context(tags: dict[str, str], service: str) -> dict[str, str]:
    out = {f"aws:ResourceTag/{k}": v for k, v in tags.items()}
    out.update({f"{service}:ResourceTag/{k}": v for k, v in tags.items()})
    return out


def _indexed(form: dict[str, list[str]], prefix: str) -> list[str]:
    keys = sorted((k for k in form if re.fullmatch(rf"{prefix}\.\d+", k)),
                  key=lambda k: int(k.rsplit(".", 1)[1]))
    return [form[k][0] for k in keys]


EC2_ANY_RESOURCE = {"DescribeInstances", "DescribeInstanceStatus", "DescribeRegions",
                    "DescribeSpotInstanceRequests", "DescribeTags", "DescribeLaunchTemplates",
                    "DescribeSubnets", "DescribeFleets", "DescribeLaunchTemplateVersions",
                    "DescribeAvailabilityZones"}


def _ec2(req: AwsRequest, lookup: Lookup) -> list[Authorization]:
    form = parse_qs(req.body.decode() or urlsplit(req.path).query)
    action = form["Action"][0]
    region, account = req.scope.region, lookup.account
    if action in EC2_ANY_RESOURCE:
        return [Authorization(f"ec2:{action}", "*")]
    if action in ("StartInstances", "StopInstances", "TerminateInstances"):
        return [Authorization(f"ec2:{action}", f"arn:aws:ec2:{region}:{account}:instance/{i}",
                              _tag_context(lookup.instance_tags(i), "ec2"))
                for i in _indexed(form, "InstanceId")]
    if action == "CreateFleet":
        return _create_fleet(form, region, account, lookup)
    if action in ("CreateLaunchTemplate", "CreateLaunchTemplateVersion", "ModifyLaunchTemplate",
                  "DeleteLaunchTemplate"):  # the stack's templates (the deployer: `*`)
        template = (form.get("LaunchTemplateId") or ["*"])[0]
        auths = [Authorization(f"ec2:{action}", f"arn:aws:ec2:{region}:{account}:launch-template/{template}")]
        if action == "CreateLaunchTemplate" and "TagSpecification.1.ResourceType" in form:
            auths.append(Authorization("ec2:CreateTags", f"arn:aws:ec2:{region}:{account}:launch-template/*",
                                       {"ec2:CreateAction": "CreateLaunchTemplate"}))
        return auths
    if action == "DeleteFleets":
        return [Authorization("ec2:DeleteFleets", f"arn:aws:ec2:{region}:{account}:fleet/{f}",
                              _tag_context(lookup.fleet_tags(f), "ec2"))
                for f in _indexed(form, "FleetId")]
    if action == "CancelSpotInstanceRequests":
        return [Authorization(
            "ec2:CancelSpotInstanceRequests",
            f"arn:aws:ec2:{region}:{account}:spot-instances-request/{r}",
            _tag_context(lookup.spot_request_tags(r), "ec2"))
            for r in _indexed(form, "SpotInstanceRequestId")]
    raise NotImplementedError(f"EC2 {action}: not modelled by the IAM harness")


def _requested_tags(form: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """A CreateFleet's `TagSpecification.N` (query form): resource type → its tags."""
    out: dict[str, dict[str, str]] = {}
    for n in range(1, 10):
        kind = form.get(f"TagSpecification.{n}.ResourceType")
        if kind:
            out.setdefault(kind[0], {}).update({
                form[f"TagSpecification.{n}.Tag.{m}.Key"][0]:
                form.get(f"TagSpecification.{n}.Tag.{m}.Value", [""])[0]
                for m in range(1, 60) if f"TagSpecification.{n}.Tag.{m}.Key" in form})
    return out


def _context(tags: dict[str, str] | None) -> dict[str, str]:
    return {f"aws:RequestTag/{k}": v for k, v in (tags or {}).items()}


def _create_fleet(form: dict[str, list[str]], region: str, account: str,
                  lookup: Lookup) -> list[Authorization]:
    arn = f"arn:aws:ec2:{region}:{account}"
    requested = _requested_tags(form)  # resource type → the request's own tags for it
    fleet_tags = requested.get("fleet", {})
    fleet_ctx = {f"aws:RequestTag/{k}": v for k, v in fleet_tags.items()}
    auths = [Authorization("ec2:CreateFleet", f"{arn}:fleet/*", fleet_ctx)]
    if fleet_tags:
        auths.append(Authorization("ec2:CreateTags", f"{arn}:fleet/*",
                                   {**fleet_ctx, "ec2:CreateAction": "CreateFleet"}))
    spot = form.get("TargetCapacitySpecification.DefaultTargetCapacityType") == ["spot"]
    for n in range(1, 100):
        template = form.get(f"LaunchTemplateConfigs.{n}.LaunchTemplateSpecification.LaunchTemplateId")
        if not template:
            break
        tags, data = lookup.launch_template(template[0])
        nics = data.get("NetworkInterfaces", [])
        subnets = _indexed_values(form, f"LaunchTemplateConfigs.{n}.Overrides", "SubnetId") or [
            nic["SubnetId"] for nic in nics if nic.get("SubnetId")]
        groups = [g for nic in nics for g in nic.get("Groups", [])] + data.get("SecurityGroupIds", [])
        for action in ("ec2:CreateFleet", "ec2:RunInstances"):
            auths.append(Authorization(action, f"{arn}:launch-template/{template[0]}",
                                       _tag_context(tags, "ec2")))
            auths += [Authorization(action, f"{arn}:subnet/{s}", _tag_context(t, "ec2"))
                      for s, t in lookup.tags_of("subnet", sorted(set(subnets))).items()]
            auths += [Authorization(action, f"{arn}:security-group/{g}", _tag_context(t, "ec2"))
                      for g, t in lookup.tags_of("security-group", sorted(set(groups))).items()]
            auths += [Authorization(action, f"{arn}:network-interface/*"),
                      Authorization(action, f"arn:aws:ec2:{region}::image/{data.get('ImageId', '*')}")]
            if spot:  # a Spot launch makes a (one-time) spot request
                auths.append(Authorization(action, f"{arn}:spot-instances-request/*"))
            # the request's tags only: a template's TagSpecifications do not reach the
            # request a fleet launch is authorized with (karpenter-provider-aws#3948)
            auths += [Authorization(action, f"{arn}:{kind}/*", _context(requested.get(kind)))
                      for kind in ("instance", "volume")]
        for kind in ("instance", "volume"):
            ctx = _context(requested.get(kind))
            if ctx:
                auths.append(Authorization("ec2:CreateTags", f"{arn}:{kind}/*",
                                           {**ctx, "ec2:CreateAction": "CreateFleet"}))
        profile = (data.get("IamInstanceProfile") or {}).get("Name")
        if profile:  # spotbench names the member's instance profile after its role
            auths.append(Authorization("iam:PassRole", f"arn:aws:iam::{account}:role/{profile}",
                                       {"iam:PassedToService": "ec2.amazonaws.com"}))
    return auths


def _indexed_values(form: dict[str, list[str]], prefix: str, field: str) -> list[str]:
    return [form[f"{prefix}.{m}.{field}"][0] for m in range(1, 100)
            if f"{prefix}.{m}.{field}" in form]


def _s3(req: AwsRequest) -> list[Authorization]:
    parts = urlsplit(req.path)
    query = parse_qs(parts.query, keep_blank_values=True)
    bucket, _, key = unquote(parts.path).lstrip("/").partition("/")
    bucket_arn = f"arn:aws:s3:::{bucket}"
    m = req.method
    if not key:
        if m == "HEAD":
            return [Authorization("s3:ListBucket", bucket_arn)]
        if m == "GET" and "location" in query:
            return [Authorization("s3:GetBucketLocation", bucket_arn)]
        if m == "GET" and not set(query) - {"list-type", "prefix", "delimiter", "max-keys",
                                              "continuation-token", "start-after",
                                              "encoding-type", "fetch-owner", "marker"}:
            ctx = {"s3:prefix": query.get("prefix", [""])[0]}
            if "delimiter" in query:
                ctx["s3:delimiter"] = query["delimiter"][0]
            return [Authorization("s3:ListBucket", bucket_arn, ctx)]
        if m == "GET" and "versions" in query:
            return [Authorization("s3:ListBucketVersions", bucket_arn,
                                  {"s3:prefix": query.get("prefix", [""])[0]})]
        if m == "POST" and "delete" in query:
            keys = [e.text or "" for e in ElementTree.fromstring(req.body).iter()
                    if e.tag.endswith("Key")]
            return [Authorization("s3:DeleteObject", f"{bucket_arn}/{k}") for k in keys]
        if m == "PUT" and not query:
            return [Authorization("s3:CreateBucket", bucket_arn)]
        raise NotImplementedError(f"S3 {m} bucket {sorted(query)}: not modelled by the IAM harness")
    obj = f"{bucket_arn}/{key}"
    if m in ("GET", "HEAD") and not set(query) - {"partNumber", "response-content-type"}:
        return [Authorization("s3:GetObject", obj)]
    if m == "GET" and "versionId" in query:
        return [Authorization("s3:GetObjectVersion", obj)]
    if m == "PUT" and not set(query) - {"partNumber", "uploadId"}:
        out = [Authorization("s3:PutObject", obj)]
        source = req.header("x-amz-copy-source")
        if source:
            out.append(Authorization("s3:GetObject", f"arn:aws:s3:::{unquote(source).lstrip('/')}"))
        return out
    if m == "POST" and ("uploads" in query or "uploadId" in query):
        return [Authorization("s3:PutObject", obj)]
    if m == "DELETE" and "uploadId" in query:
        return [Authorization("s3:AbortMultipartUpload", obj)]
    if m == "DELETE" and not query:
        return [Authorization("s3:DeleteObject", obj)]
    raise NotImplementedError(f"S3 {m} object {sorted(query)}: not modelled by the IAM harness")


def _json_body(req: AwsRequest) -> dict[str, Any]:
    return json.loads(req.body or b"{}")


def _logs(req: AwsRequest, lookup: Lookup) -> list[Authorization]:
    action = req.target.split(".", 1)[1]
    body = _json_body(req)
    group = f"arn:aws:logs:{req.scope.region}:{lookup.account}:log-group:{body.get('logGroupName')}"
    if action in ("CreateLogStream", "PutLogEvents"):
        return [Authorization(f"logs:{action}", f"{group}:log-stream:{body.get('logStreamName')}")]
    if action == "CreateLogGroup":
        return [Authorization("logs:CreateLogGroup", group)]
    raise NotImplementedError(f"logs {action}: not modelled by the IAM harness")


def _ecr(req: AwsRequest, lookup: Lookup) -> list[Authorization]:
    action = req.target.split(".", 1)[1]
    if action == "GetAuthorizationToken":
        return [Authorization("ecr:GetAuthorizationToken", "*")]
    if action in ("BatchGetImage", "GetDownloadUrlForLayer", "BatchCheckLayerAvailability"):
        body = _json_body(req)
        registry = body.get("registryId") or lookup.account
        return [Authorization(f"ecr:{action}", f"arn:aws:ecr:{req.scope.region}:{registry}:"
                                                f"repository/{body['repositoryName']}")]
    raise NotImplementedError(f"ecr {action}: not modelled by the IAM harness")


def _lambda(req: AwsRequest, lookup: Lookup) -> list[Authorization]:
    path = urlsplit(req.path).path
    match = re.fullmatch(r"/2015-03-31/functions/([^/]+)/invocations", path)
    if req.method == "POST" and match:
        return [Authorization("lambda:InvokeFunction", lookup.functions(unquote(match.group(1))))]
    raise NotImplementedError(f"lambda {req.method} {path}: not modelled by the IAM harness")


def _ssm(req: AwsRequest, lookup: Lookup) -> list[Authorization]:
    action = req.target.split(".", 1)[1]
    if action == "UpdateInstanceInformation":
        instance = _json_body(req).get("InstanceId", "")
        return [Authorization("ssm:UpdateInstanceInformation",
                              f"arn:aws:ec2:{req.scope.region}:{lookup.account}:instance/{instance}")]
    if action == "GetParameter":  # a name with a leading '/' is the ARN's path as is
        name = _json_body(req).get("Name", "")
        path = name if name.startswith("/") else f"/{name}"
        return [Authorization("ssm:GetParameter",
                              f"arn:aws:ssm:{req.scope.region}:{lookup.account}:parameter{path}")]
    raise NotImplementedError(f"ssm {action}: not modelled by the IAM harness")


SSMMESSAGES = {"control-channel": "ssmmessages:CreateControlChannel",
               "data-channel": "ssmmessages:CreateDataChannel"}


def _ssmmessages(req: AwsRequest) -> list[Authorization]:
    kind = urlsplit(req.path).path.strip("/").split("/")[1]
    if req.method == "POST" and kind in SSMMESSAGES:
        return [Authorization(SSMMESSAGES[kind], "*")]
    raise NotImplementedError(f"ssmmessages {req.method} {req.path}: not modelled by the IAM harness")


def _sts(req: AwsRequest) -> list[Authorization]:
    form = parse_qs(req.body.decode() or urlsplit(req.path).query)
    if form.get("Action") == ["GetCallerIdentity"]:
        return []  # needs no permission
    if form.get("Action") == ["AssumeRole"]:  # the role's trust policy is the front's check
        return [Authorization("sts:AssumeRole", form["RoleArn"][0])]
    raise NotImplementedError(f"sts {form.get('Action')}: not modelled by the IAM harness")


def authorizations(req: AwsRequest, lookup: Lookup) -> list[Authorization]:
    service = req.scope.service
    if service == "ec2":
        return _ec2(req, lookup)
    if service == "s3":
        return _s3(req)
    if service == "logs":
        return _logs(req, lookup)
    if service == "ecr":
        return _ecr(req, lookup)
    if service == "lambda":
        return _lambda(req, lookup)
    if service == "sts":
        return _sts(req)
    if service == "ssm":
        return _ssm(req, lookup)
    if service == "ssmmessages":
        return _ssmmessages(req)
    raise NotImplementedError(f"service {service}: not modelled by the IAM harness")


def missing_key_needs_list(req: AwsRequest, status: int) -> Authorization | None:
    """The s3:ListBucket a GET/HEAD of a missing key needs to be answered 404 (else 403)."""
    if req.scope.service != "s3" or status != 404 or req.method not in ("GET", "HEAD"):
        return None
    bucket, _, key = unquote(urlsplit(req.path).path).lstrip("/").partition("/")
    return Authorization("s3:ListBucket", f"arn:aws:s3:::{bucket}") if key else None


def denial(req: AwsRequest, auth: Authorization, who: str) -> tuple[int, dict[str, str], bytes]:
    """The service's answer to a denied request."""
    message = (f"User: {who} is not authorized to perform: {auth.action} on resource: "
               f"{auth.resource}")
    service = req.scope.service
    if service == "ec2":
        body = (f"<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>{message}"
                "</Message></Error></Errors><RequestID>denied</RequestID></Response>")
        return 403, {"Content-Type": "text/xml"}, body.encode()
    if service == "s3":
        body = f"<Error><Code>AccessDenied</Code><Message>{message}</Message></Error>"
        return 403, {"Content-Type": "application/xml"}, body.encode()
    if service in ("sts", "iam"):
        body = (f"<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>"
                f"{message}</Message></Error></ErrorResponse>")
        return 403, {"Content-Type": "text/xml"}, body.encode()
    payload = json.dumps({"__type": "AccessDeniedException", "message": message,
                          "Message": message}).encode()
    headers = {"Content-Type": "application/x-amz-json-1.1",
               "x-amzn-ErrorType": "AccessDeniedException"}
    return (403 if service == "lambda" else 400), headers, payload


def bulk_delete_refusals(req: AwsRequest, status: int, content: bytes) -> list[str]:
    """The keys a `DeleteObjects` answer (200) lists as not deleted."""
    if (req.scope.service != "s3" or req.method != "POST" or status != 200
            or "delete" not in parse_qs(urlsplit(req.path).query, keep_blank_values=True)):
        return []
    root = ElementTree.fromstring(content)
    return [k.text or "" for e in root.iter() if e.tag.endswith("Error")
            for k in e if k.tag.endswith("Key")]
