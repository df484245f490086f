"""A search's files beside the runs (issue #35; what a member reports while it runs is
its attempt's intermediate records, `spotbench.results.artifacts`): what control noted of a pruned group (`runs/<run>/pruned/<group>.json`, no
grant reaches it), an adaptive trial's parameters in the run's ledger entry (`assigned`,
control's: members read it at boot, as they read the ledger to find their run), and the
store's conditional requests the study's journal is written with."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from spotbench.results.model import RunInfo, StoreError
from spotbench.results.storage import Storage, json_object, read_small, store_errors

if TYPE_CHECKING:
    from spotbench.lease import ConditionalObjects


class TrialFiles(Storage):
    def conditional_objects(self) -> ConditionalObjects | None:
        """The store's conditional requests (its cloud's; None on a local folder)."""
        return self._lease_objects(self.fs) if self._lease_objects is not None else None

    # ---- pruned groups (control's) -------------------------------------------------
    @store_errors
    def note_pruned(self, run: str, group: str, body: dict[str, Any]) -> None:
        self.write_whole(self.path("runs", run, "pruned", f"{group}.json"), json.dumps(body).encode())

    @store_errors
    def pruned_files(self, run: str | None = None) -> list[str]:
        return self._glob(self.path("runs", run or "*", "pruned", "*.json"))

    def pruned_groups(self, run: str) -> set[str]:
        """The groups a search's pruner stopped in `run` (over: not failed, not retried)."""
        return {p.rsplit("/", 1)[-1].removesuffix(".json") for p in self.pruned_files(run)}

    def pruning_notes(self, run: str | None = None) -> list[dict[str, Any]]:
        """What control noted of each pruned group (`note_pruned`: step, seconds run and
        expected, `saved_usd`), of `run` or every run; unreadable notes are skipped."""
        notes = (json_object(self.fs, path) for path in self.pruned_files(run))
        return [note for note in notes if note is not None]

    # ---- an adaptive trial's parameters (control's, in the run's ledger entry) ------
    @store_errors
    def assign(self, run: str, group: str, params: dict[str, Any]) -> None:
        """Note `group`'s parameters for this run in `runs/<run>/run.json` (`assigned`)."""
        path = self.path("runs", run, "run.json")
        info = RunInfo.model_validate_json(read_small(self.fs, path) or b"{}")
        if info.assigned.get(group) == params:
            return
        info = info.model_copy(update={"assigned": {**info.assigned, group: params}})
        body = info.model_dump_json().encode()
        if len(body) > 60 << 10:
            raise StoreError(f"results store {self.url}: run {run}'s ledger entry would pass 60 KiB "
                             "with the search's assigned parameters; lower search.parallel")
        self.write_whole(path, body)

    def assignment(self, run: str, group: str) -> dict[str, Any] | None:
        """The parameters control asked for `group` in `run` (an adaptive search), or None."""
        try:
            info = RunInfo.model_validate_json(read_small(self.fs, self.path("runs", run, "run.json")))
        except ValueError:
            return None
        return info.assigned.get(group)
