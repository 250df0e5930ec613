#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# An ordinary mpi4py program that checks Allreduce element by element (run it
# with /usr/bin/python3: Debian's mpi4py and numpy): COMM_WORLD, a dup and a
# split, in place and not, float32/float64/int32/int64 x sum/min/max/prod and
# the bitwise ops on integers, 1 element to --max bytes; a MINLOC (passes
# through libinca-mpi) and an Iallreduce. Prints "mpi-check.py: N passed, M
# failed" on rank 0 and exits 1 on failure.
import argparse
import sys

import numpy as np
from mpi4py import MPI

ap = argparse.ArgumentParser()
ap.add_argument("--max", type=int, default=16 << 20, help="largest all-reduce in bytes")
args = ap.parse_args()

world = MPI.COMM_WORLD
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"rank {world.rank}: FAIL: {what}", file=sys.stderr, flush=True)


def contribution(rank, n, dtype, op, seed):
    rng = np.random.default_rng(seed * 1000 + rank)
    if op == MPI.PROD:
        if np.issubdtype(dtype, np.floating):
            return rng.choice(np.array([-2, -1, 1, 2], dtype=dtype), n)
        return rng.integers(0, 256, n).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        return rng.integers(-100, 101, n).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


# (op, name, numpy reference): mpi4py's Op objects are not hashable
OPS = [(MPI.SUM, "sum", np.add), (MPI.MIN, "min", np.minimum), (MPI.MAX, "max", np.maximum),
       (MPI.PROD, "prod", np.multiply), (MPI.BAND, "band", np.bitwise_and),
       (MPI.BOR, "bor", np.bitwise_or), (MPI.BXOR, "bxor", np.bitwise_xor)]


def ref(op):
    return next((name, fn) for o, name, fn in OPS if o == op)


def one(comm, cname, dtype, op, n, in_place, seed):
    name, fn = ref(op)
    mine = contribution(comm.rank, n, dtype, op, seed)
    with np.errstate(over="ignore"):
        want = contribution(0, n, dtype, op, seed)
        for r in range(1, comm.size):
            want = fn(want, contribution(r, n, dtype, op, seed)).astype(dtype)
    if in_place:
        out = mine.copy()
        comm.Allreduce(MPI.IN_PLACE, out, op=op)
    else:
        out = np.empty_like(mine)
        comm.Allreduce(mine, out, op=op)
    wrong = int(np.count_nonzero(out != want))
    check(wrong == 0, f"{cname} {np.dtype(dtype).name} {name} x {n}"
          f"{' in place' if in_place else ''}: {wrong} wrong")


def matrix(comm, cname, max_bytes, seed):
    for dtype in (np.float32, np.float64, np.int32, np.int64):
        ops = [MPI.SUM, MPI.MIN, MPI.MAX, MPI.PROD]
        if np.issubdtype(dtype, np.integer):
            ops += [MPI.BAND, MPI.BOR, MPI.BXOR]
        for op in ops:
            for i, n in enumerate((1, 5, 1000)):
                seed += 1
                one(comm, cname, dtype, op, n, i % 2 == 1, seed)
    b = 65536
    while b <= max_bytes:
        seed += 1
        one(comm, cname, np.float32, MPI.SUM, b // 4, False, seed)
        b *= 16
    seed += 1
    one(comm, cname, np.int64, MPI.BXOR, max_bytes // 8, True, seed)
    return seed


seed = 0
dup = world.Dup()
split = world.Split(world.rank % 2, world.rank)
seed = matrix(world, "world", args.max, seed)
seed = matrix(dup, "dup", args.max // 16, seed)
seed = matrix(split, "split", args.max // 16, seed)

# MINLOC passes through: (value, index) pairs
val = np.array([(world.rank * 5 + i) % world.size for i in range(4)], dtype=np.float64)
pairs = [(float(v), world.rank) for v in val]
got = world.allreduce(pairs[0], op=MPI.MINLOC)
check(tuple(got) == (0.0, 0), f"MINLOC: {got}")   # rank 0 holds the minimum, 0

# Iallreduce overlapped with work
x = contribution(world.rank, 100000, np.float32, MPI.SUM, 999)
y = np.empty_like(x)
req = world.Iallreduce(x, y, op=MPI.SUM)
acc = float(np.sum(np.sqrt(np.arange(200000, dtype=np.float64))))
req.Wait()
want = sum(contribution(r, 100000, np.float32, MPI.SUM, 999) for r in range(world.size))
check(int(np.count_nonzero(y != want.astype(np.float32))) == 0 and acc > 0, "Iallreduce")

dup.Free()
split.Free()
tot = world.reduce(np.array([passed, failed]), op=MPI.SUM, root=0)
if world.rank == 0:
    print(f"mpi-check.py: {tot[0]} passed, {tot[1]} failed", flush=True)
bad = world.bcast(int(tot[1]) if world.rank == 0 else None, root=0)
sys.exit(1 if bad else 0)
