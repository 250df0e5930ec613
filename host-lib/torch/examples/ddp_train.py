# SPDX-License-Identifier: BSD-3-Clause
"""A small DistributedDataParallel job on synthetic data (no downloads): an
MLP learns a fixed random teacher's classes. The same seed gives the same
model and data on every backend, so loss curves and final parameters can be
compared between gloo and inca.

Launch one process per rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
set (deploy/demo-pytorch.sh, tests/func/pytorch.sh), e.g.
    ddp_train.py --backend inca --steps 300 --out params.pt
"""
import argparse
import gc
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="inca", choices=["inca", "gloo"])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    p.add_argument("--inputs", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--bucket-mb", type=float, default=0.025,
                   help="DDP bucket_cap_mb (default 0.025: 25 KB, several buckets)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--loss-every", type=int, default=25)
    p.add_argument("--ordered", action="store_true",
                   help="reduce gradients rank by rank in fp32 (allgather + sum in "
                        "rank order), as a reproducible INCA group does")
    p.add_argument("--out", help="rank 0 saves the final parameters here")
    p.add_argument("--progress", help="rank 0 appends 'step N' here every 10 steps")
    return p.parse_args()


def ordered_hook(state, bucket):
    """DDP comm hook: the gradient average summed in rank order in fp32,
    ((g0 + g1) + g2) + g3, each g already divided by the world size.
    state is a dict: state["parts"] keeps the last bucket's gathered tensors
    alive in Python until main() has torn the process group down (see
    there)."""
    t = bucket.buffer()
    world = dist.get_world_size()
    t.div_(world)
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t)
    state["parts"] = parts
    acc = parts[0].clone()
    for p in parts[1:]:
        acc += p
    t.copy_(acc)
    fut = torch.futures.Future()
    fut.set_result(t)
    return fut


def main():
    a = parse_args()
    torch.set_num_threads(1)
    if a.backend == "inca":
        import inca_torch  # noqa: F401  (registers the backend)
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(a.seed)
    model = nn.Sequential(nn.Linear(a.inputs, a.hidden), nn.ReLU(),
                          nn.Linear(a.hidden, a.hidden), nn.ReLU(),
                          nn.Linear(a.hidden, a.classes))
    teacher = nn.Linear(a.inputs, a.classes)
    # DDP's first bucket is 1 MiB whatever bucket_cap_mb says (torch 1.13
    # reads dist._DEFAULT_FIRST_BUCKET_BYTES): make every bucket the same size
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(a.bucket_mb * 1024 * 1024)
    ddp = DDP(model, bucket_cap_mb=a.bucket_mb)
    hook_state = {}
    if a.ordered:
        ddp.register_comm_hook(hook_state, ordered_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr)
    loss_fn = nn.CrossEntropyLoss()
    data = torch.Generator().manual_seed(a.seed * 1000 + rank)
    nparams = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print(f"# {a.backend}: {world} ranks, MLP {a.inputs}-{a.hidden}-{a.hidden}-"
              f"{a.classes} ({nparams} parameters, {nparams * 4} gradient bytes a step), "
              f"batch {a.batch}/rank, bucket_cap_mb {a.bucket_mb}, seed {a.seed}"
              f"{', rank-ordered reduction' if a.ordered else ''}", flush=True)
    warm = min(10, a.steps // 2)
    t0 = None
    for step in range(1, a.steps + 1):
        if step == warm + 1:
            t0 = time.perf_counter()
        x = torch.randn(a.batch, a.inputs, generator=data)
        with torch.no_grad():
            y = teacher(x).argmax(dim=1)
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and (step % a.loss_every == 0 or step == 1):
            print(f"step {step:5d} loss {loss.item():.7f}", flush=True)
        if rank == 0 and a.progress and step % 10 == 0:
            with open(a.progress, "a") as f:
                f.write(f"step {step}\n")
    dt = time.perf_counter() - t0
    ms = dt * 1000 / (a.steps - warm)
    if rank == 0:
        print(f"# {a.backend}: {ms:.2f} ms per step (mean of steps {warm + 1}..{a.steps})",
              flush=True)
        if a.out:
            torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, a.out)
    dist.barrier()
    if a.backend == "inca":
        s = inca_torch.stats()
        print(f"inca_torch rank {rank}: " + " ".join(
            f"{k}={int(v)}" for k, v in sorted(s.items())), file=sys.stderr, flush=True)
    # torch 1.13 tears a process group down holding the GIL: if the last
    # reference goes while one of gloo's workers is freeing a tensor that
    # Python let go of (and so needs the GIL), ~ProcessGroupGloo joins that
    # worker forever. Seen once in ~25 rank-ordered runs, after the job had
    # finished. So Python keeps the hook's tensors until the group is gone,
    # and DDP's reducer (which holds the group) goes first, while
    # torch.distributed still holds the group too.
    del opt, ddp
    gc.collect()
    dist.destroy_process_group()
    hook_state.clear()


if __name__ == "__main__":
    main()
