"""GPU and Azure ND-SKU catalog: plain data tables that validation and quotas read.

Sources (see ../shared/reference/domain.md §1.1–1.2 and pulumi-azure.md §1.7):
- MIG profiles, slices and placements: NVIDIA MIG User Guide v580, "Supported MIG Profiles" and
  "Getting Started" (``nvidia-smi mig -lgipp``), https://docs.nvidia.com/datacenter/tesla/mig-user-guide/ ;
  NVIDIA/mig-parted deployments/systemd/config-default.yaml for the profile names per GPU.
- A30 placements: NVIDIA/go-nvml pkg/nvml/mock/gpus/a30.go (mock data, not hardware output).
- B200/GB200 placements are assumed identical to H100 (same 7/8 geometry; the guide prints no
  ``-lgipp`` for them): verify with ``nvidia-smi mig -lgipp`` on the first node.
- ND SKUs: Microsoft Learn, sizes/gpu-accelerated/{ndasra100v4,ndma100v4,ndh100v5,nd-h200-v5,nd-gb200-v6}-series.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile: how many compute/memory slices it takes and where it may start."""

    name: str
    compute: int
    memory: int
    starts: tuple[int, ...]
    max_per_gpu: int


@dataclass(frozen=True)
class GpuModel:
    """A GPU model as MIG sees it. ``profiles`` is empty for GPUs without MIG."""

    name: str
    memory_gb: int
    compute_slices: int
    memory_slices: int
    profiles: tuple[MigProfile, ...]

    def profile(self, name: str) -> MigProfile | None:
        return next((p for p in self.profiles if p.name == name), None)


def _seven_slice(prefix_mem: tuple[str, str, str, str, str, str]) -> tuple[MigProfile, ...]:
    """The profile set of every 7-compute/8-memory-slice GPU (A100, H100, H200, B200, GB200).

    ``prefix_mem`` holds the memory suffixes of 1g, 1g (2 slices), 2g, 3g, 4g, 7g.
    Placements: MIG User Guide "Getting Started" ``-lgipp`` output (A100-40GB, H100-80GB, H100 NVL).
    """
    m1, m1x2, m2, m3, m4, m7 = prefix_mem
    return (
        MigProfile(f"1g.{m1}", 1, 1, (0, 1, 2, 3, 4, 5, 6), 7),
        MigProfile(f"1g.{m1}+me", 1, 1, (0, 1, 2, 3, 4, 5, 6), 1),
        MigProfile(f"1g.{m1x2}", 1, 2, (0, 2, 4, 6), 4),
        MigProfile(f"2g.{m2}", 2, 2, (0, 2, 4), 3),
        MigProfile(f"3g.{m3}", 3, 4, (0, 4), 2),
        MigProfile(f"4g.{m4}", 4, 4, (0,), 1),
        MigProfile(f"7g.{m7}", 7, 8, (0,), 1),
    )


GPU_MODELS: Final[dict[str, GpuModel]] = {
    g.name: g
    for g in (
        GpuModel("A100-40GB", 40, 7, 8, _seven_slice(("5gb", "10gb", "10gb", "20gb", "20gb", "40gb"))),
        GpuModel("A100-80GB", 80, 7, 8, _seven_slice(("10gb", "20gb", "20gb", "40gb", "40gb", "80gb"))),
        GpuModel("H100-80GB", 80, 7, 8, _seven_slice(("10gb", "20gb", "20gb", "40gb", "40gb", "80gb"))),
        GpuModel("H100-94GB", 94, 7, 8, _seven_slice(("12gb", "24gb", "24gb", "47gb", "47gb", "94gb"))),
        GpuModel("H200-141GB", 141, 7, 8, _seven_slice(("18gb", "35gb", "35gb", "71gb", "71gb", "141gb"))),
        GpuModel("B200", 180, 7, 8, _seven_slice(("23gb", "45gb", "45gb", "90gb", "90gb", "180gb"))),
        GpuModel("GB200", 186, 7, 8, _seven_slice(("23gb", "47gb", "47gb", "93gb", "93gb", "186gb"))),
        GpuModel(
            "A30",
            24,
            4,
            4,
            (
                MigProfile("1g.6gb", 1, 1, (0, 1, 2, 3), 4),
                MigProfile("1g.6gb+me", 1, 1, (0, 1, 2, 3), 1),
                MigProfile("2g.12gb", 2, 2, (0, 2), 2),
                MigProfile("2g.12gb+me", 2, 2, (0, 2), 1),
                MigProfile("4g.24gb", 4, 4, (0,), 1),
            ),
        ),
    )
}


@dataclass(frozen=True)
class NdSku:
    """An Azure GPU VM size: what a node of that pool brings to the fleet."""

    vm_size: str
    gpu_model: str
    gpus: int
    ib_gbps_per_gpu: int  # 0: no InfiniBand (not an RDMA ``r`` size)


#: Microsoft Learn ND-series pages (pulumi-azure.md §1.7). NC A100 v4 is listed so that a GPU
#: pool without InfiniBand is recognised and refused with a precise reason.
ND_SKUS: Final[dict[str, NdSku]] = {
    s.vm_size: s
    for s in (
        NdSku("Standard_ND96asr_v4", "A100-40GB", 8, 200),
        NdSku("Standard_ND96amsr_A100_v4", "A100-80GB", 8, 200),
        NdSku("Standard_ND96isr_H100_v5", "H100-80GB", 8, 400),
        NdSku("Standard_ND96isr_H200_v5", "H200-141GB", 8, 400),
        NdSku("Standard_ND128isr_NDR_GB200_v6", "GB200", 4, 400),
        NdSku("Standard_NC24ads_A100_v4", "A100-80GB", 1, 0),
        NdSku("Standard_NC96ads_A100_v4", "A100-80GB", 4, 0),
    )
}

#: InfiniBand line rates by generation, Gb/s per port (domain.md §4.1).
IB_RATES_GBPS: Final[dict[str, int]] = {"HDR": 200, "NDR": 400, "XDR": 800}
