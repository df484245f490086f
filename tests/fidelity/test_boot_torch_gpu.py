"""The torch GPU image's boot document (GCP, Container-Optimized OS) boots in the boot lab with
the GPU handed to its container as COS requires, and the CPU document hands it nothing.

Google's "Running GPUs on Container-Optimized OS": `cos-extensions install gpu` installs the
driver in /var/lib/nvidia (on COS's noexec /var: bind-mounted onto itself and remounted
`exec`), then `docker run` with `--volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64`,
`--volume /var/lib/nvidia/bin:/usr/local/nvidia/bin` and `--device` for `/dev/nvidia<i>`,
`/dev/nvidia-uvm`, `/dev/nvidiactl`; the container's loader finds `libcuda.so.1` there only
with `/usr/local/nvidia/lib64` on its `LD_LIBRARY_PATH` (images/torch-gpu sets it).

The lab has no GPU, so the test gives the VM what the platform would (`boot.attach_gpus`:
the installer's driver files — `libcuda.so.1` a real shared object — and the device nodes it
makes) and boots the document the Pulumi program declares (rendered under the mocks). The
member itself checks, inside its container, that the device nodes are there and that
`libcuda.so.1` loads (`workloads/gpu.py`), and says what it found; its training then fails
as it must here: the lab's torch is a CPU build, and a GPU group never trains on the CPU.
The same document with one of COS's steps left out fails the member's check, naming it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from spotbench import failures
from spotbench.images import IMAGE_UID
from tests.fidelity import boot
from tests.infra.conftest import MOCKS

pytestmark = pytest.mark.fidelity

TINY_TORCH = {"name": "torch", "dataset": "synthetic", "train_examples": 64, "val_examples": 32,
              "epochs": 1, "steps_per_epoch": 2, "batch_size": 16}
GPUS = 2
NVIDIA_VOLUMES = ["/var/lib/nvidia/lib64:/usr/local/nvidia/lib64",
                  "/var/lib/nvidia/bin:/usr/local/nvidia/bin"]
REMOUNT_EXEC = "ExecStartPre=/bin/mount -o remount,exec /var/lib/nvidia"


def torch_spec(tmp: Path, name: str, gpus: int) -> Path:
    """examples/gcp-gpu.yaml with the torch workload: `gpus` T4s per VM, or a CPU VM."""
    data = yaml.safe_load((boot.ROOT / "examples/gcp-gpu.yaml").read_text())
    data.update(name=name, workload=TINY_TORCH, trials=1)
    data["matrix"] = ({"machine_type": ["n1-standard-8"], "accelerator": ["nvidia-tesla-t4"],
                       "accelerator_count": [gpus]} if gpus else
                      {"machine_type": ["n1-standard-4"]})
    out = tmp / f"{name}.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def rendered_member(tmp: Path, name: str, gpus: int) -> boot.Rendered:
    rendered, _ = boot.render(torch_spec(tmp, name, gpus), MOCKS)
    assert len(rendered) == 1, [r.name for r in rendered]
    return rendered[0]


def boot_member(work: Path, member: boot.Rendered, *, gpus: int, edit=lambda text: text,
                timeout: float = 240) -> dict:
    """`member`'s document (`edit`ed) booted once in an open run on a VM with `gpus` GPUs."""
    store = boot.shared_results(work, IMAGE_UID)
    run = boot.open_run(store, IMAGE_UID)
    with boot.Lab(work) as lab:
        text = edit(boot.localize(member, store.url, lab.done_url))
        vm = lab.vm(member.name, member.ctx.me.host, "gcp", text, member.account)
        if gpus:
            boot.attach_gpus(vm, gpus)
        lab.boot(vm)
        waited = lab.wait(vm, timeout)
        done = lab.done_calls()
    records = store.read(run.run)
    runs = [c["run"] for c in vm.calls("docker") if c["argv"][0] == "run"]
    return {"vm": vm, "waited": waited, "done": done, "records": records, "runs": runs,
            "failed": [r for r in records if r.metric == failures.FAILED_METRIC],
            "journal": vm.journal}


@pytest.fixture(scope="module")
def gpu_member(lab_dir) -> boot.Rendered:
    return rendered_member(lab_dir, "torch-gpu", GPUS)


@pytest.fixture(scope="module")
def gpu_boot(lab_dir, gpu_member) -> dict:
    return boot_member(lab_dir / "gpu", gpu_member, gpus=GPUS)


def test_torch_gpu_document_declares_cos_gpu_steps(gpu_member):
    """The rendered unit: the driver installed, made executable, then the container run with
    the driver's folders and every GPU's device (what the boot below executes)."""
    unit = gpu_member.unit
    pre = unit["ExecStartPre"]
    assert "/usr/bin/cos-extensions install gpu" in pre, pre
    install = pre.index("/usr/bin/cos-extensions install gpu")
    assert pre[install + 1:install + 3] == ["/bin/mount --bind /var/lib/nvidia /var/lib/nvidia",
                                            "/bin/mount -o remount,exec /var/lib/nvidia"], pre
    start = unit["ExecStart"][0]
    for flag in [*(f"--volume {v}" for v in NVIDIA_VOLUMES), "--device /dev/nvidia-uvm",
                 "--device /dev/nvidiactl", *(f"--device /dev/nvidia{i}" for i in range(GPUS))]:
        assert flag in start, (flag, start)
    assert start.split()[-1].endswith("/torch-gpu:latest"), start


def test_torch_gpu_document_boots_with_the_gpu_devices_gcp(gpu_boot):
    g = gpu_boot
    assert g["waited"] is not None, g["journal"][-4000:]
    calls = [c["program"] for c in g["vm"].calls() if c["program"] in ("cos-extensions", "docker")]
    assert calls.index("cos-extensions") < calls.index("docker"), calls
    assert len(g["runs"]) == 1, g["journal"][-4000:]
    run = g["runs"][0]
    assert run["image"].endswith("/torch-gpu:latest"), run["image"]
    assert sorted(run["devices"]) == sorted(
        [f"/dev/nvidia{i}" for i in range(GPUS)] + ["/dev/nvidiactl", "/dev/nvidia-uvm"]), run
    assert set(NVIDIA_VOLUMES) <= set(run["volumes"]), run["volumes"]
    # inside its container the member found every device node and loaded the driver's
    # library from the folder the unit mounted (through the image's LD_LIBRARY_PATH)
    found = ("GPU driver: libcuda.so.1 from /usr/local/nvidia/lib64/libcuda.so.1, devices "
             + " ".join([f"/dev/nvidia{i}" for i in range(GPUS)] + ["/dev/nvidiactl",
                                                                   "/dev/nvidia-uvm"]))
    assert found in g["journal"], g["journal"][-4000:]
    # then it would train on the GPUs; the lab's torch has no CUDA: the attempt fails, stored
    # with why, and `done` is called — it does not train on the CPU
    assert len(g["failed"]) == 1, (g["records"], g["journal"][-4000:])
    assert g["failed"][0].metadata[failures.FAILURE_KEY].startswith("torchrun exited with code")
    refused = f"this VM has {GPUS} GPU(s) and its NVIDIA driver reaches the container"
    assert refused in g["journal"], g["journal"][-4000:]  # each training process said why
    assert not [r for r in g["records"] if r.metric == "images_per_s"], g["records"]
    assert len(g["done"]) == 1, g["journal"][-4000:]


@pytest.mark.parametrize("step, left_out, problem", [
    ("exec", lambda text: text.replace(REMOUNT_EXEC + "\n", ""),
     "libcuda.so.1 does not load"),
    ("device", lambda text: text.replace(f" --device /dev/nvidia{GPUS - 1}", ""),
     f"/dev/nvidia{GPUS - 1} is missing"),
])
def test_torch_gpu_document_without_a_cos_step_fails_the_member_check(
        step, left_out, problem, lab_dir, gpu_member):
    """What the member's check sees when the document leaves out COS's `remount,exec` (the
    driver's library on a noexec mount: the loader cannot map it) or a GPU's `--device`: the
    attempt fails before training, saying which."""
    text = boot.localize(gpu_member, "file:///x", "http://x/done")
    assert left_out(text) != text, step  # the step is in the document
    g = boot_member(lab_dir / f"gpu-no-{step}", gpu_member, gpus=GPUS, edit=left_out,
                    timeout=120)
    assert g["waited"] is not None, g["journal"][-4000:]
    assert len(g["failed"]) == 1, (g["records"], g["journal"][-4000:])
    why = g["failed"][0].metadata[failures.FAILURE_KEY]
    assert why.startswith("the NVIDIA driver does not reach this container") and problem in why, why
    if step == "exec":
        assert "failed to map segment" in why, why
    assert len(g["done"]) == 1


def test_torch_cpu_document_hands_no_gpu_and_trains_gcp(lab_dir):
    """The CPU group's document: no driver install, no NVIDIA device or volume; booted on a
    VM with no GPU it trains on the CPU and stores its numbers."""
    member = rendered_member(lab_dir, "torch-cpu", 0)
    assert "cos-extensions" not in member.user_data and "nvidia" not in member.user_data
    g = boot_member(lab_dir / "cpu", member, gpus=0)
    assert g["waited"] is not None, g["journal"][-4000:]
    assert not [c for c in g["vm"].calls() if c["program"] == "cos-extensions"]
    run = g["runs"][0]
    assert run["image"].endswith("/torch-cpu:latest") and run["devices"] == [], run
    assert not [v for v in run["volumes"] if "nvidia" in v], run["volumes"]
    assert not g["failed"], g["failed"]
    speed = [r for r in g["records"] if r.metric == "images_per_s"]
    assert speed and speed[0].metadata["device"] == "cpu", g["records"]
    assert "GPU driver:" not in g["journal"]
