"""The `osu` workload: OSU micro-benchmarks (latency, bibw) between the two members of a
group over MPI. The launcher runs `mpiexec`; the peer serves an sshd (clouds) or an exec
agent (local cloud) that `mpiexec` reaches.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from spotbench.workload import SSH_DIR_IN_CONTAINER, Images, Params, Tracked, Workload

# MPICH's hydra proxies and TCP channel listen on ephemeral ports (the mpich wheel's ch4
# ignores MPICH_PORT_RANGE): members of a group reach each other on every TCP/UDP port
# (infra: per-group firewall / security group), so no range is assumed here.
SSHD_PORT = 2222  # the peer container's sshd that mpiexec's launcher reaches


class OsuParams(Params):
    """OSU micro-benchmarks between the two members of a group (MPI, point to point)."""

    name: Literal["osu"] = "osu"
    benchmarks: list[Literal["latency", "bibw"]] = Field(
        default_factory=lambda: ["latency", "bibw"], min_length=1
    )
    max_size: int = Field(4 * 1024 * 1024, ge=1, le=1 << 30, description="largest message, bytes")
    iterations: int = Field(10_000, ge=1, description="latency iterations for sizes <= large_size")
    iterations_large: int = Field(1_000, ge=1, description="latency iterations above large_size")
    warmup: int = Field(100, ge=0, description="latency warm-up iterations (small sizes)")
    warmup_large: int = Field(10, ge=0)
    bw_iterations: int = Field(100, ge=1, description="bibw loops of `window` messages (small)")
    bw_iterations_large: int = Field(20, ge=1)
    bw_warmup: int = Field(10, ge=0)
    bw_warmup_large: int = Field(2, ge=0)
    window: int = Field(64, ge=1, description="in-flight messages per direction for bibw")
    large_size: int = Field(8192, ge=1, description="sizes above this use the *_large counts")
    implementation: Literal["auto", "osu-c", "mpi4py"] = "auto"
    stall_s: float = Field(
        2.0, ge=0, le=3600,
        description="a rank's timed loop making no progress this long (a stopped process, a "
                    "paused VM), or its monotonic and wall clocks drifting apart by this much, "
                    "marks the attempt contaminated (retried); 0: off. OSU's own binaries "
                    "(osu-c) cannot report it",
    )
    demo_inject_delay_us: float = Field(
        0.0, ge=0, le=100_000,
        description="DEMOS AND TESTS ONLY: the peer rank sleeps this many µs before each "
                    "latency reply, so one-way latency really grows by about half of it (runs the "
                    "mpi4py harness; records carry metadata injected_delay_us)",
    )

    @field_validator("max_size")
    @classmethod
    def _power_of_two(cls, v: int) -> int:
        if v & (v - 1):
            raise ValueError(f"must be a power of two (e.g. {1 << (v.bit_length() - 1)})")
        return v

    @model_validator(mode="after")
    def _demo_delay_needs_the_harness(self) -> OsuParams:
        if self.demo_inject_delay_us and self.implementation == "osu-c":
            raise ValueError("demo_inject_delay_us runs the mpi4py harness: "
                             "set implementation: auto or mpi4py")
        return self


def roles(params: OsuParams) -> list[tuple[str, int]]:
    return [("launcher", 0), ("peer", 0)]


WORKLOAD = Workload(
    name="osu",
    params=OsuParams,
    module="workloads.osu",
    roles=roles,
    role_codes={"launcher": "l", "peer": "p"},
    port=SSHD_PORT,
    env={
        "SPOTBENCH_SSH_DIR": SSH_DIR_IN_CONTAINER,
    },
    mpi=True,
    images=Images(cpu="mpi", gpu="mpi"),
    metrics=("latency", "bibw"),
    report="workloads.osu.report:section",
    history=(
        Tracked("latency", "OSU latency", "lower", sizes=(8, 1 << 20)),
        Tracked("bibw", "OSU bibw", "higher", sizes=(1 << 20,)),
    ),
    description=OsuParams.__doc__ or "",
)
