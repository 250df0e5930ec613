# SPDX-License-Identifier: BSD-3-Clause
"""pytorch_compare.py A B [--exact]: two saved state dicts (ddp_train.py
--out) agree: every tensor within 1e-5 relative (max |a - b| / max |b|),
or bit-identical with --exact. Prints the largest relative difference."""
import sys

import torch

a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
exact = "--exact" in sys.argv[3:]
worst, same = 0.0, True
for k in b:
    x, y = a[k].double(), b[k].double()
    same = same and torch.equal(a[k], b[k])
    worst = max(worst, ((x - y).abs().max() / y.abs().max().clamp(min=1e-30)).item())
print(f"largest relative difference {worst:.3g}, bit-identical: {same}")
sys.exit(0 if (same if exact else worst <= 1e-5) else 1)
