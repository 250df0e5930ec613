#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Run mpi4py's own collective tests (tests/mpi/mpi4py-tests, vendored
from mpi4py 3.1.4) on every rank of an MPI job and print, from rank 0, one
line per test with its worst outcome over the ranks ("ok", "skip",
"fail", "error"), then "mpi4py-suite: N tests: P ok, S skipped, F failed,
E errors". Run it the same way with and without libinca-mpi and compare
the lists (tests/func/mpi_suite.sh).
Usage: mpirun ... /usr/bin/python3 run_mpi4py_suite.py [MODULE ...]
"""
import os
import sys
import unittest

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'mpi4py-tests')
sys.path.insert(0, HERE)

from mpi4py import MPI  # noqa: E402

MODULES = ['test_cco_buf', 'test_cco_nb_buf', 'test_cco_vec', 'test_cco_nb_vec',
           'test_cco_obj']
RANK = {'ok': 0, 'skip': 1, 'fail': 2, 'error': 3}


class Outcomes(unittest.TestResult):
    """Every test's outcome on this rank, by its id."""

    def __init__(self):
        super().__init__()
        self.outcomes = {}

    def _set(self, test, what):
        tid = test.id()
        if RANK[what] >= RANK.get(self.outcomes.get(tid, 'ok'), 0):
            self.outcomes[tid] = what

    def addSuccess(self, test):
        self.outcomes.setdefault(test.id(), 'ok')

    def addSkip(self, test, reason):
        self._set(test, 'skip')

    def addFailure(self, test, err):
        self._set(test, 'fail')
        sys.stderr.write('rank %d: FAIL %s: %s\n' % (MPI.COMM_WORLD.Get_rank(), test.id(),
                                                     self._exc_info_to_string(err, test)))

    def addError(self, test, err):
        self._set(test, 'error')
        sys.stderr.write('rank %d: ERROR %s: %s\n' % (MPI.COMM_WORLD.Get_rank(), test.id(),
                                                      self._exc_info_to_string(err, test)))

    def addSubTest(self, test, subtest, err):
        if err is not None:
            bad = issubclass(err[0], test.failureException)
            self._set(test, 'fail' if bad else 'error')
            sys.stderr.write('rank %d: subtest %s: %s\n' % (
                MPI.COMM_WORLD.Get_rank(), subtest, self._exc_info_to_string(err, test)))


def main():
    names = sys.argv[1:] or MODULES
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromName(n) for n in names)
    result = Outcomes()
    suite.run(result)
    world = MPI.COMM_WORLD
    every = world.gather(result.outcomes, root=0)
    if world.Get_rank() != 0:
        return 0
    merged = {}
    for outcomes in every:
        for tid, what in outcomes.items():
            if RANK[what] >= RANK.get(merged.get(tid, 'ok'), 0):
                merged[tid] = what
    count = {k: 0 for k in RANK}
    for tid in sorted(merged):
        print('%-5s %s' % (merged[tid], tid))
        count[merged[tid]] += 1
    print('mpi4py-suite: %d tests: %d ok, %d skipped, %d failed, %d errors'
          % (len(merged), count['ok'], count['skip'], count['fail'], count['error']))
    sys.stdout.flush()
    return 0


if __name__ == '__main__':
    sys.exit(main())
