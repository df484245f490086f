"""GCP's project is given once (#39): a Pulumi stack file's `gcp:project` fills the spec's
`gcp.project` for every spotbench command that reads the stack (status, preflight, …)."""

from __future__ import annotations

from pathlib import Path

import yaml

from spotbench.spec import load_spec

ROOT = Path(__file__).parents[1]


def test_first_hour_stack_project_is_read_from_its_config(tmp_path):
    spec = load_spec(ROOT / "Pulumi.gcp-osu.yaml")
    assert spec.gcp.project == "my-gcp-project"  # the stack's `gcp:project`
    spec_file = tmp_path / "s.yaml"
    data = yaml.safe_load((ROOT / "examples" / "gcp-osu.yaml").read_text())
    data.setdefault("gcp", {})["project"] = "from-the-spec"
    spec_file.write_text(yaml.safe_dump(data))
    stack = tmp_path / "Pulumi.x.yaml"
    stack.write_text(yaml.safe_dump({"config": {"spotbench:spec": str(spec_file),
                                                "gcp:project": "from-the-stack"}}))
    assert load_spec(stack).gcp.project == "from-the-spec"  # the spec's own wins
