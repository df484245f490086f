"""The `aws` cloud's operations: provider, EC2 driver, EventBridge schedules, preflight,
orphan finder, credentials check. Its facts are `spotbench.facts.aws`. Imports no other
cloud's package (an import-linter independence contract)."""
