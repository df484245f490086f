"""Operations on a deployed sweep: status, schedule control, teardown (with an orphan
sweep) and SSH access to a running group's members."""
