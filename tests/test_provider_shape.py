"""Cloud code behind the provider (issue #37): ops/, cli/, preview, control and functions/
import no cloud's package and hold no cloud's name or ssh way as a literal; the toy cloud
answers every new provider method with the base's defaults."""

from __future__ import annotations

import ast
from pathlib import Path

from spotbench.clouds import get_provider
from spotbench.facts import CLOUDS

ROOT = Path(__file__).resolve().parents[1]
CALLERS = ("spotbench/ops", "spotbench/cli", "spotbench/preview.py", "spotbench/control",
           "functions")
# pip extras named like the clouds (pyproject.toml `[gcp]`, `[aws]`), not a cloud dispatch
EXTRAS_NAMES = Path("spotbench/cli/extras.py")
PACKAGES = tuple(f"spotbench.clouds.{name}" for name in CLOUDS)


def _modules():
    for top in CALLERS:
        path = ROOT / top
        yield from ([path] if path.suffix == ".py" else sorted(path.rglob("*.py")))


def _offences(tree: ast.AST, words: set[str]) -> list[str]:
    out = []
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        out += [f"imports {n}" for n in names if n.startswith(PACKAGES)]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words:
            out.append(f"literal {node.value!r} (line {node.lineno})")
    return out


def test_deploy_callers_name_no_cloud_and_import_no_cloud_package():
    words = set(CLOUDS) | {v for n in CLOUDS for v in get_provider(n).ssh_vias}
    found = [f"{p.relative_to(ROOT)}: {o}" for p in _modules()
             for o in _offences(ast.parse(p.read_text()),
                                set() if p.relative_to(ROOT) == EXTRAS_NAMES else words)]
    assert not found, "cloud code outside the providers:\n" + "\n".join(found)


def test_deploy_the_shape_test_catches_an_import_and_a_name():
    words = {"gcp", "iap"}
    tree = ast.parse('from spotbench.clouds.gcp.ssh import IapTunnel\nif via == "iap": pass\n')
    assert len(_offences(tree, words)) == 2


def test_deploy_provider_has_no_getattr_and_answers_the_new_methods():
    from spotbench.clouds.provider import Provider

    assert "__getattr__" not in vars(Provider)
    aws, gcp = get_provider("aws"), get_provider("gcp")
    assert aws.ssh_vias == ("ssm",) and gcp.ssh_vias == ("iap",)
    assert aws.pulumi_package == "aws" and gcp.pulumi_package == "gcp"
    assert get_provider("local").ssh_vias == () and get_provider("local").pulumi_package is None
