"""The `local` cloud's operations: provider, the process driver (`cloud`, its SQLite table
`db`, its supervisor), the sweep's state folder, schedule control and orphan finder. Its
facts are `spotbench.facts.local`. Imports no other cloud's package."""
