"""Experiments (issue #35): a `search:` section's space and design (`spec`, `design`) and
the study control keeps in the results store (`study`, `journal`).

Layer: below `plan` (which expands a search into trial groups) and above `results` and
`lease` (the study's journal is written with the store's conditional requests). Nothing
here knows a cloud, a spec or control: control drives the loop (`spotbench.control.search`).
"""

from spotbench.search.checks import check_search, search_problem
from spotbench.search.design import design_points, search_design
from spotbench.search.spec import SearchSpec

__all__ = ["SearchSpec", "check_search", "design_points", "search_design", "search_problem"]
