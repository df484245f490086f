"""Per-role provisioning in `spotbench estimate` (issue #36): a standard role (a reserved
master: tf-mnist's chief and parameter server) is priced at on-demand prices, the spot roles
at spot prices, on both clouds; the output names each group's provisioning per role."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.costs import billed_seconds, load_catalog
from spotbench.estimate import estimate
from spotbench.facts import facts_of
from spotbench.spec import load_spec

CAT = load_catalog()
TF = {"name": "tf-mnist", "strategy": "parameter_server", "workers": 2, "ps": 1}
RESERVED = {"chief": "standard", "ps": "standard"}
CLOUDS = {
    "gcp": ({"zone": "us-central1-a"}, "us-central1", "us-central1-a", "n1-standard-2"),
    "aws": ({"region": "us-east-1", "zone": "us-east-1a"}, "us-east-1", "us-east-1a", "c5.xlarge"),
}


def _spec(cloud: str, **over) -> dict:
    where, _, _, mtype = CLOUDS[cloud]
    return {"name": "r", "cloud": cloud, **where, "workload": TF, "matrix": {"machine_type": [mtype]},
            "deadline": "29m", "role_provisioning": RESERVED, "schedule": {"cron": "0 3 * * *"}, **over}


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_multinode_per_role_provisioning_estimate_prices_each_role_at_its_own_market(cloud):
    _, region, zone, mtype = CLOUDS[cloud]
    spot = CAT.find(cloud, region, "machine", mtype, True, zone).usd
    on_demand = CAT.find(cloud, region, "machine", mtype, False, zone).usd
    assert on_demand > spot  # else the test could not tell them apart
    billed = billed_seconds(29 * 60 + facts_of(cloud).boot_s) / 3600
    est = estimate(load_spec(_spec(cloud)), CAT, records=[])
    [group] = est.groups
    # chief + ps on demand, two workers spot
    assert group.compute_usd == pytest.approx((2 * on_demand + 2 * spot) * billed)
    assert group.provisioning == "spot (chief: standard, ps: standard)"
    assert any("chief: standard (on-demand prices)" in n and "ps: standard" in n
               for n in est.assumptions), est.assumptions
    # the plain string form is unchanged: every member at the spec's one provisioning
    for provisioning, price in (("spot", spot), ("standard", on_demand)):
        plain = estimate(load_spec(_spec(cloud, role_provisioning={}, provisioning=provisioning)),
                         CAT, records=[])
        assert plain.groups[0].compute_usd == pytest.approx(4 * price * billed)
        assert plain.groups[0].provisioning == provisioning
    # and the inverse: a standard sweep whose workers alone run spot costs the same
    inverse = estimate(load_spec(_spec(cloud, provisioning="standard",
                                       role_provisioning={"worker": "spot"})), CAT, records=[])
    assert inverse.groups[0].compute_usd == pytest.approx(group.compute_usd)
    assert inverse.groups[0].provisioning == "standard (worker: spot)"


def test_multinode_per_role_provisioning_estimate_cli_names_each_roles_provisioning(tmp_path):
    import yaml

    path = tmp_path / "reserved.yaml"
    path.write_text(yaml.safe_dump(_spec("gcp")))
    runner = CliRunner()
    out = runner.invoke(app, ["estimate", str(path), "--json"])
    assert out.exit_code == 0, out.output
    [group] = json.loads(out.output)["groups"]
    assert group["provisioning"] == "spot (chief: standard, ps: standard)"
    text = runner.invoke(app, ["estimate", str(path)], env={"COLUMNS": "200"})
    assert text.exit_code == 0, text.output
    assert "provisioning" in text.output and "chief: standard" in text.output
