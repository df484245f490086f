"""The `search:` section: its space, methods and errors; designs from the libraries, the
same seed giving the same points; every parameter reaching the workload by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from scipy.stats import qmc

from spotbench.search.design import design_points, space_lines
from spotbench.search.spec import SearchSpec
from spotbench.spec import SpecError, load_spec

SPACE = {"x": {"uniform": [0, 6]}, "k": {"int": [1, 10]}, "lr": {"loguniform": [1e-4, 1e-1]},
         "opt": {"choice": ["adam", "sgd"]}, "epochs": 3}
COMMAND = "echo ${x} ${k} ${lr} ${opt} ${epochs}"


def spec(search: dict, **extra) -> dict:
    return {"name": "s", "workload": {"name": "container", "command": COMMAND, **extra.pop("workload", {})},
            "search": search, **extra}


@pytest.mark.parametrize("method", ["random", "sobol", "halton", "lhs"])
def test_search_same_seed_same_points_in_bounds(method: str) -> None:
    a = load_spec(spec({"space": SPACE, "method": method, "n": 12, "seed": 5}))
    b = load_spec(spec({"space": SPACE, "method": method, "n": 12, "seed": 5}))
    c = load_spec(spec({"space": SPACE, "method": method, "n": 12, "seed": 6}))
    points = a.points()
    assert points == b.points() and points != c.points()
    assert len(points) == 12 and len({repr(sorted(p.items())) for p in points}) == 12
    for p in points:
        assert 0 <= p["x"] <= 6 and 1 <= p["k"] <= 10 and isinstance(p["k"], int)
        assert 1e-4 <= p["lr"] <= 1e-1 and p["opt"] in ("adam", "sgd") and p["epochs"] == 3
    groups = a.plan()
    assert [g.trial for g in groups] == list(range(1, 13))
    assert [g.id for g in groups][:2] == ["s--x0001-t1", "s--x0002-t1"]
    for g, p in zip(groups, points, strict=True):  # each parameter reaches the command by name
        assert g.params.command == ["echo", *(repr(v) if isinstance(v, float) else str(v)
                                              for v in (p["x"], p["k"], p["lr"], p["opt"], p["epochs"]))]
        assert {k: g.record_params[k] for k in p} == p  # the records carry them by name


def test_search_lhs_is_scipys_latin_hypercube() -> None:
    s = load_spec(spec({"space": {"x": {"uniform": [0, 6]}, "y": {"uniform": [-1, 1]}},
                        "method": "lhs", "n": 8, "seed": 3}, workload={"command": "echo ${x} ${y}"}))
    unit = qmc.LatinHypercube(d=2, seed=3).random(8)
    assert [v for p in s.points() for v in (p["x"], p["y"])] == pytest.approx(
        [v for u in unit for v in (u[0] * 6, u[1] * 2 - 1)])
    # latin: one point in each of the 8 slices of every axis
    assert sorted(int(p["x"] / 6 * 8) for p in s.points()) == list(range(8))


def test_search_sobol_is_scipys_scrambled_sequence() -> None:
    s = load_spec(spec({"space": {"x": {"uniform": [0, 1]}, "y": {"uniform": [0, 1]}},
                        "method": "sobol", "n": 8, "seed": 4}, workload={"command": "echo ${x} ${y}"}))
    unit = qmc.Sobol(d=2, seed=4, scramble=True).random(8)
    assert [v for p in s.points() for v in (p["x"], p["y"])] == pytest.approx([float(v) for u in unit for v in u])


def test_search_grid_covers_every_combination_once() -> None:
    s = load_spec(spec({"space": {"k": {"int": [1, 3]}, "opt": {"choice": ["a", "b"]}},
                        "method": "grid"}, workload={"command": "echo ${k} ${opt}"}))
    assert sorted((p["k"], p["opt"]) for p in s.points()) == [(k, o) for k in (1, 2, 3) for o in "ab"]


def test_search_csv_design_is_exactly_its_rows(tmp_path: Path) -> None:
    rows = [(i, 0.5 * i, f"o{i}") for i in range(10)]
    (tmp_path / "design.csv").write_text("k,x,opt\n" + "".join(f"{k},{x},{o}\n" for k, x, o in rows))
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nworkload: {name: container, command: 'echo ${k} ${x} ${opt}'}\n"
                    "search: {method: csv, points: design.csv, objective: {metric: m}}\n")
    s = load_spec(path)  # the file is relative to the spec, read at load time
    assert [(p["k"], p["x"], p["opt"]) for p in s.points()] == rows
    assert s.search.points is not None and len(s.plan()) == 10
    assert s.plan()[3].params.command == ["echo", "3", "1.5", "o3"]


def test_search_adaptive_plans_slots_and_prints_space_and_sampler() -> None:
    s = load_spec(spec({"space": SPACE, "method": "adaptive", "sampler": "tpe", "n": 5,
                        "objective": {"metric": "score", "direction": "minimize"}}))
    assert s.points() == [] and len(s.plan()) == 5 and s.max_concurrency == 1
    lines = space_lines(s.search)
    assert "k: int 1 … 10" in lines and "opt: one of adam, sgd" in lines
    assert any("adaptive (tpe sampler)" in line for line in lines)


@pytest.mark.parametrize("search, where, words", [
    ({"space": {"x": {"uniform": [5, 1]}}, "method": "random", "n": 3}, "search.space", "low < high"),
    ({"space": {"x": {"normal": [0, 1]}}, "method": "random", "n": 3}, "search.space", "{uniform: ...}"),
    ({"space": {"x": {"loguniform": [0, 1]}}, "method": "random", "n": 3}, "search.space", "> 0"),
    ({"space": {"x": {"uniform": [0, 1]}}, "method": "random"}, "search", "n: method random needs"),
    ({"space": {"x": {"uniform": [0, 1]}}, "method": "adaptive", "n": 3}, "search", "needs a sampler"),
    ({"space": {"x": {"uniform": [0, 1]}}, "method": "adaptive", "sampler": "tpe", "n": 3}, "search",
     "objective"),
    ({"space": {"x": {"uniform": [0, 1]}}, "method": "grid"}, "search", "not a continuous range"),
    ({"space": {"x": {"uniform": [0, 1]}}, "method": "anneal", "n": 3}, "search.method", "random"),
    ({"space": {"x": {"uniform": [0, 1]}}, "method": "adaptive", "sampler": "smac", "n": 3,
      "objective": {"metric": "m"}}, "search.sampler", "tpe"),
    ({"space": {"nope": {"uniform": [0, 1]}}, "method": "random", "n": 3}, "", "write ${nope} in workload.command"),
])
def test_search_errors_name_field_value_and_allowed(search: dict, where: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(spec(search, workload={"command": "echo ${x}"}))
    text = str(err.value)
    assert words in text and (not where or where in text)


def test_search_and_matrix_or_trials_together_are_refused() -> None:
    base = {"space": {"x": {"uniform": [0, 1]}}, "method": "random", "n": 2}
    with pytest.raises(SpecError, match="not both"):
        load_spec(spec(base, workload={"command": "echo ${x}"}, matrix={"command": [["a"], ["b"]]}))
    with pytest.raises(SpecError, match="search.repeats"):
        load_spec(spec(base, workload={"command": "echo ${x}"}, trials=2))


def test_search_built_in_workload_fields_are_validated_by_its_model() -> None:
    tf = {"name": "tf", "workload": {"name": "tf-mnist"}}
    s = load_spec({**tf, "search": {"space": {"learning_rate": {"loguniform": [1e-3, 1e-1]},
                                              "batch_size": {"choice": [32, 64]}},
                                    "method": "random", "n": 4, "seed": 1}})
    assert all(g.params.batch_size in (32, 64) for g in s.plan())
    assert {g.params.learning_rate for g in s.plan()} == {p["learning_rate"] for p in s.points()}
    with pytest.raises(SpecError, match=r"search.space.batch_size value 0"):
        load_spec({**tf, "search": {"space": {"batch_size": {"choice": [0, 64]}}, "method": "grid"}})
    with pytest.raises(SpecError, match=r"search.space.filterz is not a parameter of workload tf-mnist"):
        load_spec({**tf, "search": {"space": {"filterz": {"int": [1, 3]}}, "method": "grid"}})
    with pytest.raises(SpecError, match=r"search.space.batch_size value 0"):  # adaptive: its bounds
        load_spec({**tf, "search": {"space": {"batch_size": {"int": [0, 64]}}, "method": "adaptive",
                                    "sampler": "tpe", "n": 3, "objective": {"metric": "test_loss"}}})


def test_search_parameters_fill_env_templates_and_matrix_free_names() -> None:
    s = load_spec(spec({"space": {"x": {"choice": [1, 2]}}, "method": "grid"},
                       workload={"command": "echo ${x} ${HOME}", "env": {"X": "v${x}"}}))
    g = sorted(s.plan(), key=lambda g: g.point["x"])
    assert g[0].params.command == ["echo", "1", "${HOME}"]  # a shell's own variable is left alone
    from workloads.container.descriptor import user_env

    assert user_env(g[0].params)["X"] == "v1"  # the command's env (a parameter since #35's fix)
    m = load_spec({"name": "m", "workload": {"name": "container", "command": "echo ${n}"},
                   "matrix": {"n": [1, 2]}})
    assert sorted(tuple(g.params.command) for g in m.plan()) == [("echo", "1"), ("echo", "2")]
    rows = {g.record_params["n"] for g in m.plan()}  # two points: two rows in the records
    assert rows == {1, 2}


def test_search_parallel_sets_the_concurrency() -> None:
    base = {"space": {"x": {"uniform": [0, 1]}}, "method": "random", "n": 4, "parallel": 3}
    assert load_spec(spec(base, workload={"command": "echo ${x}"})).max_concurrency == 3
    assert load_spec(spec(base, workload={"command": "echo ${x}"}, concurrency=2)).max_concurrency == 2


def test_search_spec_model_is_importable_alone() -> None:
    s = SearchSpec.model_validate({"space": {"a": {"int": [1, 2]}}, "method": "grid"})
    assert design_points(s) and s.searched() and not s.fixed()


def test_search_adaptive_container_on_a_deployed_cloud_is_refused_with_the_fix() -> None:
    data = spec({"space": {"x": {"uniform": [0, 1]}}, "method": "adaptive", "sampler": "tpe", "n": 3,
                 "objective": {"metric": "score"}}, workload={"command": "echo ${x}"},
                cloud="gcp", zone="us-central1-a", image="docker.io/library/python:3.12-slim")
    with pytest.raises(SpecError, match="use a design"):
        load_spec(data)
    data["search"]["method"], data["search"]["sampler"], data["search"]["n"] = "random", None, 3
    data["search"]["space"]["machine_type"] = "n1-standard-2"
    assert len(load_spec(data).plan()) == 3
