"""Static checks of every Dockerfile under images/ (there is no Docker daemon here).

The build context is the repository root (images/README.md): every COPY/ADD source must
exist there, the ENTRYPOINT must run a module (`python -m pkg.mod`) that exists as
`pkg/mod/__main__.py` or `pkg/mod.py`, base images are pinned (a tag, never `latest`),
the final stage runs as a non-root user, and no secret-looking value is baked into ENV/ARG.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = sorted((ROOT / "images").glob("*/Dockerfile"))
SECRET_NAME = re.compile(r"(SECRET|TOKEN|PASSWORD|PASSWD|PRIVATE_KEY|ACCESS_KEY|CREDENTIAL)", re.I)


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with comments dropped and continuation lines joined."""
    out: list[tuple[str, str]] = []
    buffer = ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not buffer and (not stripped or stripped.startswith("#")):
            continue
        if buffer and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            buffer += stripped[:-1].rstrip() + " "
            continue
        full = (buffer + stripped).strip()
        buffer = ""
        if full:
            word, _, rest = full.partition(" ")
            out.append((word.upper(), rest.strip()))
    assert not buffer, f"{path}: ends inside a continued line"
    return out


def _args(rest: str) -> list[str]:
    return json.loads(rest) if rest.startswith("[") else shlex.split(rest)


def _substitute(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), text)


def _ids(paths: list[Path]) -> list[str]:
    return [p.parent.name for p in paths]


def test_there_are_images():
    names = {p.parent.name for p in DOCKERFILES}
    assert {"tf-cpu", "tf-gpu"} <= names, names


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=_ids(DOCKERFILES))
def test_copy_sources_exist(dockerfile: Path):
    copies = 0
    for word, rest in instructions(dockerfile):
        if word not in ("COPY", "ADD"):
            continue
        parts = _args(rest)
        flags = [p for p in parts if p.startswith("--")]
        if any(f.startswith("--from=") for f in flags):
            continue  # from another build stage, not the context
        paths = [p for p in parts if not p.startswith("--")]
        assert len(paths) >= 2, f"{dockerfile}: {word} {rest}: needs a source and a destination"
        for source in paths[:-1]:
            assert not source.startswith(("http://", "https://")), f"{dockerfile}: ADD from a URL: pin and checksum it in a RUN"
            matches = list(ROOT.glob(source.lstrip("/")))
            assert matches, f"{dockerfile}: {word} source {source!r} does not exist in the build context {ROOT}"
            copies += 1
    assert copies, f"{dockerfile}: copies nothing from the repository"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=_ids(DOCKERFILES))
def test_entrypoint_runs_an_existing_module(dockerfile: Path):
    entrypoints = [rest for word, rest in instructions(dockerfile) if word == "ENTRYPOINT"]
    assert entrypoints, f"{dockerfile}: no ENTRYPOINT"
    command = entrypoints[-1]
    assert command.startswith("["), f"{dockerfile}: use the exec (JSON) form so SIGTERM reaches python"
    argv = json.loads(command)
    assert Path(argv[0]).name in ("python", "python3") and "-m" in argv, argv
    module = argv[argv.index("-m") + 1]
    base = ROOT.joinpath(*module.split("."))
    assert (base / "__main__.py").is_file() or base.with_suffix(".py").is_file(), (
        f"{dockerfile}: ENTRYPOINT module {module} has no {base.relative_to(ROOT)}/__main__.py or .py"
    )


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=_ids(DOCKERFILES))
def test_pinned_bases_non_root_no_secrets(dockerfile: Path):
    steps = instructions(dockerfile)
    global_args: dict[str, str] = {}
    seen_from = False
    users: list[str] = []
    stages: set[str] = set()
    for word, rest in steps:
        if word == "ARG":
            name, _, default = rest.partition("=")
            if not seen_from:
                global_args[name.strip()] = default.strip().strip('"')
        if word in ("ARG", "ENV"):
            for pair in re.findall(r"(\w+)[= ]\s*(\"[^\"]*\"|\S+)?", rest):
                name, value = pair
                assert not (SECRET_NAME.search(name) and value.strip('"')), (
                    f"{dockerfile}: {word} {name} has a value baked into the image; pass secrets at run time"
                )
        if word == "FROM":
            seen_from = True
            parts = [p for p in rest.split() if not p.startswith("--")]
            image = _substitute(parts[0], global_args)
            is_stage = image in stages
            if len(parts) >= 3 and parts[1].upper() == "AS":
                stages.add(parts[2])
            users = []  # USER applies per stage
            if is_stage:
                continue  # built on an earlier stage of this file
            assert ":" in image.rsplit("/", 1)[-1], f"{dockerfile}: base {image} has no tag: pin a version"
            assert not image.endswith(":latest"), f"{dockerfile}: base {image} is not pinned"
            assert "$" not in image, f"{dockerfile}: base {image} uses an ARG without a default"
        if word == "USER":
            users.append(rest.split(":")[0])
    assert users and users[-1] not in ("root", "0"), f"{dockerfile}: the final stage must switch to a non-root USER"


def test_parser_sees_continuations_and_json(tmp_path):
    f = tmp_path / "Dockerfile"
    f.write_text('FROM python:3.11-slim AS x\n# note\nRUN a \\\n  # inner comment\n  && b\nCOPY --chown=1:1 a b ./\nENTRYPOINT ["python", "-m", "x.y"]\n')
    assert instructions(f) == [
        ("FROM", "python:3.11-slim AS x"),
        ("RUN", "a && b"),
        ("COPY", "--chown=1:1 a b ./"),
        ("ENTRYPOINT", '["python", "-m", "x.y"]'),
    ]


_GOOD_TAIL = 'USER bench\nENTRYPOINT ["python", "-m", "workloads.tf_mnist"]\n'


@pytest.mark.parametrize(
    "text, check, message",
    [
        ("FROM python:3.11-slim\nCOPY nope ./\n" + _GOOD_TAIL, test_copy_sources_exist, "'nope' does not exist"),
        ("FROM python:3.11-slim\nCOPY spotbench ./\nUSER bench\nENTRYPOINT [\"python\", \"-m\", \"workloads.nothere\"]\n",
         test_entrypoint_runs_an_existing_module, "workloads.nothere has no"),
        ("FROM python:3.11-slim\nCOPY spotbench ./\nENTRYPOINT [\"python\", \"-m\", \"workloads.tf_mnist\"]\n",
         test_pinned_bases_non_root_no_secrets, "non-root USER"),
        ("FROM python:latest\nCOPY spotbench ./\n" + _GOOD_TAIL, test_pinned_bases_non_root_no_secrets, "not pinned"),
        ("FROM python:3.11-slim\nENV API_TOKEN=abc\nCOPY spotbench ./\n" + _GOOD_TAIL,
         test_pinned_bases_non_root_no_secrets, "API_TOKEN has a value"),
    ],
    ids=["missing-copy-source", "missing-module", "root", "latest", "secret"],
)
def test_checks_reject_broken_dockerfiles(tmp_path, text, check, message):
    f = tmp_path / "Dockerfile"
    f.write_text(text)
    with pytest.raises(AssertionError, match=message):
        check(f)


# ---- the image's user and the packages its workload imports ---------------------------
def test_user_is_pinned_to_the_uid_the_boot_path_hands_files_to():
    """Every image runs as `IMAGE_UID` (spotbench/images.py): the unit chowns the MPI keys
    to that uid before `docker run`, so a Dockerfile must create its USER with it."""
    from spotbench.images import IMAGE_UID
    from tests.fidelity.shims import image_config

    for dockerfile in DOCKERFILES:
        cfg = image_config(dockerfile)
        assert cfg["user"] and cfg["uid"] == IMAGE_UID, (
            f"{dockerfile}: USER {cfg['user']!r} must be created with `useradd --uid {IMAGE_UID}`")


LOCAL_PACKAGES = {"spotbench", "workloads", "functions", "infra"}
# opened by URL scheme through fsspec (never imported by name): gs:// and s3:// results
BY_URL = {"gcsfs", "s3fs"}


def _module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def imported_packages(module: str) -> set[str]:
    """Top-level third-party modules reachable from `module` through this repo's imports
    (module-level and lazy ones: both run on some path)."""
    import ast
    import sys

    seen, third, stack = set(), set(), [module]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _module_file(name)
        if path is None:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for n in names:
                top = n.split(".")[0]
                if top in LOCAL_PACKAGES:
                    parts = n.split(".")
                    stack += [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
                elif top not in sys.stdlib_module_names and top != "__future__":
                    third.add(top)
    return third


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_distributions(dockerfile: Path) -> set[str]:
    """What the image's `pip install` lines (and a tensorflow base) install, with their
    dependencies as this checkout's environment resolves them."""
    import tomllib
    from importlib.metadata import PackageNotFoundError, requires

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted: list[str] = []
    for word, rest in instructions(dockerfile):
        if word == "FROM" and rest.startswith("tensorflow/tensorflow"):
            wanted.append("tensorflow")
        if word != "RUN":
            continue
        for m in re.finditer(r"pip install ([^&;|]*)", rest):
            for token in shlex.split(m.group(1)):
                if token.startswith("-"):
                    continue
                extras = re.match(r"^\.(?:\[([\w,-]+)\])?$", token)
                if extras:
                    wanted += project["dependencies"]
                    for extra in (extras.group(1) or "").split(","):
                        wanted += project["optional-dependencies"].get(extra, []) if extra else []
                else:
                    wanted.append(token)
    done: set[str] = set()
    while wanted:
        req = wanted.pop()
        if ";" in req and "extra ==" in req:
            continue  # an optional extra of a dependency: not installed
        name = _norm(re.split(r"[<>=!~;\[ ]", req.strip(), maxsplit=1)[0])
        if not name or name in done:
            continue
        done.add(name)
        try:
            wanted += requires(name) or []
        except PackageNotFoundError:
            pass
    return done


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=_ids(DOCKERFILES))
def test_every_package_the_workload_imports_is_installed(dockerfile: Path):
    from importlib.metadata import packages_distributions

    entry = json.loads(next(rest for word, rest in instructions(dockerfile)
                            if word == "ENTRYPOINT"))
    module = entry[entry.index("-m") + 1]
    installed = installed_distributions(dockerfile)
    dists = packages_distributions()
    missing = []
    for top in sorted(imported_packages(f"{module}.__main__") | imported_packages(module)):
        names = {_norm(d) for d in dists.get(top, [top])}
        if top == "tensorflow":
            names |= {"tensorflow-cpu", "tensorflow"}
        if not names & installed:
            missing.append(f"{top} ({', '.join(sorted(names))})")
    missing += [p for p in sorted(BY_URL) if p not in installed]
    assert not missing, f"{dockerfile}: {module} imports what the image does not install: {missing}"


def test_import_check_rejects_an_image_missing_a_package(tmp_path):
    f = tmp_path / "Dockerfile"
    f.write_text('FROM python:3.11-slim\nRUN useradd --uid 1000 bench\nCOPY spotbench ./\n'
                 'RUN pip install "." \nUSER bench\nENTRYPOINT ["python", "-m", "workloads.tf_mnist"]\n')
    with pytest.raises(AssertionError, match=r"tensorflow|sklearn|gcsfs"):
        test_every_package_the_workload_imports_is_installed(f)
