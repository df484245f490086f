"""What GCP's IAM would decide, from the policy the Pulumi program declares.

`DeclaredPolicy.from_declared(mocks.declared)` reads every binding the program declares
(project `IAMMember`s, bucket `BucketIAMMember`s, service-account `IAMMember`s, Cloud Run
`ServiceIamMember`s, IAP `TunnelIamMember`s (the project's tunnels: their conditions see
`destination.ip`/`.port`) and `TunnelInstanceIAMMember`s, Secret Manager `SecretIamMember`s, with
their IAM conditions) and every
custom role's permission list, straight from the mocked resources. `allows()` answers whether
a member holds a permission on a resource, evaluating IAM conditions (CEL, with cel-python)
for the resource the call touches. `permissions_for(call)` maps a recorded REST call to the
permissions Google documents for that method, and the resource each is checked on.

Nothing here restates the program's policy: only Google's own facts are tables here —
what a predefined role contains and what a REST method requires — each with its source.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote

import celpy

from tests.clouds.google_endpoint import Call

# ---- Google's facts ---------------------------------------------------------------------
# Predefined roles, only the permissions relevant to the calls spotbench makes.
# Sources: https://cloud.google.com/iam/docs/roles-permissions (per-service pages):
#   storage  https://cloud.google.com/storage/docs/access-control/iam-roles
#   run      https://cloud.google.com/run/docs/reference/iam/roles
#   iam      https://cloud.google.com/iam/docs/service-account-permissions#user-role
#   iap      https://cloud.google.com/iap/docs/using-tcp-forwarding#grant-permission
#   logging  https://cloud.google.com/logging/docs/access-control#permissions_and_roles
#   AR       https://cloud.google.com/artifact-registry/docs/access-control#roles
#   build    https://cloud.google.com/build/docs/iam-roles-permissions
#   secrets  https://cloud.google.com/secret-manager/docs/access-control#roles
PREDEFINED_ROLES: Mapping[str, frozenset[str]] = {
    "roles/secretmanager.secretAccessor": frozenset({"secretmanager.versions.access"}),
    "roles/storage.objectCreator": frozenset({"storage.objects.create"}),
    "roles/storage.objectViewer": frozenset({"storage.objects.get", "storage.objects.list"}),
    "roles/storage.objectUser": frozenset({
        "storage.objects.create", "storage.objects.delete", "storage.objects.get",
        "storage.objects.list", "storage.objects.update"}),
    "roles/run.invoker": frozenset({"run.routes.invoke", "run.jobs.run"}),
    # https://cloud.google.com/compute/docs/access/iam#compute.networkUser (what applies on a
    # subnetwork: Shared VPC's subnet-level grant)
    "roles/compute.networkUser": frozenset({
        "compute.subnetworks.use", "compute.subnetworks.useExternalIp", "compute.subnetworks.get",
        "compute.subnetworks.list", "compute.networks.use", "compute.networks.get"}),
    "roles/iam.serviceAccountUser": frozenset({
        "iam.serviceAccounts.actAs", "iam.serviceAccounts.get", "iam.serviceAccounts.list"}),
    "roles/iap.tunnelResourceAccessor": frozenset({
        "iap.tunnelInstances.accessViaIAP", "iap.tunnelDestGroups.accessViaIAP"}),
    "roles/logging.logWriter": frozenset({"logging.logEntries.create"}),
    "roles/artifactregistry.reader": frozenset({
        "artifactregistry.repositories.downloadArtifacts", "artifactregistry.repositories.get",
        "artifactregistry.repositories.list"}),
    "roles/artifactregistry.writer": frozenset({
        "artifactregistry.repositories.downloadArtifacts",
        "artifactregistry.repositories.uploadArtifacts", "artifactregistry.repositories.get"}),
    # the deployer's roles (spotbench.clouds.gcp.DEPLOYER_ROLES), the permissions preflight uses
    "roles/compute.instanceAdmin.v1": frozenset({
        "compute.instances.list", "compute.instances.get", "compute.instances.delete",
        "compute.instances.start", "compute.instances.stop", "compute.zoneOperations.get",
        "compute.projects.get", "compute.regions.get", "compute.zones.get",
        "compute.machineTypes.get", "compute.acceleratorTypes.get"}),
    "roles/compute.networkAdmin": frozenset({
        "compute.addresses.list", "compute.addresses.delete", "compute.regionOperations.get",
        "compute.projects.get", "compute.regions.get", "compute.subnetworks.list"}),
    # https://cloud.google.com/iam/docs/understanding-roles#iam.serviceAccountAdmin, #iam.roleAdmin
    "roles/iam.serviceAccountAdmin": frozenset({
        "iam.serviceAccounts.create", "iam.serviceAccounts.delete", "iam.serviceAccounts.get",
        "iam.serviceAccounts.list", "iam.serviceAccounts.update",
        "iam.serviceAccounts.getIamPolicy", "iam.serviceAccounts.setIamPolicy"}),
    "roles/iam.roleAdmin": frozenset({
        "iam.roles.create", "iam.roles.delete", "iam.roles.get", "iam.roles.list",
        "iam.roles.undelete", "iam.roles.update"}),
    "roles/serviceusage.serviceUsageAdmin": frozenset({
        "serviceusage.services.list", "serviceusage.services.get", "serviceusage.services.enable"}),
    "roles/cloudbuild.builds.builder": frozenset({
        "cloudbuild.builds.create", "cloudbuild.builds.get", "logging.logEntries.create",
        "storage.objects.get", "storage.objects.list", "storage.objects.create",
        "artifactregistry.repositories.uploadArtifacts",
        "artifactregistry.repositories.downloadArtifacts"}),
}

_CP = "/compute/v1/projects/(?P<p>[^/]+)"
# REST method → permissions. Sources: the "Authorization / IAM permissions" section of each
# method's reference page, https://cloud.google.com/compute/docs/reference/rest/v1/instances
# (aggregatedList: compute.instances.list; get; start: compute.instances.start and, for an
# instance with a service account, iam.serviceAccounts.actAs; stop; resume; delete),
# .../v1/zoneOperations (get, wait: compute.zoneOperations.get; list: .list), .../v1/addresses
# (aggregatedList: compute.addresses.list; delete: compute.addresses.delete),
# .../v1/regionOperations (get, wait: compute.regionOperations.get);
# https://cloud.google.com/storage/docs/access-control/iam-json (objects get / list / insert /
# delete, buckets get; replacing an existing object needs create AND delete).
_COMPUTE: list[tuple[str, re.Pattern[str], str]] = [
    ("GET", re.compile(_CP + "/aggregated/instances$"), "compute.instances.list"),
    ("GET", re.compile(_CP + "/zones/(?P<z>[^/]+)/instances$"), "compute.instances.list"),
    ("GET", re.compile(_CP + "/zones/(?P<z>[^/]+)/instances/(?P<i>[^/]+)$"), "compute.instances.get"),
    ("POST", re.compile(_CP + "/zones/(?P<z>[^/]+)/instances/(?P<i>[^/]+)/start$"), "compute.instances.start"),
    ("POST", re.compile(_CP + "/zones/(?P<z>[^/]+)/instances/(?P<i>[^/]+)/resume$"), "compute.instances.resume"),
    ("POST", re.compile(_CP + "/zones/(?P<z>[^/]+)/instances/(?P<i>[^/]+)/stop$"), "compute.instances.stop"),
    ("DELETE", re.compile(_CP + "/zones/(?P<z>[^/]+)/instances/(?P<i>[^/]+)$"), "compute.instances.delete"),
    ("GET", re.compile(_CP + "/zones/(?P<z>[^/]+)/operations/(?P<o>[^/]+)$"), "compute.zoneOperations.get"),
    ("POST", re.compile(_CP + "/zones/(?P<z>[^/]+)/operations/(?P<o>[^/]+)/wait$"), "compute.zoneOperations.get"),
    ("GET", re.compile(_CP + "/zones/(?P<z>[^/]+)/operations$"), "compute.zoneOperations.list"),
    ("GET", re.compile(_CP + "/aggregated/addresses$"), "compute.addresses.list"),
    # preflight: does another subnet overlap the operators' tunnel range (subnetworks.aggregatedList)
    ("GET", re.compile(_CP + "/aggregated/subnetworks$"), "compute.subnetworks.list"),
    ("DELETE", re.compile(_CP + "/regions/(?P<r>[^/]+)/addresses/(?P<a>[^/]+)$"), "compute.addresses.delete"),
    ("GET", re.compile(_CP + "/regions/(?P<r>[^/]+)/operations/(?P<ro>[^/]+)$"), "compute.regionOperations.get"),
    ("POST", re.compile(_CP + "/regions/(?P<r>[^/]+)/operations/(?P<ro>[^/]+)/wait$"), "compute.regionOperations.get"),
    ("GET", re.compile(_CP + "$"), "compute.projects.get"),
    ("GET", re.compile(_CP + "/regions/(?P<r>[^/]+)$"), "compute.regions.get"),
    ("GET", re.compile(_CP + "/zones/(?P<z>[^/]+)/machineTypes/(?P<t>[^/]+)$"), "compute.machineTypes.get"),
    ("GET", re.compile(_CP + "/zones/(?P<z>[^/]+)/acceleratorTypes/(?P<t>[^/]+)$"), "compute.acceleratorTypes.get"),
]  # fmt: skip
# regionInstances.bulkInsert (the created lifecycle): creating a VM from an instance template
# needs compute.instances.create on the new instance, compute.disks.create on its new boot
# disk (named like it), compute.instanceTemplates.useReadOnly on the template,
# compute.subnetworks.use on its subnet, compute.instances.setMetadata / setTags / setLabels /
# setServiceAccount for what the template sets, and iam.serviceAccounts.actAs on the account
# it runs as. Sources: https://cloud.google.com/compute/docs/instances/multiple/create-in-bulk
# ("Required roles") and https://cloud.google.com/compute/docs/instances/create-vm-from-instance-template
_BULK_INSERT = re.compile(_CP + "/regions/(?P<r>[^/]+)/instances/bulkInsert$")
BULK_INSTANCE_PERMISSIONS = ("compute.instances.create", "compute.instances.setMetadata",
                             "compute.instances.setTags", "compute.instances.setLabels",
                             "compute.instances.setServiceAccount")
# A template naming resource policies (spread / compact placement) also needs
# compute.resourcePolicies.use on each (in roles/compute.instanceAdmin.v1; research.md §1 G1),
# and one labelling its boot disk compute.disks.setLabels on the new disk (G4: not
# documented either way for a create; modelled as checked, the stricter reading).
# https://cloud.google.com/service-usage/docs/reference/rest/v1/services/list
_SERVICES = re.compile(r"^/v1/projects/(?P<p>[^/]+)/services$")
# IAM: projects.serviceAccounts.list (iam.serviceAccounts.list), projects.roles.list
# (iam.roles.list): what preflight counts against the project's quotas
_IAM_LISTS = re.compile(r"^/v1/projects/(?P<p>[^/]+)/(?P<what>serviceAccounts|roles)$")
# https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs
# (get: cloudscheduler.jobs.get; pause / resume / run: cloudscheduler.jobs.pause|resume|run)
_JOB = re.compile(r"^/v1/(?P<job>projects/[^/]+/locations/[^/]+/jobs/[^/:]+)(?::(?P<verb>\w+))?$")
# https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets.versions/access
# (secretmanager.versions.access on the version; granted on the secret or the project)
_SECRET_ACCESS = re.compile(r"^/v1/(?P<v>projects/[^/]+/secrets/[^/]+/versions/[^/:]+):access$")
# https://cloud.google.com/iam/docs/reference/credentials/rest/v1/projects.serviceAccounts/signBlob
# (iam.serviceAccounts.signBlob on the account that signs; `-` for the project: inferred)
_SIGN_BLOB = re.compile(r"^/v1/projects/[^/]+/serviceAccounts/(?P<a>[^/:]+):signBlob$")
# https://cloud.google.com/storage/docs/xml-api/post-object-forms: a POST policy upload is
# authorized as the account that signed the policy (`x-goog-credential`), which needs
# storage.objects.create on the object (https://cloud.google.com/storage/docs/access-control/signed-urls)
_POST_FORM = re.compile(r"^/(?P<b>[^/]+)$")
# https://cloud.google.com/iam/docs/reference/sts/rest/v1/TopLevel/token: no IAM permission;
# the subject token is the credential, and the downscoped token is checked when used
STS_TOKEN = "/v1/token"
SERVICE_ACCOUNT_TYPE = "iam.googleapis.com/ServiceAccount"
_BUCKET = re.compile(r"^/(?:upload/|download/)?storage/v1/b/(?P<b>[^/]+)(?P<rest>/o(?:/(?P<o>.+))?)?$")

# The resource types IAM conditions see (`resource.type`).
INSTANCE_TYPE = "compute.googleapis.com/Instance"
PROJECT_TYPE = "cloudresourcemanager.googleapis.com/Project"
BUCKET_TYPE = "storage.googleapis.com/Bucket"
OBJECT_TYPE = "storage.googleapis.com/Object"
SECRET_VERSION_TYPE = "secretmanager.googleapis.com/SecretVersion"
DISK_TYPE = "compute.googleapis.com/Disk"
TEMPLATE_TYPE = "compute.googleapis.com/InstanceTemplate"
SUBNET_TYPE = "compute.googleapis.com/Subnetwork"
RESOURCE_POLICY_TYPE = "compute.googleapis.com/ResourcePolicy"
# Compute Engine types whose name IAM conditions see (the resource name attribute; the
# rest, subnetworks and resource policies among them, "do not recognize resource
# attributes": their `resource.name` is empty here, so a name term on one is false)
# https://cloud.google.com/iam/docs/conditions-resource-attributes ·
# https://cloud.google.com/iam/help/conditions/resource-policies
COMPUTE_NAMED_TYPES = frozenset({
    "compute.googleapis.com/BackendService", "compute.googleapis.com/Disk",
    "compute.googleapis.com/Firewall", "compute.googleapis.com/Image", INSTANCE_TYPE,
    TEMPLATE_TYPE, "compute.googleapis.com/Snapshot"})


def condition_name(need_type: str, resource: str) -> str:
    """`resource.name` as a condition sees it for a resource of `need_type`."""
    if need_type.startswith("compute.googleapis.com/") and need_type not in COMPUTE_NAMED_TYPES:
        return ""
    return resource


@dataclass(frozen=True)
class Need:
    """One permission a call needs, on one resource (what IAM checks)."""

    permission: str
    resource: str  # full resource name, e.g. projects/p/zones/z/instances/i
    type: str
    attributes: Mapping[str, str] = field(default_factory=dict)  # api.getAttribute values
    # IAP TCP forwarding: `destination.ip` / `destination.port` of the tunnel
    destination: Mapping[str, Any] = field(default_factory=dict)


class UnknownMethod(AssertionError):
    pass


def bulk_insert_needs(call: Call, template_of: Any = None) -> list[Need]:
    """What a regionInstances.bulkInsert needs: per named instance in the zone its location
    policy allows, and on the template, its subnet, the account it runs as, its resource
    policies and, when it labels the boot disk, that disk's labels (`template_of(template
    resource name)` → (subnet resource name, account email[, policy names[, disk labelled]]))."""
    m = _BULK_INSERT.match(call.path)
    assert m is not None
    body = json.loads(call.body or b"{}")
    zones = [k.rsplit("/", 1)[-1] for k, v in
             ((body.get("locationPolicy") or {}).get("locations") or {}).items()
             if v.get("preference") == "ALLOW"] or ["-"]
    template = str(body.get("sourceInstanceTemplate", "")).split("/compute/v1/", 1)[-1]
    needs = [Need("compute.instanceTemplates.useReadOnly", template, TEMPLATE_TYPE)]
    for zone in zones:
        for name in body.get("perInstanceProperties") or {}:
            where = f"projects/{m['p']}/zones/{zone}"
            needs += [Need(p, f"{where}/instances/{name}", INSTANCE_TYPE)
                      for p in BULK_INSTANCE_PERMISSIONS]
            needs.append(Need("compute.disks.create", f"{where}/disks/{name}", DISK_TYPE))
    known = template_of(template) if template_of else None
    if known:
        subnet, account, *more = known
        policies, disk_labels = (list(more) + [(), False])[:2]
        needs += [Need("compute.resourcePolicies.use", p, RESOURCE_POLICY_TYPE) for p in policies]
        if disk_labels:
            needs += [n.__class__("compute.disks.setLabels", n.resource, DISK_TYPE)
                      for n in list(needs) if n.permission == "compute.disks.create"]
        needs.append(Need("compute.subnetworks.use", subnet, SUBNET_TYPE))
        if account:
            needs.append(Need("iam.serviceAccounts.actAs",
                              f"projects/{m['p']}/serviceAccounts/{account}", SERVICE_ACCOUNT_TYPE))
    return needs


def permissions_for(call: Call, *, object_exists: Any = None,
                    instance_account: Any = None, template_of: Any = None) -> list[Need]:  # fmt: skip
    """The permissions `call` needs. `object_exists(bucket, name)` tells an overwrite from a
    create; `instance_account(project, zone, name)` the email a started instance runs as;
    `template_of(template)` a template's (subnet, account)."""
    if call.method == "POST" and _BULK_INSERT.match(call.path):
        return bulk_insert_needs(call, template_of)
    for method, pattern, permission in _COMPUTE:
        m = pattern.match(call.path)
        if m and method == call.method:
            p = m["p"]
            if "i" in m.groupdict() and m["i"]:
                name = f"projects/{p}/zones/{m['z']}/instances/{m['i']}"
                needs = [Need(permission, name, INSTANCE_TYPE)]
                account = instance_account(p, m["z"], m["i"]) if instance_account else None
                if permission in ("compute.instances.start", "compute.instances.resume") and account:
                    needs.append(Need("iam.serviceAccounts.actAs",
                                      f"projects/{p}/serviceAccounts/{account}",
                                      "iam.googleapis.com/ServiceAccount"))
                return needs
            if m.groupdict().get("a"):
                return [Need(permission, f"projects/{p}/regions/{m['r']}/addresses/{m['a']}",
                             "compute.googleapis.com/Address")]
            if m.groupdict().get("ro"):
                return [Need(permission, f"projects/{p}/regions/{m['r']}/operations/{m['ro']}",
                             "compute.googleapis.com/Operation")]
            if "o" in m.groupdict() and m["o"]:
                return [Need(permission, f"projects/{p}/zones/{m['z']}/operations/{m['o']}",
                             "compute.googleapis.com/Operation")]
            return [Need(permission, f"projects/{p}", PROJECT_TYPE)]
    m = _SERVICES.match(call.path)
    if m and call.method == "GET":
        return [Need("serviceusage.services.list", f"projects/{m['p']}", PROJECT_TYPE)]
    m = _IAM_LISTS.match(call.path)
    if m and call.method == "GET":
        permission = {"serviceAccounts": "iam.serviceAccounts.list", "roles": "iam.roles.list"}
        return [Need(permission[m["what"]], f"projects/{m['p']}", PROJECT_TYPE)]
    m = _JOB.match(call.path)
    if m:
        verb = {("GET", None): "get", ("POST", "pause"): "pause", ("POST", "resume"): "resume",
                ("POST", "run"): "run"}.get((call.method, m["verb"]))
        if verb:
            return [Need(f"cloudscheduler.jobs.{verb}", m["job"], "cloudscheduler.googleapis.com/Job")]
    m = _SECRET_ACCESS.match(call.path)
    if m and call.method == "GET":
        return [Need("secretmanager.versions.access", m["v"], SECRET_VERSION_TYPE)]
    m = _SIGN_BLOB.match(call.path)
    if m and call.method == "POST":
        email = unquote(m["a"])
        project = email.split("@", 1)[1].split(".", 1)[0]
        return [Need("iam.serviceAccounts.signBlob", f"projects/{project}/serviceAccounts/{email}",
                     SERVICE_ACCOUNT_TYPE)]
    m = _POST_FORM.match(call.path)
    if m and call.method == "POST":
        name = post_form(call)[0].get("key", "")
        need = f"projects/_/buckets/{unquote(m['b'])}/objects/{name}"
        needs = [Need("storage.objects.create", need, OBJECT_TYPE)]
        if object_exists and object_exists(unquote(m["b"]), name):
            needs.append(Need("storage.objects.delete", need, OBJECT_TYPE))
        return needs
    m = _BUCKET.match(call.path)
    if m:
        bucket = unquote(m["b"])
        bucket_name = f"projects/_/buckets/{bucket}"
        if m["rest"] is None and call.method == "GET":
            return [Need("storage.buckets.get", bucket_name, BUCKET_TYPE)]
        if call.path.startswith("/upload/") and call.q("upload_id"):
            # the bytes of a resumable upload: the session URL is the authorization, checked
            # when it was created (https://cloud.google.com/storage/docs/resumable-uploads)
            return []
        if call.path.startswith("/upload/") and call.method == "POST":
            name = _upload_name(call)
            needs = [Need("storage.objects.create", f"{bucket_name}/objects/{name}", OBJECT_TYPE)]
            if object_exists and object_exists(bucket, name) and call.q("ifGenerationMatch") != "0":
                needs.append(Need("storage.objects.delete", f"{bucket_name}/objects/{name}",
                                  OBJECT_TYPE))
            return needs
        if m["o"] is None and call.method == "GET":
            prefix = call.q("prefix")
            return [Need("storage.objects.list", bucket_name, BUCKET_TYPE,
                         {"storage.googleapis.com/objectListPrefix": prefix})]
        if m["o"] is not None:
            name = unquote(m["o"])
            verb = {"GET": "storage.objects.get", "DELETE": "storage.objects.delete"}.get(call.method)
            if verb:
                return [Need(verb, f"{bucket_name}/objects/{name}", OBJECT_TYPE)]
    raise UnknownMethod(
        f"{call.method} {call.path}: no permission known for this REST method; add it to the "
        "method table in tests/fidelity/gcp_iam.py with the permission Google documents"
    )


def post_form(call: Call) -> tuple[dict[str, str], bytes]:
    """The fields and file of a POST policy upload (multipart form)."""
    from tests.fidelity.gcs_grants import _form

    return _form(call.content_type, call.body)


def signer_of(call: Call) -> str | None:
    """The account a POST policy upload is authorized as (its `x-goog-credential`)."""
    if call.method != "POST" or not _POST_FORM.match(call.path):
        return None
    account = post_form(call)[0].get("x-goog-credential", "").split("/", 1)[0]
    return f"serviceAccount:{account}" if account else None


def boundary_allows(policy: DeclaredPolicy, boundary: Mapping[str, Any], need: Need) -> bool:
    """A Credential Access Boundary's rules for `need`: a rule on the need's bucket whose
    permissions hold it and whose condition holds (https://cloud.google.com/iam/docs/downscoping-short-lived-credentials#define-boundary)."""
    m = re.match(r"^projects/_/buckets/([^/]+)", need.resource)
    for rule in boundary.get("accessBoundaryRules", []):
        if not m or rule.get("availableResource") != f"//storage.googleapis.com/projects/_/buckets/{m[1]}":
            continue
        roles = [r.removeprefix("inRole:") for r in rule.get("availablePermissions", [])]
        if not any(need.permission in policy.role_permissions(r) for r in roles):
            continue
        expression = (rule.get("availabilityCondition") or {}).get("expression")
        if policy._condition(Binding("", "", "", expression), need):
            return True
    return False


def _upload_name(call: Call) -> str:
    if call.q("name"):
        return call.q("name")
    match = re.search(rb'\{[^{}]*"name"\s*:[^{}]*\}', call.body or b"")
    if not match:
        raise UnknownMethod(f"upload without an object name: {call.path}")
    return json.loads(match.group(0))["name"]


# ---- the declared policy ----------------------------------------------------------------
@dataclass(frozen=True)
class Binding:
    scope: str  # the resource the binding is set on (full resource name)
    role: str
    member: str
    condition: str | None = None  # CEL expression
    title: str = ""


@dataclass
class DeclaredPolicy:
    bindings: list[Binding]
    custom_roles: dict[str, frozenset[str]]  # projects/P/roles/ID → permissions
    bucket_projects: dict[str, str]  # bucket name → project
    _cel: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_declared(cls, declared: Iterable[Any], project: str) -> DeclaredPolicy:
        declared = list(declared)
        accounts = {d.name: _email(d, project) for d in declared
                    if d.type == "gcp:serviceaccount/account:Account"}  # fmt: skip
        roles: dict[str, frozenset[str]] = {}
        bindings: list[Binding] = []
        buckets: dict[str, str] = {}
        for d in declared:
            i = d.inputs
            cond = i.get("condition") or {}
            expr, title = cond.get("expression"), cond.get("title", "")
            if d.type == "gcp:projects/iAMCustomRole:IAMCustomRole":
                roles[f"projects/{i.get('project') or project}/roles/{i['roleId']}"] = frozenset(
                    i["permissions"])
            elif d.type == "gcp:storage/bucket:Bucket":
                buckets[i["name"]] = i.get("project") or project
            elif d.type == "gcp:projects/iAMMember:IAMMember":
                bindings.append(Binding(f"projects/{i['project']}", i["role"], i["member"], expr, title))
            elif d.type == "gcp:storage/bucketIAMMember:BucketIAMMember":
                bindings.append(Binding(f"projects/_/buckets/{i['bucket']}", i["role"], i["member"],
                                        expr, title))
            elif d.type == "gcp:serviceaccount/iAMMember:IAMMember":
                sa = i["serviceAccountId"]
                email = accounts.get(sa) or sa.rsplit("/", 1)[-1]
                bindings.append(Binding(f"projects/{project}/serviceAccounts/{email}", i["role"],
                                        i["member"], expr, title))
            elif d.type == "gcp:compute/subnetworkIAMMember:SubnetworkIAMMember":
                p = i.get("project") or project
                bindings.append(Binding(
                    f"projects/{p}/regions/{i['region']}/subnetworks/{i['subnetwork']}",
                    i["role"], i["member"], expr, title))
            elif d.type == "gcp:cloudrunv2/serviceIamMember:ServiceIamMember":
                p = i.get("project") or project
                bindings.append(Binding(f"projects/{p}/locations/{i['location']}/services/{i['name']}",
                                        i["role"], i["member"], expr, title))
            elif d.type == "gcp:secretmanager/secretIamMember:SecretIamMember":
                bindings.append(Binding(_secret_name(i["secretId"], i.get("project") or project),
                                        i["role"], i["member"], expr, title))
            elif d.type == "gcp:iap/tunnelIamMember:TunnelIamMember":  # the project's tunnels
                p = i.get("project") or project
                bindings.append(Binding(f"projects/{p}/iap_tunnel", i["role"], i["member"],
                                        expr, title))
            elif d.type == "gcp:iap/tunnelInstanceIAMMember:TunnelInstanceIAMMember":
                p = i.get("project") or project
                bindings.append(Binding(f"projects/{p}/zones/{i['zone']}/instances/{i['instance']}",
                                        i["role"], i["member"], expr, title))
        return cls(bindings, roles, buckets)

    # -- evaluation ----------------------------------------------------------------------
    def role_permissions(self, role: str) -> frozenset[str]:
        if role in self.custom_roles:
            return self.custom_roles[role]
        if role not in PREDEFINED_ROLES:
            raise AssertionError(f"predefined role {role} is not in the documented table")
        return PREDEFINED_ROLES[role]

    def _ancestors(self, resource: str) -> list[str]:
        out = [resource]
        m = re.match(r"^projects/_/buckets/([^/]+)", resource)
        if m:
            out.append(f"projects/_/buckets/{m[1]}")
            project = self.bucket_projects.get(m[1])
            if project:
                out.append(f"projects/{project}")
            return out
        m = re.match(r"^(projects/[^/]+/iap_tunnel)/zones/([^/]+)/instances/", resource)
        if m:  # an IAP tunnel instance inherits its zone's and the project's tunnel policy
            out += [f"{m[1]}/zones/{m[2]}", m[1]]
        m = re.match(r"^(projects/[^/]+/secrets/[^/]+)/versions/", resource)
        if m:  # a version inherits its secret's policy
            out.append(m[1])
        m = re.match(r"^projects/([^/]+)", resource)
        if m:
            out.append(f"projects/{m[1]}")
        return out

    def allows(self, member: str, need: Need) -> bool:
        return any(self.granting(member, need))

    def granting(self, member: str, need: Need) -> list[Binding]:
        scopes = set(self._ancestors(need.resource))
        return [b for b in self.bindings
                if b.scope in scopes and b.member == member
                and need.permission in self.role_permissions(b.role)
                and self._condition(b, need)]  # fmt: skip

    def _condition(self, binding: Binding, need: Need) -> bool:
        if not binding.condition:
            return True
        program = self._cel.get(binding.condition)
        if program is None:
            env = celpy.Environment()
            program = env.program(env.compile(binding.condition),
                                  functions={"getAttribute": _get_attribute, "extract": extract})
            self._cel[binding.condition] = program
        activation = celpy.json_to_cel({
            "resource": {"name": condition_name(need.type, need.resource), "type": need.type,
                         "service": need.type.split("/", 1)[0]},
            "api": dict(need.attributes),
            "destination": dict(need.destination),
        })
        return bool(program.evaluate(activation))

    def without(self, role: str, permission: str) -> DeclaredPolicy:
        """This policy with `permission` dropped from custom role `role`."""
        roles = dict(self.custom_roles)
        roles[role] = roles[role] - {permission}
        return replace(self, custom_roles=roles, _cel={})


def _get_attribute(api: Any, name: Any, default: Any) -> Any:
    return api.get(name, default)


def extract(name: Any, template: Any) -> Any:
    """IAM's `resource.name.extract(template)`: the text between the first occurrence of the
    template's part before `{…}` and the next occurrence of its part after it (to the end
    when there is none); '' when either is absent.
    https://cloud.google.com/iam/docs/conditions-attribute-reference#resource-name
    (e.g. `/objects/{name}/order_date=` gives `data_lake/orders` of
    `…/objects/data_lake/orders/order_date=2019-11-03/aef87g87ae0876`)."""
    before, rest = str(template).split("{", 1)
    after = rest.split("}", 1)[1]
    text = str(name)
    start = text.find(before)
    if start < 0:
        return celpy.celtypes.StringType("")
    start += len(before)
    end = text.find(after, start) if after else len(text)
    return celpy.celtypes.StringType(text[start:end] if end >= 0 else "")


def declared_secrets(declared: Iterable[Any], project: str) -> dict[str, str]:
    """Secret resource name → the data of its declared version (SecretVersion inputs)."""
    return {_secret_name(d.inputs["secret"], project): d.inputs.get("secretData", "")
            for d in declared if d.type == "gcp:secretmanager/secretVersion:SecretVersion"}


def secret_access(secret: str) -> Need:
    """What reading a secret's latest version needs (`…/versions/latest:access`)."""
    return Need("secretmanager.versions.access", f"{secret}/versions/latest", SECRET_VERSION_TYPE)


def _secret_name(secret_id: str, project: str) -> str:
    """`projects/P/secrets/S` from a SecretIamMember's `secretId` (an id or the full name)."""
    return secret_id if secret_id.startswith("projects/") else f"projects/{project}/secrets/{secret_id}"


def _email(d: Any, project: str) -> str:
    return f"{d.inputs['accountId']}@{d.inputs.get('project') or project}.iam.gserviceaccount.com"


def sa(email: str) -> str:
    return f"serviceAccount:{email}"
