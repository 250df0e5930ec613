! SPDX-License-Identifier: BSD-3-Clause
! An ordinary Fortran 90 MPI program (use mpi) that checks the collectives
! libinca-mpi intercepts, element by element: run with and without the
! library preloaded, it must pass the same way. On MPI_COMM_WORLD and a
! split: all-reduce (real, double precision, integer, integer*8; sum, max,
! min, bxor; in place and not), reduce to the first and the last rank (in
! place at the root), reduce-scatter (block, and equal counts), allgather
! (in place and not), bcast, barrier, and the nonblocking forms completed
! by mpi_wait, mpi_test, mpi_waitall, mpi_testall and mpi_waitany.
! Prints "mpi-check-f: N passed, M failed" (rank 0); exits 1 on failure.
! Built with -cpp; with -DF08 the same program uses the mpi_f08 module
! (handles of TYPE(MPI_Comm) and TYPE(MPI_Request)) and prints
! "mpi-check-f08: ...".
#ifdef F08
#define COMM_T type(MPI_Comm)
#define REQUEST_T type(MPI_Request)
#define NAME 'mpi-check-f08: '
#else
#define COMM_T integer
#define REQUEST_T integer
#define NAME 'mpi-check-f: '
#endif
program mpi_check_f
#ifdef F08
  use mpi_f08
#else
  use mpi
#endif
  implicit none
  integer :: ierr, wrank, wsize, s
  COMM_T :: split
  integer :: counts(3) = (/ 1, 1000, 300000 /)
  integer :: passed = 0, failed = 0, tot(2), mine(2)

  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, wrank, ierr)
  call mpi_comm_size(MPI_COMM_WORLD, wsize, ierr)
  call mpi_comm_split(MPI_COMM_WORLD, mod(wrank, 2), wsize - wrank, split, ierr)
  do s = 1, 3
    call cases(MPI_COMM_WORLD, 'world', counts(s))
    call cases(split, 'split', counts(s))
  end do
  call mpi_comm_free(split, ierr)
  mine = (/ passed, failed /)
  call mpi_reduce(mine, tot, 2, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (wrank == 0) print '(a,i0,a,i0,a)', NAME, tot(1), ' passed, ', tot(2), ' failed'
  call mpi_bcast(tot, 2, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call mpi_finalize(ierr)
  if (tot(2) /= 0) stop 1

contains

  subroutine check(ok, what, comm_name, n)
    logical, intent(in) :: ok
    character(*), intent(in) :: what, comm_name
    integer, intent(in) :: n
    if (ok) then
      passed = passed + 1
    else
      failed = failed + 1
      print '(a,i0,a,a,a,a,a,i0)', 'rank ', wrank, ': FAIL: ', comm_name, ' ', what, ' x ', n
    end if
  end subroutine check

  ! rank r's element i: a small integer, exact in any order
  integer function v(r, i, seed)
    integer, intent(in) :: r, i, seed
    v = mod(r * 7 + i * 3 + seed * 5, 11) - 5
  end function v

  subroutine cases(comm, cname, n)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: n
    character(*), intent(in) :: cname
    real, allocatable :: a(:), b(:), want(:)
    double precision, allocatable :: d(:), e(:)
    integer, allocatable :: ia(:), ib(:), g(:), rc(:)
    integer(kind=8), allocatable :: la(:), lb(:)
    integer :: rank, size, i, r, root, idx, bad, blk
    REQUEST_T :: req, reqs(3)
    logical :: done

    call mpi_comm_rank(comm, rank, ierr)
    call mpi_comm_size(comm, size, ierr)
    allocate(a(n * size), b(n * size), want(n * size), d(n), e(n), ia(n), ib(n), la(n), lb(n))
    allocate(g(n * size), rc(size))
    ! want(i) = sum over ranks of v(r, i, 1)
    want = 0
    do r = 0, size - 1
      do i = 1, n * size
        want(i) = want(i) + real(v(r, i, 1))
      end do
    end do

    ! all-reduce, real sum, not in place, then in place
    do i = 1, n
      a(i) = real(v(rank, i, 1))
    end do
    call mpi_allreduce(a, b, n, MPI_REAL, MPI_SUM, comm, ierr)
    call check(ierr == 0 .and. all(b(1:n) == want(1:n)), 'allreduce real sum', cname, n)
    b(1:n) = a(1:n)
    call mpi_allreduce(MPI_IN_PLACE, b, n, MPI_REAL, MPI_SUM, comm, ierr)
    call check(ierr == 0 .and. all(b(1:n) == want(1:n)), 'allreduce real sum in place', cname, n)
    ! double precision max, integer bxor, integer*8 sum
    do i = 1, n
      d(i) = dble(v(rank, i, 2))
      ia(i) = v(rank, i, 3) * 1000 + rank
      la(i) = int(v(rank, i, 4), 8) * 3000000000_8
    end do
    call mpi_allreduce(d, e, n, MPI_DOUBLE_PRECISION, MPI_MAX, comm, ierr)
    bad = 0
    do i = 1, n
      if (e(i) /= dble(maxval((/ (v(r, i, 2), r = 0, size - 1) /)))) bad = bad + 1
    end do
    call check(ierr == 0 .and. bad == 0, 'allreduce double max', cname, n)
    call mpi_allreduce(ia, ib, n, MPI_INTEGER, MPI_BXOR, comm, ierr)
    bad = 0
    do i = 1, n
      r = 0
      do idx = 0, size - 1
        r = ieor(r, v(idx, i, 3) * 1000 + idx)
      end do
      if (ib(i) /= r) bad = bad + 1
    end do
    call check(ierr == 0 .and. bad == 0, 'allreduce integer bxor', cname, n)
    call mpi_allreduce(la, lb, n, MPI_INTEGER8, MPI_SUM, comm, ierr)
    bad = 0
    do i = 1, n
      if (lb(i) /= sum((/ (int(v(r, i, 4), 8) * 3000000000_8, r = 0, size - 1) /))) bad = bad + 1
    end do
    call check(ierr == 0 .and. bad == 0, 'allreduce integer*8 sum', cname, n)

    ! reduce to the first and the last rank, in place at the root
    do root = 0, size - 1, max(size - 1, 1)
      do i = 1, n
        a(i) = real(v(rank, i, 1))
      end do
      b(1:n) = -99
      if (rank == root) then
        b(1:n) = a(1:n)
        call mpi_reduce(MPI_IN_PLACE, b, n, MPI_REAL, MPI_SUM, root, comm, ierr)
      else
        call mpi_reduce(a, b, n, MPI_REAL, MPI_SUM, root, comm, ierr)
      end if
      call check(ierr == 0 .and. (rank /= root .or. all(b(1:n) == want(1:n))), &
                 'reduce real sum', cname, n)
    end do

    ! reduce-scatter: rank r gets elements r*n+1 .. r*n+n
    do i = 1, n * size
      a(i) = real(v(rank, i, 1))
    end do
    call mpi_reduce_scatter_block(a, b, n, MPI_REAL, MPI_SUM, comm, ierr)
    call check(ierr == 0 .and. all(b(1:n) == want(rank * n + 1:rank * n + n)), &
               'reduce_scatter_block', cname, n)
    rc(1:size) = n
    b(1:n * size) = a(1:n * size)
    call mpi_reduce_scatter(MPI_IN_PLACE, b, rc, MPI_REAL, MPI_SUM, comm, ierr)
    call check(ierr == 0 .and. all(b(1:n) == want(rank * n + 1:rank * n + n)), &
               'reduce_scatter in place', cname, n)

    ! allgather, not in place and in place
    blk = n
    do i = 1, blk
      ia(i) = rank * 100000 + i
    end do
    g = -1
    call mpi_allgather(ia, blk, MPI_INTEGER, g, blk, MPI_INTEGER, comm, ierr)
    bad = 0
    do r = 0, size - 1
      do i = 1, blk
        if (g(r * blk + i) /= r * 100000 + i) bad = bad + 1
      end do
    end do
    call check(ierr == 0 .and. bad == 0, 'allgather', cname, n)
    g = -1
    g(rank * blk + 1:rank * blk + blk) = ia(1:blk)
    call mpi_allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g, blk, MPI_INTEGER, comm, ierr)
    bad = 0
    do r = 0, size - 1
      do i = 1, blk
        if (g(r * blk + i) /= r * 100000 + i) bad = bad + 1
      end do
    end do
    call check(ierr == 0 .and. bad == 0, 'allgather in place', cname, n)

    ! bcast from the last rank, barrier
    do i = 1, n
      d(i) = merge(dble(i) * 0.5d0, -1d0, rank == size - 1)
    end do
    call mpi_bcast(d, n, MPI_DOUBLE_PRECISION, size - 1, comm, ierr)
    call check(ierr == 0 .and. all(d == (/ (dble(i) * 0.5d0, i = 1, n) /)), 'bcast double', cname, n)
    call mpi_barrier(comm, ierr)
    call check(ierr == 0, 'barrier', cname, n)

    ! nonblocking: iallreduce + mpi_wait
    do i = 1, n
      a(i) = real(v(rank, i, 1))
    end do
    call mpi_iallreduce(a, b, n, MPI_REAL, MPI_SUM, comm, req, ierr)
    call mpi_wait(req, MPI_STATUS_IGNORE, ierr)
    call check(ierr == 0 .and. all(b(1:n) == want(1:n)) .and. req == MPI_REQUEST_NULL, &
               'iallreduce + wait', cname, n)
    ! ireduce + an mpi_test loop
    call mpi_ireduce(a, b, n, MPI_REAL, MPI_SUM, 0, comm, req, ierr)
    done = .false.
    do while (.not. done)
      call mpi_test(req, done, MPI_STATUS_IGNORE, ierr)
    end do
    call check(ierr == 0 .and. (rank /= 0 .or. all(b(1:n) == want(1:n))), 'ireduce + test', cname, n)
    ! iallgather and ibcast + mpi_waitall
    g = -1
    d = merge(3d0, 0d0, rank == 0)
    call mpi_iallgather(ia, blk, MPI_INTEGER, g, blk, MPI_INTEGER, comm, reqs(1), ierr)
    call mpi_ibcast(d, n, MPI_DOUBLE_PRECISION, 0, comm, reqs(2), ierr)
    call mpi_waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
    bad = 0
    do r = 0, size - 1
      do i = 1, blk
        if (g(r * blk + i) /= r * 100000 + i) bad = bad + 1
      end do
    end do
    call check(ierr == 0 .and. bad == 0 .and. all(d == 3d0), 'iallgather + ibcast + waitall', cname, n)
    ! ireduce_scatter_block + an mpi_testall loop, ibarrier + mpi_waitany
    do i = 1, n * size
      a(i) = real(v(rank, i, 1))
    end do
    call mpi_ireduce_scatter_block(a, b, n, MPI_REAL, MPI_SUM, comm, reqs(1), ierr)
    done = .false.
    do while (.not. done)
      call mpi_testall(1, reqs, done, MPI_STATUSES_IGNORE, ierr)
    end do
    call check(ierr == 0 .and. all(b(1:n) == want(rank * n + 1:rank * n + n)), &
               'ireduce_scatter_block + testall', cname, n)
    call mpi_ibarrier(comm, reqs(1), ierr)
    call mpi_waitany(1, reqs, idx, MPI_STATUS_IGNORE, ierr)
    call check(ierr == 0 .and. idx == 1, 'ibarrier + waitany', cname, n)
    deallocate(a, b, want, d, e, ia, ib, la, lb, g, rc)
  end subroutine cases

end program mpi_check_f
