"""Fixtures shared by the attack tests: the Pulumi mocks harness of tests/infra (declare a
sweep's program and read the policies it declares, never a copy)."""

from tests.infra.conftest import declare, mocks  # noqa: F401 - fixtures re-exported
