# SPDX-License-Identifier: BSD-3-Clause
"""torch.distributed backend "inca": collectives reduced in the network by
INCA switches through libinca; everything else on a Gloo group created
alongside. Importing this package registers the backend:

    import inca_torch
    torch.distributed.init_process_group("inca", rank=r, world_size=n)

libinca finds its group in its own environment (INCA_CONFIG or INCA_SWITCH
and friends, or INCA_MANAGER): see docs/pytorch.md.
"""
import torch.distributed as dist

from . import _C

__all__ = ["ProcessGroupInca", "stats"]
ProcessGroupInca = _C.ProcessGroupInca


def _create(store, rank, size, timeout):
    gloo = dist.ProcessGroupGloo(dist.PrefixStore("gloo/", store), rank, size, timeout)
    return _C.create(dist.PrefixStore("inca/", store), rank, size, gloo)


def stats(group=None):
    """libinca's counters for this rank and the calls offloaded ("inca.*")
    and sent to gloo ("gloo.*"), as a dict."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return pg.stats()


if "INCA" not in dist.Backend._plugins:
    dist.Backend.register_backend("inca", _create)
