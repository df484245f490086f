"""An AWS account that enforces IAM like AWS does, for tests: moto_server + an enforcing front.

`EnforcedAccount(moto_url)` owns:

- moto_server with IAM enforcement on (`/moto-api/reset-auth`, the runtime form of
  `INITIAL_NO_AUTH_ACTION_COUNT`): every request must be SigV4-signed by a known principal
  whose policies moto finds allowing the action. `setup()` turns it off while the harness
  creates what `pulumi up` would have created (roles, instances, bucket, log groups).
- principals: one IAM role per identity the program declares, holding exactly the declared
  policy documents; sessions come from `sts:AssumeRole` (an instance's session is named after
  the instance, as EC2 names it). moto stores `moto_projection()` of each document (the
  part moto can evaluate); the front evaluates the document itself.
- the front (`url`): a local HTTP endpoint every client under test uses (`AWS_ENDPOINT_URL`).
  For each request it derives what AWS authorizes (action, resource ARN, request context:
  the instance's tags, the listing prefix, the function-URL keys…; `tests/iam/requests.py`),
  evaluates the caller's declared policies (`tests/iam/policy.py`), answers a denial as the
  service would (403 with the service's error code) and otherwise forwards to moto. It also
  plays the Lambda service: `Invoke` and function URLs run `functions.lambda_handler` in
  this process with the function's role credentials and environment, pushing its log lines
  with that role as the Lambda runtime does. It answers the SSM agent's registration and
  Session Manager channel calls itself once they are authorized (moto has no such API); SSM
Parameter Store calls go on to moto.

A session is refused once its STS `Expiration` passed (wall clock, as AWS does:
`ExpiredToken`; the grants' policy conditions read the account's `now` instead).

Every decision is kept in `decisions`; `denials()` lists the refused ones (moto's own
refusals included), so a test asserts its whole path ran with none, and proves each
condition with a call that must be denied.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any
from urllib.parse import unquote, urlsplit

import boto3
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.iam import requests as aws_requests
from tests.local_http import LocalServer, read_body as _read_body, reply as _reply
from tests.iam.policy import Authorization, Decision, as_list, evaluate, moto_projection

ACCOUNT = "123456789012"  # moto's default account
CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
FUNCTION_URL_PREFIX = "/function-url/"


@dataclass
class Principal:
    arn: str
    role: str
    session: str
    access_key: str
    secret_key: str
    token: str
    # an AssumeRole's session policy (the functions' grants): AWS allows a request only when
    # the role's policies *and* this allow it
    session_policy: dict | None = None
    # when STS said the credentials end (AWS refuses them after: `ExpiredToken`)
    expires: datetime | None = None

    def expired(self) -> bool:
        return self.expires is not None and datetime.now(UTC) >= self.expires

    def env(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_SESSION_TOKEN": self.token}

    def credentials(self) -> Credentials:
        return Credentials(self.access_key, self.secret_key, self.token)


@dataclass
class LambdaFunction:
    name: str
    arn: str  # as the program declares it (what policies name)
    role: str
    env: dict[str, str]
    url_id: str | None = None  # has a function URL (AWS_IAM)
    principal: Principal | None = None  # the runtime's session of `role`
    warm: Any = None  # the handler's module state kept between invocations, as Lambda does


@dataclass
class Record:
    who: str  # the principal's ARN
    auth: Authorization
    decision: Decision
    source: str = "front"  # "front" (declared policy), "moto" (moto's own), MISSING_KEY
    role: str = ""


MISSING_KEY = "missing key"  # a Record's source: S3 answered a missing key 403 (no unconditioned ListBucket)


@dataclass
class EnforcedAccount:
    moto_url: str
    region: str = "us-east-1"
    roles: dict[str, list[dict]] = field(default_factory=dict)  # role → declared documents
    trusts: dict[str, dict] = field(default_factory=dict)  # role → its trust policy
    now: Any = None  # the account's clock (aws:CurrentTime); None: the real time
    functions: dict[str, LambdaFunction] = field(default_factory=dict)  # by arn
    decisions: list[Record] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # the front could not interpret a request

    def __post_init__(self) -> None:
        self._keys: dict[str, Principal] = {}
        self._lock = threading.Lock()  # decisions
        self._run_lock = threading.Lock()  # one function at a time (it swaps os.environ)
        self._conditional = threading.Lock()  # see _forward
        self._setup_depth = 0
        self._admin: Credentials | None = None
        self._admin_clients: dict[str, Any] = {}
        self._server: LocalServer | None = None
        self.url = ""

    # ---- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> EnforcedAccount:
        self._server = LocalServer(self._handle)
        self.url = self._server.url
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server:
            self._server.close()
        self._enforce(False)

    def _enforce(self, on: bool) -> None:
        requests.post(f"{self.moto_url}/moto-api/reset-auth", data="0" if on else "inf",
                      timeout=10).raise_for_status()

    @contextlib.contextmanager
    def setup(self) -> Iterator[None]:
        """Enforcement off while the harness creates the account's resources."""
        self._setup_depth += 1
        if self._setup_depth == 1:
            self._enforce(False)
        try:
            yield
        finally:
            self._setup_depth -= 1
            if self._setup_depth == 0:
                self._enforce(True)

    def reset(self) -> None:
        """Forget every resource, principal and decision (moto reset; enforcement off)."""
        self._enforce(False)
        requests.post(f"{self.moto_url}/moto-api/reset", timeout=10).raise_for_status()
        self.roles.clear()
        self.trusts.clear()
        self.now = None
        self.functions.clear()
        self.decisions.clear()
        self.errors.clear()
        self._keys.clear()
        self._admin = None
        self._admin_clients.clear()

    # ---- clients ----------------------------------------------------------------------------
    def admin(self, service: str, region: str | None = None) -> Any:
        """A client of the harness itself (an IAM user allowed everything), straight to moto;
        in `region` (else the account's: a request signed for another region looks its
        resources up there)."""
        region = region or self.region
        slot = service if region == self.region else f"{service}@{region}"
        if slot in self._admin_clients:
            return self._admin_clients[slot]
        if self._admin is None:
            iam = boto3.client("iam", region_name=self.region, endpoint_url=self.moto_url,
                               aws_access_key_id="setup", aws_secret_access_key="setup")
            iam.create_user(UserName="harness-admin")
            iam.put_user_policy(UserName="harness-admin", PolicyName="all", PolicyDocument=json.dumps(
                {"Version": "2012-10-17",
                 "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
            key = iam.create_access_key(UserName="harness-admin")["AccessKey"]
            self._admin = Credentials(key["AccessKeyId"], key["SecretAccessKey"])
        client = boto3.client(service, region_name=region, endpoint_url=self.moto_url,
                              aws_access_key_id=self._admin.access_key,
                              aws_secret_access_key=self._admin.secret_key)
        self._admin_clients[slot] = client
        return client

    def client(self, service: str, principal: Principal) -> Any:
        """A client signed by `principal`, through the enforcing front."""
        return boto3.client(service, region_name=self.region, endpoint_url=self.url,
                            aws_access_key_id=principal.access_key,
                            aws_secret_access_key=principal.secret_key,
                            aws_session_token=principal.token)

    # ---- principals -------------------------------------------------------------------------
    def create_role(self, name: str, assume_role_policy: str, policies: list[dict]) -> None:
        iam = self.admin("iam")
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=_moto_trust(assume_role_policy))
        self.trusts[name] = json.loads(assume_role_policy) if assume_role_policy else {}
        self.roles[name] = [json.loads(json.dumps(p)) for p in policies]
        self.sync_role(name)

    def sync_role(self, name: str) -> None:
        """Store (again) the role's documents in moto, as projected for moto."""
        iam = self.admin("iam")
        for old in iam.list_role_policies(RoleName=name)["PolicyNames"]:
            iam.delete_role_policy(RoleName=name, PolicyName=old)
        for i, doc in enumerate(self.roles[name]):
            iam.put_role_policy(RoleName=name, PolicyName=f"declared-{i}",
                                PolicyDocument=json.dumps(moto_projection(doc, aws_requests.MOTO_ACTIONS)))

    def session(self, role: str, session_name: str) -> Principal:
        """`sts:AssumeRole` of `role` (as its service would), named `session_name`."""
        with self.setup():
            answer = self.admin("sts").assume_role(
                RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{role}", RoleSessionName=session_name)
        creds = answer["Credentials"]
        principal = Principal(
            arn=f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{session_name}", role=role,
            session=session_name, access_key=creds["AccessKeyId"],
            secret_key=creds["SecretAccessKey"], token=creds["SessionToken"],
            expires=creds["Expiration"].astimezone(UTC))
        self._keys[principal.access_key] = principal
        return principal

    def principal_of(self, access_key: str) -> Principal:
        """The session behind credentials the account handed out (e.g. a function's grant)."""
        return self._keys[access_key]

    # ---- decisions ------------------------------------------------------------------------
    def denials(self) -> list[Record]:
        """The refused requests, less S3's 403 for a missing key to a caller without an
        unconditioned s3:ListBucket (`missing_keys`): the answer the code reads as absent
        (`spotbench.results.records.launched_attempts`), not a refusal of its work."""
        return [r for r in self.decisions if not r.decision.allowed and r.source != MISSING_KEY]

    def missing_keys(self) -> list[Record]:
        """The missing keys S3 answered 403 rather than 404 (the caller may not list them)."""
        return [r for r in self.decisions if r.source == MISSING_KEY]

    def denial_lines(self) -> list[str]:
        return [f"{r.who}: {r.auth.describe()} ({r.source})" for r in self.denials()]

    def clock(self) -> str:
        return (self.now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def authorize(self, principal: Principal, auths: list[Authorization]) -> Record | None:
        """Evaluate every authorization; returns the first denial (all are recorded). A
        session with a session policy is allowed only what both its role's policies and the
        session policy allow (AWS: the intersection); every request carries the account's
        clock as `aws:CurrentTime`."""
        first = None
        for auth in auths:
            auth = Authorization(auth.action, auth.resource,
                                 {**auth.context, "aws:CurrentTime": self.clock()})
            decision = evaluate(self.roles.get(principal.role, []), auth)
            if decision.allowed and principal.session_policy is not None:
                narrowed = evaluate([principal.session_policy], auth)
                if not narrowed.allowed:
                    decision = Decision(False, f"session policy ({narrowed.by or 'implicit'})")
            record = Record(principal.arn, auth, decision, role=principal.role)
            with self._lock:
                self.decisions.append(record)
            if not decision.allowed and first is None:
                first = record
        return first

    def trusted(self, principal: Principal, role_arn: str) -> bool:
        """Whether `role_arn`'s trust policy lets `principal`'s role assume it (AWS
        principals only: the services' own trust is theirs to check)."""
        role = role_arn.rsplit("/", 1)[-1]
        mine = f"arn:aws:iam::{ACCOUNT}:role/{principal.role}"
        for s in (self.trusts.get(role) or {}).get("Statement", []):
            who = (s.get("Principal") or {}).get("AWS")
            if s.get("Effect") == "Allow" and "sts:AssumeRole" in as_list(s.get("Action")) \
                    and mine in as_list(who):
                return True
        return False

    def _assumed(self, caller: Principal, request, content: bytes) -> None:
        """Keep the session an AssumeRole through the front handed out, with its policy."""
        from urllib.parse import parse_qs
        from xml.etree import ElementTree

        form = parse_qs(request.body.decode())
        tree = ElementTree.fromstring(content)
        text = {el.tag.rsplit("}", 1)[-1]: el.text for el in tree.iter()}
        role = form["RoleArn"][0].rsplit("/", 1)[-1]
        session = form["RoleSessionName"][0]
        policy = json.loads(form["Policy"][0]) if "Policy" in form else None
        principal = Principal(arn=f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{session}",
                              role=role, session=session, access_key=text["AccessKeyId"],
                              secret_key=text["SecretAccessKey"], token=text["SessionToken"],
                              session_policy=policy,
                              expires=datetime.fromisoformat(text["Expiration"]).astimezone(UTC))
        self._keys[principal.access_key] = principal

    # ---- the front --------------------------------------------------------------------------
    def _handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        body = _read_body(h)
        headers = {k: v for k, v in h.headers.items()}
        try:
            if h.path.startswith(FUNCTION_URL_PREFIX):
                return _reply(h, *self._function_url(h, headers, body))
            scope = aws_requests.credential_scope(headers)
            if scope is None:
                return _reply(h, 403, {"Content-Type": "application/xml"},
                              b"<Error><Code>AccessDenied</Code><Message>unsigned</Message></Error>")
            principal = self._keys.get(scope.access_key)
            if principal is not None and principal.expired():  # STS: past `Expiration`
                return _reply(h, 400, {"Content-Type": "application/xml"},
                              b"<Error><Code>ExpiredToken</Code><Message>The provided token "
                              b"has expired.</Message></Error>")
            if principal is not None:
                lookup = aws_requests.Lookup(self.admin("ec2", scope.region), ACCOUNT, scope.region,
                                             functions=lambda name: self._find(name).arn)
                request = aws_requests.AwsRequest(h.command, h.path, headers, body, scope)
                auths = aws_requests.authorizations(request, lookup)
                denied = self.authorize(principal, auths)
                if denied is None and auths and auths[0].action == "sts:AssumeRole" \
                        and not self.trusted(principal, auths[0].resource):
                    denied = Record(principal.arn, auths[0], Decision(False, "trust policy"),
                                    role=principal.role)
                    with self._lock:
                        self.decisions.append(denied)
                if denied is not None:
                    return _reply(h, *aws_requests.denial(request, denied.auth, principal.arn))
                if scope.service == "lambda" and "/functions/" in h.path:
                    return _reply(h, *self._invoke_api(h.path, body))
                if scope.service == "ssmmessages" or request.target.endswith(
                        ".UpdateInstanceInformation"):  # the front plays the agent's APIs
                    return _reply(h, 200, {"Content-Type": "application/x-amz-json-1.1"},
                                  b'{"MessageSchemaVersion":"1.0"}')
            status, out_headers, content = self._forward(h, headers, body)
            if principal is not None:
                status, out_headers, content = self._after(principal, request, status,
                                                           out_headers, content)
                if status == 200 and auths and auths[0].action == "sts:AssumeRole":
                    self._assumed(principal, request, content)
            return _reply(h, status, out_headers, content)
        except Exception as exc:  # noqa: BLE001 - a harness gap must fail the test loudly
            self.errors.append(f"{h.command} {h.path}: {exc}\n{traceback.format_exc()}")
            return _reply(h, 500, {"Content-Type": "text/plain"}, str(exc).encode())

    def _forward(self, h, headers: dict[str, str], body: bytes) -> tuple[int, dict, bytes]:
        # moto checks S3's If-None-Match / If-Match and then writes, as two steps of a
        # threaded server: two racing conditional writes could both pass. S3 decides them
        # atomically, so the front lets one conditional write through at a time.
        conditional = h.command in ("PUT", "DELETE") and any(
            k.lower() in ("if-none-match", "if-match") for k in headers)
        with self._conditional if conditional else contextlib.nullcontext():
            resp = requests.request(h.command, self.moto_url + h.path, headers=headers,
                                    data=body, timeout=60, allow_redirects=False)
        drop = {"transfer-encoding", "connection", "content-encoding"}
        if h.command != "HEAD":  # a HEAD answer's length is the object's: keep it
            drop.add("content-length")
        out = {k: v for k, v in resp.headers.items() if k.lower() not in drop}
        return resp.status_code, out, resp.content

    def _after(self, principal: Principal, request, status: int, headers: dict,
               content: bytes) -> tuple[int, dict, bytes]:
        """Answers AWS gives differently from moto, and moto's own refusals."""
        if status in (401, 403):
            with self._lock:
                self.decisions.append(Record(principal.arn, Authorization(
                    f"{request.scope.service}:?", request.path), Decision(False, None), "moto",
                    principal.role))
            return status, headers, content
        # a bulk delete answers 200 and lists the keys refused (s3fs drops them silently)
        for key in aws_requests.bulk_delete_refusals(request, status, content):
            with self._lock:
                self.decisions.append(Record(principal.arn, Authorization(
                    "s3:DeleteObject", key), Decision(False, None), "moto", principal.role))
        # S3 answers a missing key with 403, not 404, to a caller without s3:ListBucket.
        miss = aws_requests.missing_key_needs_list(request, status)
        refused = self.authorize(principal, [miss]) if miss is not None else None
        if refused is not None:
            refused.source = MISSING_KEY  # S3's answer to a missing key, not a refusal of work
            return aws_requests.denial(request, miss, principal.arn)
        return status, headers, content

    # ---- the Lambda service -------------------------------------------------------------------
    def add_function(self, fn: LambdaFunction) -> None:
        self.functions[fn.arn] = fn

    def function_url(self, fn: LambdaFunction) -> str:
        fn.url_id = fn.url_id or uuid.uuid4().hex[:12]
        return f"{self.url}{FUNCTION_URL_PREFIX}{fn.url_id}/"

    def _find(self, name_or_arn: str) -> LambdaFunction:
        for fn in self.functions.values():
            if name_or_arn in (fn.arn, fn.name):
                return fn
        raise KeyError(f"no function {name_or_arn}")

    def _invoke_api(self, path: str, body: bytes) -> tuple[int, dict, bytes]:
        name = unquote(path.split("/functions/", 1)[1].split("/", 1)[0])
        fn = self._find(name)
        event = json.loads(body or b"{}")
        try:
            result = self.run_function(fn, event)
        except Exception as exc:  # noqa: BLE001 - Lambda answers 200 + X-Amz-Function-Error
            payload = {"errorMessage": str(exc), "errorType": type(exc).__name__}
            return 200, {"Content-Type": "application/json", "X-Amz-Function-Error": "Unhandled"}, \
                json.dumps(payload).encode()
        return 200, {"Content-Type": "application/json"}, json.dumps(result).encode()

    def _function_url(self, h, headers: dict[str, str], body: bytes) -> tuple[int, dict, bytes]:
        url_id = h.path[len(FUNCTION_URL_PREFIX):].split("/", 1)[0]
        fn = next((f for f in self.functions.values() if f.url_id == url_id), None)
        if fn is None:
            return 404, {"Content-Type": "application/json"}, b'{"Message":"not found"}'
        forbidden = (403, {"Content-Type": "application/json"}, b'{"Message":"Forbidden"}')
        scope = aws_requests.credential_scope(headers)
        principal = self._keys.get(scope.access_key) if scope else None
        if principal is None or principal.expired() or scope.service != "lambda" or not self._signature_ok(
                h, headers, body, principal, scope.region):
            return forbidden
        auths = [
            Authorization("lambda:InvokeFunctionUrl", fn.arn,
                          {"lambda:FunctionUrlAuthType": "AWS_IAM"}),
            Authorization("lambda:InvokeFunction", fn.arn,
                          {"lambda:InvokedViaFunctionUrl": "true"}),
        ]
        if self.authorize(principal, auths) is not None:
            return forbidden
        # the function sees the path after its URL's host: `/`, `/grant`, `/keys`
        raw_path = "/" + urlsplit(h.path).path[len(FUNCTION_URL_PREFIX):].split("/", 1)[1] \
            if "/" in urlsplit(h.path).path[len(FUNCTION_URL_PREFIX):] else "/"
        event = {
            "version": "2.0", "rawPath": raw_path, "headers": headers,
            "body": body.decode(), "isBase64Encoded": False,
            "requestContext": {
                "accountId": "anonymous", "http": {"method": h.command, "path": "/"},
                "authorizer": {"iam": {"accountId": ACCOUNT, "userArn": principal.arn,
                                       "userId": f"AROA:{principal.session}",
                                       "callerId": f"AROA:{principal.session}",
                                       "accessKey": principal.access_key}},
            },
        }
        out = self.run_function(fn, event)
        return int(out["statusCode"]), dict(out.get("headers") or {}), out["body"].encode()

    @staticmethod
    def _signature_ok(h, headers: dict[str, str], body: bytes, principal: Principal,
                      region: str) -> bool:
        auth_header = headers.get("Authorization", "")
        signed = auth_header.split("SignedHeaders=", 1)[1].split(",", 1)[0].split(";")
        given = auth_header.rsplit("Signature=", 1)[1].strip()
        wanted_headers = {k: v for k, v in headers.items() if k.lower() in signed}
        request = AWSRequest(method=h.command, url=f"http://{headers.get('Host')}{h.path}",
                             data=body, headers=wanted_headers)
        request.context["timestamp"] = headers.get("X-Amz-Date", "")
        signer = SigV4Auth(principal.credentials(), "lambda", region)
        canonical = signer.canonical_request(request)
        return signer.signature(signer.string_to_sign(request, canonical), request) == given

    def run_function(self, fn: LambdaFunction, event: Any) -> Any:
        """Run the handler as the Lambda runtime does: the function's environment and its
        role's session credentials; its log lines go to its log group with that role."""
        from functions import lambda_handler

        if fn.principal is None:
            fn.principal = self.session(fn.role, fn.name)
        role = fn.principal
        env = {**fn.env, **role.env(), "AWS_ENDPOINT_URL": self.url, "AWS_REGION": self.region,
               "AWS_DEFAULT_REGION": self.region, "AWS_LAMBDA_FUNCTION_NAME": fn.name}
        context = SimpleNamespace(invoked_function_arn=(
            f"arn:aws:lambda:{self.region}:{ACCOUNT}:function:{fn.name}"))
        with self._run_lock, environment(env, clear_caches=fn.warm is None):
            lambda_handler._config = fn.warm
            try:
                result = lambda_handler.handler(event, context)
            finally:
                fn.warm, lambda_handler._config = lambda_handler._config, None
            logs = self.client("logs", role)
            stream = f"{time.strftime('%Y/%m/%d')}/[$LATEST]{uuid.uuid4().hex}"
            group = f"/aws/lambda/{fn.name}"
            logs.create_log_stream(logGroupName=group, logStreamName=stream)
            logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[
                {"timestamp": int(time.time() * 1000), "message": json.dumps(result)[:1000]}])
        return result


def _moto_trust(document: str) -> str:
    """The trust policy handed to moto. AWS lets a role named as a trust principal assume
    through any of its sessions (`assumed-role/<role>/<session>`); moto compares the
    session's ARN with the role's and refuses. An AWS principal is widened to `*` for moto:
    the front checks the declared trust itself (`EnforcedAccount.trusted`)."""
    doc = json.loads(document) if document else {}
    for statement in doc.get("Statement", []):
        if "AWS" in (statement.get("Principal") or {}):
            statement["Principal"] = {"AWS": "*"}
    return json.dumps(doc) if doc else document


@contextlib.contextmanager
def environment(values: Mapping[str, str], clear_caches: bool = True) -> Iterator[None]:
    """Set env vars (credentials included) for the code under test; clear the filesystem
    caches and boto3's default session, which would hand it another principal's client."""
    import fsspec

    saved = {k: os.environ.get(k) for k in [*values, *CREDENTIAL_ENV]}
    for key in CREDENTIAL_ENV:
        os.environ.pop(key, None)
    os.environ.update(values)
    if clear_caches:
        _clear_fs_cache(fsspec)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if clear_caches:
            _clear_fs_cache(fsspec)


def _clear_fs_cache(fsspec: Any) -> None:
    boto3.DEFAULT_SESSION = None  # boto3.client() keeps the credentials it first found
    try:
        cls = fsspec.get_filesystem_class("s3")
    except (ImportError, ValueError):
        return
    cls.clear_instance_cache()


Invoker = Callable[[LambdaFunction, Any], Any]
