"""The spec: every class of bad input gets its own clear message; examples round-trip."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from spotbench.spec import SpecError, load_spec, parse_duration

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

GOOD = {"name": "s1", "workload": {"name": "osu"}, "matrix": {"machine_type": ["local"]}}


def problems(data: dict) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(data, origin="bad.yaml")
    return str(info.value)


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"cloud": "azure"}, "cloud = 'azure': not allowed; choose one of 'local', 'gcp' or 'aws'"),
        ({"trials": 0}, "trials = 0: Input should be greater than or equal to 1"),
        ({"schedule": {"cron": "61 * * *"}}, "schedule.cron = '61 * * *': has 4 field(s), a cron has five"),
        ({"schedule": {"cron": "0 3 * * *", "timezone": "Mars/Base"}}, "unknown IANA time zone"),
        ({"matrix": {"machine_type": []}}, "matrix.machine_type is empty"),
        ({"matrix": {"colour": ["red"]}}, "matrix.colour is not a matrix key"),
        ({"trails": 3}, "trails: unknown key; did you mean 'trials'?"),
        ({"workload": {"name": "osu", "iteratons": 5}}, "workload.iteratons: unknown key; did you mean 'iterations'?"),
        ({"workload": {"name": "nbody"}}, "unknown workload; choose one of 'osu', 'tf-mnist'"),
        ({"workload": {"name": "osu", "max_size": 1000}}, "must be a power of two"),
        ({"deadline": "soon"}, "duration like '90s'"),
        ({"name": "bench--gpu"}, "name = 'bench--gpu': '--' is reserved"),
        ({"cloud": "gcp"}, "cloud 'gcp' needs 'zone'"),
        ({"cloud": "gcp", "zone": "us-central1-a", "matrix": {"machine_type": ["e2-standard-2"]},
          "workload": {"name": "container", "command": "true"}},
         "image: the 'container' workload runs your own image on gcp; set `image:`"),
        ({"budget": -1}, "budget = -1"),
        ({"spot": "yes"}, "spot: expected true or false"),
    ],
)
def test_each_bad_input_has_its_message(change: dict, expected: str) -> None:
    message = problems({**GOOD, **change})
    assert message.startswith("bad.yaml: ")
    assert expected in message


def test_matrix_values_are_checked_against_the_workload() -> None:
    message = problems({**GOOD, "workload": {"name": "tf-mnist"}, "matrix": {"workers": [1, -2]}})
    assert "matrix.workers value -2" in message


def test_several_problems_are_all_reported() -> None:
    message = problems({**GOOD, "cloud": "azure", "trials": 0, "trails": 1})
    assert len(message.splitlines()) == 3


def test_yaml_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "sweep.yaml"
    bad.write_text("name: x\nworkload: {name: osu}\ntrials: -1\n")
    with pytest.raises(SpecError, match=r"sweep.yaml: trials = -1"):
        load_spec(bad)
    with pytest.raises(SpecError, match="file not found"):
        load_spec(tmp_path / "missing.yaml")
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(tmp_path / "broken.yaml")


def test_durations() -> None:
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration(45) == timedelta(seconds=45)
    assert parse_duration("PT2M") == timedelta(minutes=2)
    with pytest.raises(ValueError):
        parse_duration("ten minutes")


def test_spot_shorthand() -> None:
    assert load_spec({**GOOD, "spot": False}).provisioning == "standard"
    assert load_spec({**GOOD, "spot": True}).spot
    assert "either 'spot' or 'provisioning'" in problems({**GOOD, "spot": True, "provisioning": "spot"})


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_round_trips(path: Path) -> None:
    spec = load_spec(path)
    again = load_spec(spec.model_dump(mode="json"))
    assert again == spec
    assert load_spec(yaml.safe_load(yaml.safe_dump(spec.model_dump(mode="json")))) == spec
    assert [g.id for g in spec.plan()] == [g.id for g in again.plan()]


def test_cli_exits_2_on_a_bad_spec(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncloud: azure\nworkload: {name: osu}\n")
    proc = subprocess.run([sys.executable, "-m", "spotbench.cli", "run", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "cloud = 'azure'" in proc.stderr


def test_role_machine_types_must_name_roles_of_the_workload() -> None:
    spec = load_spec({**GOOD, "workload": {"name": "tf-mnist", "workers": 2},
                      "role_machine_types": {"chief": "big"}})
    chief, *rest = spec.plan()[0].members
    assert chief.machine_type == "big" and {m.machine_type for m in rest} == {"local"}
    assert "osu has no role 'chief'" in problems({**GOOD, "role_machine_types": {"chief": "x"}})


def test_matrix_placement_values_are_checked() -> None:
    assert "matrix.placement value 'nearby'" in problems({**GOOD, "matrix": {"placement": ["nearby"]}})


def test_a_sweep_name_is_never_the_start_of_another_sweeps_vm_names() -> None:
    """VM names are `<sweep>--…`: the prefix IAM conditions match (infra/gcp/identity.py)
    selects one sweep's VMs, whichever other names share its first characters."""
    names = {}
    for sweep in ("bench", "bench-gpu", "bench-g"):
        spec = load_spec({**GOOD, "name": sweep})
        names[sweep] = [m.name for g in spec.plan() for m in g.members]
        assert all(n.startswith(f"{sweep}--") for n in names[sweep])
    for sweep, own in names.items():
        others = [n for s, ns in names.items() if s != sweep for n in ns]
        assert not [n for n in others if n.startswith(f"{sweep}--")]
    assert "use single hyphens, e.g. 'bench-gpu'" in problems({**GOOD, "name": "bench--gpu"})


# ---- candidate zones and the instance lifecycle (issue #26) ----------------------------

def _gcp_gpu(**changes):
    import yaml
    data = yaml.safe_load(Path("examples/gcp-gpu.yaml").read_text())
    data.pop("zone", None)
    data.update(changes)
    return data


def test_zones_any_means_every_catalog_zone_of_the_region():
    spec = load_spec(_gcp_gpu(region="us-central1", zones="any", lifecycle="created"))
    assert spec.candidate_zones == ["us-central1-a", "us-central1-b", "us-central1-c",
                                    "us-central1-f"]


def test_several_zones_need_the_created_lifecycle():
    with pytest.raises(SpecError, match="need `lifecycle: created`"):
        load_spec(_gcp_gpu(zones=["us-central1-a", "us-central1-b"]))


def test_zone_and_zones_together_are_refused():
    with pytest.raises(SpecError, match="not both"):
        load_spec(_gcp_gpu(zone="us-central1-a", zones=["us-central1-b"], lifecycle="created"))


def test_zones_any_without_a_region_is_refused():
    with pytest.raises(SpecError, match="set `region` too"):
        load_spec(_gcp_gpu(zones="any", lifecycle="created"))


def test_one_fixed_zone_is_the_only_candidate():
    assert load_spec(_gcp_gpu(zone="us-central1-a")).candidate_zones == ["us-central1-a"]


def test_candidate_zones_may_span_regions_in_the_created_lifecycle():
    spec = load_spec(_gcp_gpu(zones=["us-central1-a", "europe-west4-b"], lifecycle="created"))
    assert spec.candidate_zones == ["us-central1-a", "europe-west4-b"]
    assert spec.candidate_regions == ["us-central1", "europe-west4"]


def test_a_region_entry_means_every_zone_of_it_in_catalog_order():
    spec = load_spec(_gcp_gpu(zones=["us-east1-c", "us-central1"], lifecycle="created"))
    from spotbench.catalog import GCP_CATALOG
    central = [GCP_CATALOG.zone_name("us-central1", x) for x in GCP_CATALOG.zones["us-central1"]]
    assert spec.candidate_zones == ["us-east1-c", *central]
    assert spec.candidate_regions == ["us-east1", "us-central1"]
    with pytest.raises(SpecError, match="lifecycle: created"):  # a region is several zones
        load_spec(_gcp_gpu(zones=["us-central1"]))


def test_a_fixed_zone_stays_in_its_region():
    with pytest.raises(SpecError, match=r"zones\[0\].*europe-west4-b.*not in region"):
        load_spec(_gcp_gpu(zones=["europe-west4-b"], region="us-central1"))


def test_candidate_zones_are_known_zones():
    with pytest.raises(SpecError, match=r"zones\[0\].*us-central1-q"):
        load_spec(_gcp_gpu(zones=["us-central1-q"], lifecycle="created"))
    spec = load_spec(_gcp_gpu(zones=["us-central1-b", "us-central1-a"], lifecycle="created"))
    assert spec.first_zone == "us-central1-b"
