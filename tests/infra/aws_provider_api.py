"""What the Pulumi AWS provider sends to EC2 for the member resources spotbench declares.

pulumi-aws is terraform-provider-aws underneath; these functions map a resource's declared
inputs (camelCase, as the Pulumi mocks record them) to the one EC2 call its create makes,
field by field as the provider's source builds it (internal/service/ec2, `buildInstanceOpts`,
`resourceInstanceCreate`, `resourceSpotInstanceRequestCreate`). What the provider drops is
dropped here too, so a test that sends the call to moto_server and reads the instance back
sees what AWS would hold, not what the program declared:

- `aws:ec2/instance:Instance` → `RunInstances`: metadata options, the instance's tags and
  `volumeTags` (as `TagSpecifications` for `instance` and `volume`), the root volume, the
  shutdown behaviour and `instanceMarketOptions` all reach the API. The placement group is
  sent only when the spot interruption behaviour is unset or `terminate`. A subnet with
  `associatePublicIpAddress`/`privateIp` is sent as network interface 0.
- `aws:ec2/spotInstanceRequest:SpotInstanceRequest` → `RequestSpotInstances`: the launch
  specification carries only block devices, EBS optimisation, monitoring, the instance
  profile, AMI, type, key, security groups, subnet / network interfaces and user data. EC2's
  `RequestSpotLaunchSpecification` has no field for metadata options or the instance-initiated
  shutdown behaviour, and the request's `TagSpecifications` tag the request only: the
  schema accepts `metadataOptions`, `volumeTags` and `instanceInitiatedShutdownBehavior`
  (inherited from `aws_instance`) and nothing sends them (hashicorp/terraform-provider-aws
  #25896, #35883). Placement likewise only with interruption behaviour `terminate`.

Anything else a declaration sets is an error here, so a new argument is modelled before a
test relies on it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

INSTANCE = "aws:ec2/instance:Instance"
SPOT_REQUEST = "aws:ec2/spotInstanceRequest:SpotInstanceRequest"
ROOT_DEVICE = "/dev/xvda"  # the provider reads the AMI's root device name; ECS AMIs use this

# inputs the model knows (everything else a member declares fails loudly)
_COMMON = {"ami", "instanceType", "subnetId", "privateIp", "vpcSecurityGroupIds",
           "associatePublicIpAddress", "iamInstanceProfile", "userData",
           "userDataReplaceOnChange", "metadataOptions", "rootBlockDevice", "placementGroup",
           "volumeTags", "instanceInitiatedShutdownBehavior", "tags"}
_INSTANCE_ONLY = {"instanceMarketOptions"}
_SPOT_ONLY = {"spotType", "instanceInterruptionBehavior", "waitForFulfillment", "validUntil",
              "spotPrice"}


def api_call(type_: str, inputs: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(EC2 operation, boto3 parameters) the provider's create sends for this resource."""
    if type_ == INSTANCE:
        return "RunInstances", run_instances(inputs)
    if type_ == SPOT_REQUEST:
        return "RequestSpotInstances", request_spot_instances(inputs)
    raise NotImplementedError(f"no model of what the provider sends for {type_}")


def _known(inputs: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(k for k, v in inputs.items() if v is not None and k not in allowed)
    if unknown:
        raise NotImplementedError(f"the provider model does not cover {unknown}: read the "
                                  "provider's source and add them to tests/infra/aws_provider_api.py")


def _tags(tags: Mapping[str, str] | None) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in (tags or {}).items()]


def _network(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Subnet, private IP and security groups: network interface 0 when a public-IP choice or
    a private IP goes with the subnet (`buildNetworkInterfaceOpts`), else top-level fields."""
    groups = list(inputs.get("vpcSecurityGroupIds") or [])
    subnet = inputs.get("subnetId")
    if subnet and (inputs.get("associatePublicIpAddress") is not None or inputs.get("privateIp")):
        nic: dict[str, Any] = {"DeviceIndex": 0, "SubnetId": subnet, "Groups": groups,
                               "DeleteOnTermination": True}
        if inputs.get("associatePublicIpAddress") is not None:
            nic["AssociatePublicIpAddress"] = bool(inputs["associatePublicIpAddress"])
        if inputs.get("privateIp"):
            nic["PrivateIpAddress"] = inputs["privateIp"]
        return {"NetworkInterfaces": [nic]}
    out: dict[str, Any] = {"SecurityGroupIds": groups}
    if subnet:
        out["SubnetId"] = subnet
    return out


def _root(inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
    root = inputs.get("rootBlockDevice") or {}
    if not root:
        return []
    ebs = {"DeleteOnTermination": root.get("deleteOnTermination", True)}
    for src, dst in (("volumeSize", "VolumeSize"), ("volumeType", "VolumeType"),
                     ("encrypted", "Encrypted"), ("iops", "Iops"), ("throughput", "Throughput")):
        if root.get(src) is not None:  # numbers come back from Pulumi as floats
            ebs[dst] = int(root[src]) if isinstance(root[src], float) else root[src]
    return [{"DeviceName": ROOT_DEVICE, "Ebs": ebs}]


def _metadata(options: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`expandInstanceMetadataOptions`: tokens and hop limit only with the endpoint enabled."""
    if not options:
        return None
    endpoint = options.get("httpEndpoint", "enabled")
    out: dict[str, Any] = {"HttpEndpoint": endpoint}
    if endpoint == "enabled":
        if options.get("httpTokens"):
            out["HttpTokens"] = options["httpTokens"]
        if options.get("httpPutResponseHopLimit"):
            out["HttpPutResponseHopLimit"] = int(options["httpPutResponseHopLimit"])
    return out


def _interruption(inputs: Mapping[str, Any]) -> str:
    spot = ((inputs.get("instanceMarketOptions") or {}).get("spotOptions") or {})
    return inputs.get("instanceInterruptionBehavior") or spot.get("instanceInterruptionBehavior") or ""


def run_instances(inputs: Mapping[str, Any]) -> dict[str, Any]:
    _known(inputs, _COMMON | _INSTANCE_ONLY)
    call: dict[str, Any] = {"ImageId": inputs["ami"], "InstanceType": inputs["instanceType"],
                            "MinCount": 1, "MaxCount": 1, **_network(inputs)}
    if inputs.get("iamInstanceProfile"):
        call["IamInstanceProfile"] = {"Name": inputs["iamInstanceProfile"]}
    if inputs.get("userData"):
        call["UserData"] = inputs["userData"]  # boto3 base64-encodes it, as the provider does
    if (metadata := _metadata(inputs.get("metadataOptions"))) is not None:
        call["MetadataOptions"] = metadata
    if mappings := _root(inputs):
        call["BlockDeviceMappings"] = mappings
    if inputs.get("instanceInitiatedShutdownBehavior"):
        call["InstanceInitiatedShutdownBehavior"] = inputs["instanceInitiatedShutdownBehavior"]
    if inputs.get("placementGroup") and _interruption(inputs) in ("", "terminate"):
        call["Placement"] = {"GroupName": inputs["placementGroup"]}
    specs = [{"ResourceType": "instance", "Tags": _tags(inputs.get("tags"))}] if inputs.get("tags") else []
    if inputs.get("volumeTags"):
        specs.append({"ResourceType": "volume", "Tags": _tags(inputs["volumeTags"])})
    if specs:
        call["TagSpecifications"] = specs
    market = inputs.get("instanceMarketOptions")
    if market:
        spot = market.get("spotOptions") or {}
        options = {k: spot[s] for s, k in (("spotInstanceType", "SpotInstanceType"),
                                            ("instanceInterruptionBehavior", "InstanceInterruptionBehavior"),
                                            ("maxPrice", "MaxPrice"), ("validUntil", "ValidUntil"))
                   if spot.get(s)}
        call["InstanceMarketOptions"] = {"MarketType": market.get("marketType") or "spot",
                                         "SpotOptions": options}
    return call


def request_spot_instances(inputs: Mapping[str, Any]) -> dict[str, Any]:
    _known(inputs, _COMMON | _SPOT_ONLY)
    spec: dict[str, Any] = {"ImageId": inputs["ami"], "InstanceType": inputs["instanceType"],
                            **_network(inputs)}
    if inputs.get("iamInstanceProfile"):
        spec["IamInstanceProfile"] = {"Name": inputs["iamInstanceProfile"]}
    if inputs.get("userData"):  # the launch specification takes it base64-encoded already
        spec["UserData"] = base64.b64encode(inputs["userData"].encode()).decode()
    if mappings := _root(inputs):
        spec["BlockDeviceMappings"] = mappings
    if inputs.get("placementGroup") and _interruption(inputs) in ("", "terminate"):
        spec["Placement"] = {"GroupName": inputs["placementGroup"]}
    # metadataOptions, volumeTags, instanceInitiatedShutdownBehavior: accepted, never sent
    call: dict[str, Any] = {"InstanceCount": 1, "Type": inputs.get("spotType") or "persistent",
                            "InstanceInterruptionBehavior": _interruption(inputs) or "terminate",
                            "LaunchSpecification": spec}
    if inputs.get("spotPrice"):
        call["SpotPrice"] = inputs["spotPrice"]
    if inputs.get("validUntil"):
        call["ValidUntil"] = inputs["validUntil"]
    if inputs.get("tags"):
        call["TagSpecifications"] = [{"ResourceType": "spot-instances-request",
                                      "Tags": _tags(inputs["tags"])}]
    return call


def launch(ec2: Any, type_: str, inputs: Mapping[str, Any]) -> str:
    """Send the provider's call to EC2 (moto) and return the instance id it made."""
    operation, params = api_call(type_, inputs)
    if operation == "RunInstances":
        return ec2.run_instances(**params)["Instances"][0]["InstanceId"]
    request = ec2.request_spot_instances(**params)["SpotInstanceRequests"][0]["SpotInstanceRequestId"]
    found = ec2.describe_spot_instance_requests(SpotInstanceRequestIds=[request])
    return found["SpotInstanceRequests"][0]["InstanceId"]
