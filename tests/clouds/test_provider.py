"""One provider per cloud, one lookup by name: `get_provider`.

The grep test keeps it that way: a comparison of a cloud (or `cloud_name`) with a literal
cloud name anywhere in the shipped code is cloud dispatch written outside the providers.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from spotbench.clouds import PROVIDERS, UnknownCloud, get_provider
from spotbench.clouds.provider import Provider
from spotbench.spec import SpecError, load_spec

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("spotbench", "functions", "workloads", "infra", "scripts", "bench")
_NAMES = "|".join(PROVIDERS)
DISPATCH = [
    re.compile(rf"""cloud\w*["']?\]?\)?\s*(==|!=)\s*["'](?:{_NAMES})["']"""),
    re.compile(rf"""["'](?:{_NAMES})["']\s*(==|!=)\s*[\w.]*cloud"""),
    re.compile(r"""cloud\w*\s+(not\s+)?in\s+[(\[{]\s*["']"""),
    re.compile(rf"""\{{\s*["'](?:{_NAMES})["']\s*:[^}}]*["'](?:{_NAMES})["']\s*:"""),  # {"gcp": …, "aws": …}
]
ALLOWED = {Path("spotbench/clouds/provider.py")}  # the one lookup by name


def test_every_cloud_has_a_provider_named_after_it():
    for name in PROVIDERS:
        provider = get_provider(name)
        assert isinstance(provider, Provider)
        assert provider.name == name


def test_an_unknown_cloud_is_a_clear_error():
    with pytest.raises(UnknownCloud, match=r"unknown cloud 'azure'; choose local, gcp, aws"):
        get_provider("azure")


def test_schedule_control_of_an_unknown_cloud_no_longer_falls_back_to_aws():
    from spotbench.ops.schedule import control_for

    spec = load_spec({"name": "s", "workload": {"name": "osu"}})
    object.__setattr__(spec, "cloud", "azure")  # a spec from a newer spotbench, say
    with pytest.raises(UnknownCloud, match="azure"):
        control_for(spec)


def test_spec_location_rule_comes_from_the_provider():
    with pytest.raises(SpecError, match=r"cloud 'gcp' needs 'zone' \(e.g. us-central1-a\)"):
        load_spec({"name": "s", "cloud": "gcp", "workload": {"name": "osu"},
                   "matrix": {"machine_type": ["n2-standard-2"]}})
    with pytest.raises(SpecError, match=r"cloud 'aws' needs 'region' \(e.g. us-east-1\)"):
        load_spec({"name": "s", "cloud": "aws", "workload": {"name": "osu"},
                   "matrix": {"machine_type": ["c6i.large"]}})


def test_region_of_zone_per_cloud():
    assert get_provider("gcp").region_of_zone("europe-west4-b") == "europe-west4"
    assert get_provider("aws").region_of_zone("eu-west-1c") == "eu-west-1"
    assert get_provider("local").price_region("anything") == "*"


def test_no_cloud_dispatch_outside_the_providers():
    found = []
    for top in SHIPPED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel in ALLOWED:
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if any(p.search(line) for p in DISPATCH):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "cloud dispatch outside get_provider:\n" + "\n".join(found)


def test_the_grep_catches_dispatch():
    caught = [
        'if spec.cloud == "gcp":', "if cloud != 'local':", 'if ctx.cloud_name in ("gcp", "aws"):',
        'BOOT_S = {"local": 0.0, "gcp": 60.0}', 'if "aws" == spec.cloud:',
        'if not (sub["cloud"] == "local").all():', 'if row["cloud"] != "local":',
    ]
    for line in caught:
        assert any(p.search(line) for p in DISPATCH), line
    assert not any(p.search("if cloud and spec.cloud != cloud:") for p in DISPATCH)


def test_import_spotbench_loads_no_cloud_sdk():
    code = (
        "import sys, spotbench, spotbench.cli, spotbench.clouds, spotbench.estimate\n"
        "from spotbench.clouds import get_provider\n"
        "for name in ('local', 'gcp', 'aws'): get_provider(name)\n"
        "bad = [m for m in sys.modules if m == 'boto3' or m.startswith(('google.cloud.', 'google.api_core', 'botocore'))]\n"
        "print(bad)\n"
    )
    # (a bare `google.cloud` namespace is made by site-packages .pth files at start-up)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_aws_region_of_zone_has_one_home_and_a_region_is_its_own():
    """The catalog's rule, read by the facts, the provider and spec checks alike (the old
    catalog copy cut the last character: us-east-1 → 'us-east-')."""
    from spotbench.catalog import AWS_CATALOG
    from spotbench.facts import facts_of

    for rule in (AWS_CATALOG.region_of, facts_of("aws").region_of_zone,
                 get_provider("aws").region_of_zone):
        assert rule("us-east-1a") == "us-east-1"
        assert rule("us-east-1") == "us-east-1"
    assert AWS_CATALOG.zone_in_region("us-east-1a", "us-east-1")
    assert facts_of("aws").price_region("us-east-1") == "us-east-1"


def test_machine_family_compact_series_and_zone_in_region_have_one_home():
    """The catalog's rules, which the GCE driver and the Pulumi program read too."""
    from spotbench.catalog import GCP_COMPACT_SERIES
    from spotbench.clouds.gcp._gce_status import zone_allowed
    from spotbench.facts import facts_of

    assert facts_of("gcp").catalog.family("N2-standard-4") == "n2"
    assert facts_of("aws").catalog.family("c5.xlarge") == "c5"
    # no other copy: the policy reads the catalog's rule, and a cloud without a catalog
    # (local) takes the rule's own default
    import spotbench.policy as policy
    from spotbench.catalog import machine_family

    assert not hasattr(policy, "family")
    assert machine_family(facts_of("gcp").catalog, "N2-standard-4") == "n2"
    assert machine_family(facts_of("local").catalog, "Local") == "local"
    assert zone_allowed("us-central1-a", None, "us-central1")
    assert not zone_allowed("us-central1-a", None, "us-central")
    pytest.importorskip("pulumi_gcp")
    import infra.gcp.vms as vms

    assert vms.COMPACT_SERIES is GCP_COMPACT_SERIES


def test_one_hook_gives_a_member_its_groups_storage_on_every_cloud(tmp_path):
    """Records and checkpoints come from one object (`Provider.group_storage` →
    `GroupStorage`), asked the same way on every cloud; no second hook for records."""
    from spotbench.clouds.provider import GroupStorage, Provider
    from spotbench.facts import CLOUDS
    from spotbench.member import MemberContext

    assert not hasattr(Provider, "record_writer")
    for cloud in CLOUDS:
        ctx = MemberContext(sweep="s", group="g", trial=1, cloud=cloud, workload="osu",
                            params={}, name="s--g-0", role="member", index=0, rank=0,
                            members=[], results_url=str(tmp_path / cloud))
        storage = get_provider(cloud).group_storage(ctx)  # no done URL: its own identity
        assert storage == GroupStorage(), cloud
        store = storage.store(ctx.results_url)
        assert store.url == str(tmp_path / cloud)
