# SPDX-License-Identifier: BSD-3-Clause
"""The inca backend's own checks, run as every rank of a job (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT): every offloaded op and dtype against
the Gloo group's result (exact: the inputs are small integers, so every
reduction is exact in every dtype, and fp16/bf16 round once from an fp32
reference as libinca does), async work overlapping, delegated ops, bad
input. Prints "pytorch_ops: N passed, M failed"; exit status 1 on failure.
"""
import os
import sys

import torch
import torch.distributed as dist

import inca_torch

R = dist.ReduceOp
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64]
COUNTS = [1, 257, 5000]
passed = failed = 0


def check(what, ok):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"pytorch_ops rank {rank}: FAIL {what}", flush=True)


def values(n, dtype, r, salt=0):
    """1..5, different per rank and element: sums <= 20, products <= 625"""
    i = torch.arange(n, dtype=torch.int64)
    return ((i * 7 + r * 3 + salt) % 5 + 1).to(dtype)


def reference(t, op):
    """the same reduction by gloo, in fp32 for fp16/bf16 (rounded once)"""
    wide = torch.float32 if t.dtype in (torch.float16, torch.bfloat16) else t.dtype
    ref = t.to(wide)
    dist.all_reduce(ref, op=op, group=gloo)
    return ref.to(t.dtype)


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def ops_for(dtype):
    ops = [R.SUM, R.MIN, R.MAX, R.PRODUCT]
    if not dtype.is_floating_point:
        ops += [R.BAND, R.BOR, R.BXOR]
    return ops


def main():
    global rank, gloo
    torch.set_num_threads(1)
    dist.init_process_group("inca")
    rank, world = dist.get_rank(), dist.get_world_size()
    pg = dist.distributed_c10d._get_default_group()
    check("the group is offloaded to libinca", pg.offloaded)
    gloo = pg.gloo

    for dtype in DTYPES:
        for op in ops_for(dtype):
            for n in COUNTS:
                t = values(n, dtype, rank)
                want = reference(t.clone(), op)
                dist.all_reduce(t, op=op)
                check(f"all_reduce {dtype} {op} {n}", same(t, want))
        # random floats: within rounding of another summation order
        if dtype.is_floating_point:
            g = torch.Generator().manual_seed(100 + rank)
            t = torch.randn(10000, generator=g, dtype=torch.float64).to(dtype)
            want = reference(t.clone(), R.SUM)
            dist.all_reduce(t)
            tol = {torch.float32: 1e-5, torch.float64: 1e-12}.get(dtype, 1e-2)
            check(f"all_reduce {dtype} random normals",
                  torch.allclose(t.double(), want.double(), rtol=tol, atol=tol))
        for n in COUNTS:
            root = n % world
            t = values(n, dtype, rank, salt=1)
            want = values(n, dtype, root, salt=1)
            dist.broadcast(t, src=root)
            check(f"broadcast {dtype} {n} from {root}", same(t, want))

            t = values(n, dtype, rank, salt=2)
            want = reference(t.clone(), R.SUM)
            dist.reduce(t, dst=root)
            if rank == root:
                check(f"reduce {dtype} {n} to {root}", same(t, want))

            t = values(n, dtype, rank, salt=3)
            outs = [torch.zeros(n, dtype=dtype) for _ in range(world)]
            dist.all_gather(outs, t)
            check(f"all_gather {dtype} {n}",
                  all(same(outs[r], values(n, dtype, r, salt=3)) for r in range(world)))
            flat = torch.zeros(n * world, dtype=dtype)
            dist._all_gather_base(flat, t)
            check(f"_all_gather_base {dtype} {n}",
                  same(flat, torch.cat([values(n, dtype, r, salt=3) for r in range(world)])))

            for op in ops_for(dtype):
                full = values(n * world, dtype, rank, salt=4)
                want = reference(full.clone(), op)[rank * n:(rank + 1) * n]
                out = torch.zeros(n, dtype=dtype)
                dist.reduce_scatter(out, list(full.chunk(world)), op=op)
                check(f"reduce_scatter {dtype} {op} {n}", same(out, want))
                out = torch.zeros(n, dtype=dtype)
                dist._reduce_scatter_base(out, full.clone(), op=op)
                check(f"_reduce_scatter_base {dtype} {op} {n}", same(out, want))
    dist.barrier()
    check("barrier", True)

    # async: 16 all-reduces in flight at once, the caller computing while
    # they progress, completed latest first
    before = inca_torch.stats()
    ts = [values(1000 + 4000 * k, torch.float32, rank, salt=k) for k in range(16)]
    wants = [reference(t.clone(), R.SUM) for t in ts]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    busy = torch.ones(200, 200)
    for _ in range(20):
        busy = busy @ busy / 200
    for w in reversed(works):
        w.wait()
    check("16 async all-reduces, waited latest first, all exact",
          all(same(t, w) for t, w in zip(ts, wants)))
    after = inca_torch.stats()
    check("... all 16 offloaded", after["inca.allreduce"] - before["inca.allreduce"] == 16)
    futs = [dist.all_reduce(values(300, torch.int64, rank), async_op=True).get_future()
            for _ in range(4)]
    torch.futures.wait_all(futs)
    check("futures of async all-reduces complete without wait()",
          all(same(f.value()[0], reference(values(300, torch.int64, rank), R.SUM))
              for f in futs))

    # delegated to gloo (logged once per kind)
    t = values(100, torch.uint8, rank)
    want = t.clone()
    dist.all_reduce(want, group=gloo)
    dist.all_reduce(t)
    check("all_reduce of uint8 goes to gloo, right result", same(t, want))
    g = [torch.zeros(3, dtype=torch.int64) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.full((3,), rank, dtype=torch.int64), g, dst=0)
    if rank == 0:
        check("gather goes to gloo, right result",
              all(same(g[r], torch.full((3,), r, dtype=torch.int64)) for r in range(world)))
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    check("all_gather_object works", objs == [{"rank": r} for r in range(world)])

    # bad input: a clear error, never a crash
    def raises(what, fn, text):
        try:
            fn()
        except (RuntimeError, ValueError) as e:
            check(f"{what}: error says '{text}' ({str(e).splitlines()[0][:100]})",
                  text in str(e))
            return
        check(f"{what}: raised", False)
    raises("non-contiguous tensor", lambda: dist.all_reduce(torch.ones(4, 4).t()), "contiguous")
    # (this CPU-only torch's dispatcher refuses other devices before the
    # group sees them; with CUDA the group says "must be on the CPU")
    raises("tensor not on the CPU", lambda: dist.all_reduce(torch.ones(4, device="meta")),
           "allreduce")
    raises("bitwise op on floats", lambda: dist.all_reduce(torch.ones(4), op=R.BAND),
           "integer tensors only")
    raises("allgather output of the wrong size",
           lambda: dist._all_gather_base(torch.zeros(5), torch.ones(2)), "must hold")
    # the group still works after the errors
    t = values(10, torch.int32, rank)
    want = reference(t.clone(), R.SUM)
    dist.all_reduce(t)
    check("the group works after bad input", same(t, want))

    s = inca_torch.stats()
    if os.environ.get("INCA_FALLBACK") != "force":
        check("nothing fell back to the ring", s.get("fallbacks", -1) == 0)
    print(f"pytorch_ops rank {rank}: " + " ".join(
        f"{k}={int(v)}" for k, v in sorted(s.items())), file=sys.stderr, flush=True)
    print(f"pytorch_ops rank {rank}: {passed} passed, {failed} failed", flush=True)
    dist.barrier(group=gloo)
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
