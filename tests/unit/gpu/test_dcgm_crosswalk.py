"""The sloguard <-> dcgm-exporter <-> nvidia-smi table names only series the NVML source really exports."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from support.exposition import samples
from support.nvml_fake import FakeGPU, FakeNVML

from sloguard.config.spec import GPUSpec
from sloguard.gpu.dcgm import CROSSWALK, DCGM_TO_SLOGUARD, markdown
from sloguard.gpu.nvml import NVMLSource

GPU_DOC = Path(__file__).resolve().parents[3] / "docs" / "gpu.md"
ALL = {"SM_UTIL": 50.0, "SM_OCCUPANCY": 20.0, "ANY_TENSOR_UTIL": 40.0, "DRAM_BW_UTIL": 30.0, "FP16_UTIL": 1.0,
       "FP32_UTIL": 2.0, "FP64_UTIL": 3.0}


def _everything() -> set[tuple[str, frozenset[tuple[str, str]]]]:
    gpu = FakeGPU("GPU-a", gpm=dict(ALL), nvlink=[True, True])
    fake = FakeNVML([gpu])
    fake.events.append((gpu, 79))
    src = NVMLSource(GPUSpec(), nvml=fake)  # type: ignore[arg-type]
    asyncio.run(src.collect())
    return set(samples(asyncio.run(src.collect()).families))


def test_every_series_in_the_table_is_exported_with_its_labels() -> None:
    got = _everything()
    for c in CROSSWALK:
        fixed = {(k, v) for k, v in c.labels if not v.startswith("<")}
        names = {k for k, _ in c.labels}
        assert any(name == c.series and fixed <= labels and names <= {k for k, _ in labels}
                   for name, labels in got), c


def test_dcgm_fields_are_unique_and_cover_the_profiling_fields() -> None:
    fields = [c.dcgm for c in CROSSWALK if c.dcgm]
    assert [f for f, n in Counter(fields).items() if n > 1] == []
    for f in ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
              "DCGM_FI_PROF_DRAM_ACTIVE"):
        assert DCGM_TO_SLOGUARD[f][2] == 1.0  # DCGM's ratios are already 0..1
    assert DCGM_TO_SLOGUARD["DCGM_FI_DEV_FB_USED"] == ("sloguard_gpu_memory_used_bytes", {}, 2.0**20)


def test_the_gpu_docs_carry_the_generated_table() -> None:
    assert markdown() in GPU_DOC.read_text(), "paste sloguard.gpu.dcgm.markdown() into docs/gpu.md"
