"""XIDs by who must act, from NVIDIA's XID catalog.

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog"
(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, the catalog for Ampere and
newer GPUs): each XID has a *Resolution Bucket (Immediate Action)*. Those whose action is to
restart the application, and whose cause the catalog gives as the application's (a graphics engine
exception, an MMU fault from a bad address, a channel the driver stopped, a preemptive cleanup),
go to the team that ran it; those that leave the GPU unusable until a reset, a node reboot or a
repair go to the platform, which drains the node. Any other XID is neither: the alert names it
and asks the reader to look it up, rather than guess.

The XIDs of the two classes are few and stable across driver branches; a new XID falls into
"other" until it is classified here.
"""

from __future__ import annotations

from typing import Final

#: The application's own faults (catalog action RESTART_APP): 13 graphics engine exception,
#: 31 GPU memory page fault (MMU), 43 GPU stopped processing (the channel was reset), 45
#: preemptive cleanup after an earlier error or a killed process.
APPLICATION: Final = (13, 31, 43, 45)

#: Faults that need the GPU reset or the node rebooted (catalog action RESET_GPU / RESTART_BM, or
#: CONTACT_SUPPORT after it): 48 double-bit ECC error, 63 a row remap or page retirement recorded
#: (active after a reset), 64 row remap or page retirement failed, 74 NVLink error, 79 the GPU
#: fell off the bus, 92 high single-bit ECC error rate, 95 uncontained ECC error, 119 and 120
#: GSP (GPU System Processor) timeout and error.
NEEDS_RESET: Final = (48, 63, 64, 74, 79, 92, 95, 119, 120)


def alternation(xids: tuple[int, ...]) -> str:
    """The XIDs as a PromQL label regex (``13|31|43|45``)."""
    return "|".join(str(x) for x in xids)
