"""Experiments (issue #35): a `search:` section's space and design (`spec`, `design`) and
the study control keeps in the results store (`study`, `journal`).

Layer: below `plan` (which expands a search into trial groups) and above `results` and
`lease` (the study's journal is written with the store's conditional requests). Nothing
here knows a cloud, a spec or control: control drives the loop (`spotbench.control.search`).
"""
