/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Fortran entry points (mpif.h and `use mpi`): Open MPI's Fortran layer
 * sends mpi_allreduce_ and the rest straight to PMPI_*, so a C-only
 * interposer would never see a Fortran program's collectives. These take
 * the Fortran call, convert handles (MPI_*_f2c) and the MPI_IN_PLACE and
 * MPI_BOTTOM sentinels, and make the C call this library intercepts. The
 * MPI_Wait/MPI_Test families and MPI_Request_free progress (and recover)
 * this library's requests first, then call MPI's own Fortran routine,
 * which converts statuses, flags and indices. Each routine answers to
 * the four manglings compilers use (mpi_x_, mpi_x__, mpi_x, MPI_X).
 */
#include <dlfcn.h>
#include <stdlib.h>

#include "im_priv.h"

/* called from Fortran: no C header declares them */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

_Static_assert(sizeof(MPI_Fint) == sizeof(int), "MPI_Fint arrays are passed as int arrays");

/* name_ is defined here; name, name__ and NAME call it too */
#define F_ALIASES(name, NAME)                                                          \
	extern __typeof__(name##_) name __attribute__((alias(#name "_")));             \
	extern __typeof__(name##_) name##__ __attribute__((alias(#name "_")));         \
	extern __typeof__(name##_) NAME __attribute__((alias(#name "_")))

/* ---- Fortran's sentinels: addresses of MPI's common blocks ---- */

static void *in_place_at[4], *bottom_at[4];
static bool sentinels_found;

static void find_sentinels(void)
{
	static const char *const in_place[4] = { "mpi_fortran_in_place_", "mpi_fortran_in_place",
						 "mpi_fortran_in_place__", "MPI_FORTRAN_IN_PLACE" };
	static const char *const bottom[4] = { "mpi_fortran_bottom_", "mpi_fortran_bottom",
					       "mpi_fortran_bottom__", "MPI_FORTRAN_BOTTOM" };

	for (int i = 0; i < 4; i++) {
		in_place_at[i] = dlsym(RTLD_DEFAULT, in_place[i]);
		bottom_at[i] = dlsym(RTLD_DEFAULT, bottom[i]);
	}
	sentinels_found = true;
}

/* A Fortran buffer argument as C sees it. */
static void *cbuf(const void *p)
{
	if (!sentinels_found)
		find_sentinels();
	for (int i = 0; i < 4; i++) {
		if (p && p == in_place_at[i])
			return MPI_IN_PLACE;
		if (p && p == bottom_at[i])
			return MPI_BOTTOM;
	}
	return (void *)p;
}

/* ---- start-up, communicators ---- */

void mpi_init_(MPI_Fint *ierr)
{
	int argc = 0;
	char **argv = NULL;

	*ierr = MPI_Init(&argc, &argv);
}
F_ALIASES(mpi_init, MPI_INIT);

void mpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
	int argc = 0, prov = 0;
	char **argv = NULL;

	*ierr = MPI_Init_thread(&argc, &argv, *required, &prov);
	*provided = prov;
}
F_ALIASES(mpi_init_thread, MPI_INIT_THREAD);

void mpi_finalize_(MPI_Fint *ierr)
{
	*ierr = MPI_Finalize();
}
F_ALIASES(mpi_finalize, MPI_FINALIZE);

void mpi_comm_free_(MPI_Fint *comm, MPI_Fint *ierr)
{
	MPI_Comm c = PMPI_Comm_f2c(*comm);

	*ierr = MPI_Comm_free(&c);
	if (*ierr == MPI_SUCCESS)
		*comm = PMPI_Comm_c2f(c);
}
F_ALIASES(mpi_comm_free, MPI_COMM_FREE);

/* ---- collectives ---- */

#define COMM(f) PMPI_Comm_f2c(*(f))
#define TYPE(f) PMPI_Type_f2c(*(f))
#define OP(f) PMPI_Op_f2c(*(f))

/* a nonblocking call's request back to Fortran (call: the C call, which
 * sets r) */
#define SET_REQUEST(call)                                                              \
	do {                                                                           \
		MPI_Request r;                                                         \
		*ierr = (call);                                                        \
		if (*ierr == MPI_SUCCESS)                                              \
			*request = PMPI_Request_c2f(r);                                \
	} while (0)

void mpi_allreduce_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type,
		    MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
	*ierr = MPI_Allreduce(cbuf(sendbuf), cbuf(recvbuf), *count, TYPE(type), OP(op), COMM(comm));
}
F_ALIASES(mpi_allreduce, MPI_ALLREDUCE);

void mpi_iallreduce_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type,
		     MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
	SET_REQUEST(MPI_Iallreduce(cbuf(sendbuf), cbuf(recvbuf), *count, TYPE(type), OP(op),
					 COMM(comm), &r));
}
F_ALIASES(mpi_iallreduce, MPI_IALLREDUCE);

void mpi_reduce_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type,
		 MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
{
	*ierr = MPI_Reduce(cbuf(sendbuf), cbuf(recvbuf), *count, TYPE(type), OP(op), *root,
			   COMM(comm));
}
F_ALIASES(mpi_reduce, MPI_REDUCE);

void mpi_ireduce_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type,
		  MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
	SET_REQUEST(MPI_Ireduce(cbuf(sendbuf), cbuf(recvbuf), *count, TYPE(type), OP(op),
				      *root, COMM(comm), &r));
}
F_ALIASES(mpi_ireduce, MPI_IREDUCE);

void mpi_reduce_scatter_block_(const void *sendbuf, void *recvbuf, MPI_Fint *rcount,
			       MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
	*ierr = MPI_Reduce_scatter_block(cbuf(sendbuf), cbuf(recvbuf), *rcount, TYPE(type), OP(op),
					 COMM(comm));
}
F_ALIASES(mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK);

void mpi_ireduce_scatter_block_(const void *sendbuf, void *recvbuf, MPI_Fint *rcount,
				MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request,
				MPI_Fint *ierr)
{
	SET_REQUEST(MPI_Ireduce_scatter_block(cbuf(sendbuf), cbuf(recvbuf), *rcount,
						    TYPE(type), OP(op), COMM(comm), &r));
}
F_ALIASES(mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK);

void mpi_reduce_scatter_(const void *sendbuf, void *recvbuf, MPI_Fint *counts, MPI_Fint *type,
			 MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
	*ierr = MPI_Reduce_scatter(cbuf(sendbuf), cbuf(recvbuf), (const int *)counts, TYPE(type),
				   OP(op), COMM(comm));
}
F_ALIASES(mpi_reduce_scatter, MPI_REDUCE_SCATTER);

void mpi_ireduce_scatter_(const void *sendbuf, void *recvbuf, MPI_Fint *counts, MPI_Fint *type,
			  MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
	SET_REQUEST(MPI_Ireduce_scatter(cbuf(sendbuf), cbuf(recvbuf), (const int *)counts,
					      TYPE(type), OP(op), COMM(comm), &r));
}
F_ALIASES(mpi_ireduce_scatter, MPI_IREDUCE_SCATTER);

void mpi_allgather_(const void *sendbuf, MPI_Fint *scount, MPI_Fint *stype, void *recvbuf,
		    MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr)
{
	*ierr = MPI_Allgather(cbuf(sendbuf), *scount, TYPE(stype), cbuf(recvbuf), *rcount,
			      TYPE(rtype), COMM(comm));
}
F_ALIASES(mpi_allgather, MPI_ALLGATHER);

void mpi_iallgather_(const void *sendbuf, MPI_Fint *scount, MPI_Fint *stype, void *recvbuf,
		     MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *request,
		     MPI_Fint *ierr)
{
	SET_REQUEST(MPI_Iallgather(cbuf(sendbuf), *scount, TYPE(stype), cbuf(recvbuf),
					 *rcount, TYPE(rtype), COMM(comm), &r));
}
F_ALIASES(mpi_iallgather, MPI_IALLGATHER);

void mpi_bcast_(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm,
		MPI_Fint *ierr)
{
	*ierr = MPI_Bcast(cbuf(buf), *count, TYPE(type), *root, COMM(comm));
}
F_ALIASES(mpi_bcast, MPI_BCAST);

void mpi_ibcast_(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm,
		 MPI_Fint *request, MPI_Fint *ierr)
{
	SET_REQUEST(MPI_Ibcast(cbuf(buf), *count, TYPE(type), *root, COMM(comm), &r));
}
F_ALIASES(mpi_ibcast, MPI_IBCAST);

void mpi_barrier_(MPI_Fint *comm, MPI_Fint *ierr)
{
	*ierr = MPI_Barrier(COMM(comm));
}
F_ALIASES(mpi_barrier, MPI_BARRIER);

void mpi_ibarrier_(MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
	SET_REQUEST(MPI_Ibarrier(COMM(comm), &r));
}
F_ALIASES(mpi_ibarrier, MPI_IBARRIER);

/* ---- completion: ours first, then MPI's own Fortran routine ---- */

/* MPI's own Fortran routine name (Open MPI: every mangling is the same
 * function); NULL when there is none */
static void *next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

/* The C requests of n Fortran ones, or NULL when none is ours (or no
 * memory: then MPI alone completes them, as without this library). */
static MPI_Request *ours(int n, const MPI_Fint *freqs)
{
	MPI_Request *c;

	if (n <= 0 || !freqs)
		return NULL;
	c = malloc(sizeof(*c) * (size_t)n);
	if (!c)
		return NULL;
	for (int i = 0; i < n; i++)
		c[i] = PMPI_Request_f2c(freqs[i]);
	if (!im_any_ours(n, c)) {
		free(c);
		return NULL;
	}
	return c;
}

/* complete every one of ours among freqs (wait) or progress them (test) */
static void drive_all(int n, const MPI_Fint *freqs, bool wait)
{
	MPI_Request *c = ours(n, freqs);

	if (!c)
		return;
	if (wait)
		while (im_drive(n, c, 1000) > 0)
			im_poke();
	else
		im_drive(n, c, 0);
	free(c);
}

typedef void (*f_free_t)(MPI_Fint *, MPI_Fint *);
typedef void (*f_wait_t)(MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*f_test_t)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*f_many_t)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*f_test_many_t)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*f_any_t)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*f_test_any_t)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
			     MPI_Fint *);

#define NEXT(var, type, name)                                                          \
	static type var;                                                               \
	if (!var && !(var = (type)next(name))) {                                       \
		*ierr = MPI_ERR_INTERN;                                                \
		return;                                                                \
	}

void mpi_wait_(MPI_Fint *request, MPI_Fint *status, MPI_Fint *ierr)
{
	NEXT(real, f_wait_t, "mpi_wait_");
	drive_all(1, request, true);
	real(request, status, ierr);
}
F_ALIASES(mpi_wait, MPI_WAIT);

void mpi_test_(MPI_Fint *request, MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierr)
{
	NEXT(real, f_test_t, "mpi_test_");
	drive_all(1, request, false);
	real(request, flag, status, ierr);
}
F_ALIASES(mpi_test, MPI_TEST);

void mpi_waitall_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *statuses, MPI_Fint *ierr)
{
	NEXT(real, f_many_t, "mpi_waitall_");
	drive_all(*count, requests, true);
	real(count, requests, statuses, ierr);
}
F_ALIASES(mpi_waitall, MPI_WAITALL);

void mpi_testall_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *flag, MPI_Fint *statuses,
		  MPI_Fint *ierr)
{
	NEXT(real, f_test_many_t, "mpi_testall_");
	drive_all(*count, requests, false);
	real(count, requests, flag, statuses, ierr);
}
F_ALIASES(mpi_testall, MPI_TESTALL);

void mpi_testany_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *flag,
		  MPI_Fint *status, MPI_Fint *ierr)
{
	NEXT(real, f_test_any_t, "mpi_testany_");
	drive_all(*count, requests, false);
	real(count, requests, index, flag, status, ierr);
}
F_ALIASES(mpi_testany, MPI_TESTANY);

/* MPI_Waitany over ours and MPI's: MPI's own (real) when none is ours,
 * else testany (which progresses ours first) until one completes */
static void waitany(f_any_t real, f_test_any_t testany, MPI_Fint *count, MPI_Fint *requests,
		    MPI_Fint *index, MPI_Fint *status, MPI_Fint *ierr)
{
	MPI_Request *c = ours(*count, requests);
	MPI_Fint flag = 0;

	if (!c) {
		real(count, requests, index, status, ierr);
		return;
	}
	free(c);
	do
		testany(count, requests, index, &flag, status, ierr);
	while (*ierr == MPI_SUCCESS && !flag);
}

/* MPI_Waitsome the same way, with testsome */
static void waitsome(f_test_any_t real, f_test_any_t testsome, MPI_Fint *count,
		     MPI_Fint *requests, MPI_Fint *outcount, MPI_Fint *indices,
		     MPI_Fint *statuses, MPI_Fint *ierr)
{
	MPI_Request *c = ours(*count, requests);

	if (!c) {
		real(count, requests, outcount, indices, statuses, ierr);
		return;
	}
	free(c);
	do
		testsome(count, requests, outcount, indices, statuses, ierr);
	while (*ierr == MPI_SUCCESS && *outcount == 0);
}

void mpi_waitany_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *status,
		  MPI_Fint *ierr)
{
	NEXT(real, f_any_t, "mpi_waitany_");
	waitany(real, mpi_testany_, count, requests, index, status, ierr);
}
F_ALIASES(mpi_waitany, MPI_WAITANY);

void mpi_testsome_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *outcount, MPI_Fint *indices,
		   MPI_Fint *statuses, MPI_Fint *ierr)
{
	NEXT(real, f_test_any_t, "mpi_testsome_");
	drive_all(*count, requests, false);
	real(count, requests, outcount, indices, statuses, ierr);
}
F_ALIASES(mpi_testsome, MPI_TESTSOME);

void mpi_waitsome_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *outcount, MPI_Fint *indices,
		   MPI_Fint *statuses, MPI_Fint *ierr)
{
	NEXT(real, f_test_any_t, "mpi_waitsome_");
	waitsome(real, mpi_testsome_, count, requests, outcount, indices, statuses, ierr);
}
F_ALIASES(mpi_waitsome, MPI_WAITSOME);

void mpi_request_free_(MPI_Fint *request, MPI_Fint *ierr)
{
	if (im_request_free(PMPI_Request_f2c(*request))) {
		*request = PMPI_Request_c2f(MPI_REQUEST_NULL);
		*ierr = MPI_SUCCESS;
		return;
	}
	NEXT(real, f_free_t, "mpi_request_free_");
	real(request, ierr);
}
F_ALIASES(mpi_request_free, MPI_REQUEST_FREE);

/* ---- `use mpi_f08` ----
 *
 * Open MPI's mpi_f08 module binds MPI_Allreduce and the rest to routines of
 * its own (mpi_allreduce_f08_, ...), which call the mpif.h layer's C
 * functions and so PMPI_* again. Their arguments are those of the mpif.h
 * routines as C sees them: buffers by address (Open MPI builds the module
 * with gfortran's NO_ARG_CHECK, "Fort ignore TKR" in ompi_info), each
 * handle a derived type holding only its Fortran integer (MPI_VAL) and
 * passed by reference, so a pointer to that integer, statuses as MPI's
 * own routines take them. The one difference: ierror is OPTIONAL, NULL
 * when the caller left it out. */

#define F08_IERR                                                                       \
	MPI_Fint ierr_unused_ = 0;                                                     \
	if (!ierror)                                                                   \
		ierror = &ierr_unused_

void mpi_init_f08_(MPI_Fint *ierror)
{
	F08_IERR;
	mpi_init_(ierror);
}

void mpi_init_thread_f08_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierror)
{
	F08_IERR;
	mpi_init_thread_(required, provided, ierror);
}

void mpi_finalize_f08_(MPI_Fint *ierror)
{
	F08_IERR;
	mpi_finalize_(ierror);
}

void mpi_comm_free_f08_(MPI_Fint *comm, MPI_Fint *ierror)
{
	F08_IERR;
	mpi_comm_free_(comm, ierror);
}

void mpi_allreduce_f08_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type,
			MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierror)
{
	F08_IERR;
	mpi_allreduce_(sendbuf, recvbuf, count, type, op, comm, ierror);
}

void mpi_iallreduce_f08_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type,
			 MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror)
{
	F08_IERR;
	mpi_iallreduce_(sendbuf, recvbuf, count, type, op, comm, request, ierror);
}

void mpi_reduce_f08_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type,
		     MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierror)
{
	F08_IERR;
	mpi_reduce_(sendbuf, recvbuf, count, type, op, root, comm, ierror);
}

void mpi_ireduce_f08_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type,
		      MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *request,
		      MPI_Fint *ierror)
{
	F08_IERR;
	mpi_ireduce_(sendbuf, recvbuf, count, type, op, root, comm, request, ierror);
}

void mpi_reduce_scatter_block_f08_(const void *sendbuf, void *recvbuf, MPI_Fint *rcount,
				   MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierror)
{
	F08_IERR;
	mpi_reduce_scatter_block_(sendbuf, recvbuf, rcount, type, op, comm, ierror);
}

void mpi_ireduce_scatter_block_f08_(const void *sendbuf, void *recvbuf, MPI_Fint *rcount,
				    MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm,
				    MPI_Fint *request, MPI_Fint *ierror)
{
	F08_IERR;
	mpi_ireduce_scatter_block_(sendbuf, recvbuf, rcount, type, op, comm, request, ierror);
}

void mpi_reduce_scatter_f08_(const void *sendbuf, void *recvbuf, MPI_Fint *counts,
			     MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierror)
{
	F08_IERR;
	mpi_reduce_scatter_(sendbuf, recvbuf, counts, type, op, comm, ierror);
}

void mpi_ireduce_scatter_f08_(const void *sendbuf, void *recvbuf, MPI_Fint *counts,
			      MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request,
			      MPI_Fint *ierror)
{
	F08_IERR;
	mpi_ireduce_scatter_(sendbuf, recvbuf, counts, type, op, comm, request, ierror);
}

void mpi_allgather_f08_(const void *sendbuf, MPI_Fint *scount, MPI_Fint *stype, void *recvbuf,
			MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierror)
{
	F08_IERR;
	mpi_allgather_(sendbuf, scount, stype, recvbuf, rcount, rtype, comm, ierror);
}

void mpi_iallgather_f08_(const void *sendbuf, MPI_Fint *scount, MPI_Fint *stype, void *recvbuf,
			 MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *request,
			 MPI_Fint *ierror)
{
	F08_IERR;
	mpi_iallgather_(sendbuf, scount, stype, recvbuf, rcount, rtype, comm, request, ierror);
}

void mpi_bcast_f08_(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm,
		    MPI_Fint *ierror)
{
	F08_IERR;
	mpi_bcast_(buf, count, type, root, comm, ierror);
}

void mpi_ibcast_f08_(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm,
		     MPI_Fint *request, MPI_Fint *ierror)
{
	F08_IERR;
	mpi_ibcast_(buf, count, type, root, comm, request, ierror);
}

void mpi_barrier_f08_(MPI_Fint *comm, MPI_Fint *ierror)
{
	F08_IERR;
	mpi_barrier_(comm, ierror);
}

void mpi_ibarrier_f08_(MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror)
{
	F08_IERR;
	mpi_ibarrier_(comm, request, ierror);
}

/* completion: ours first, then the module's own routine (which converts
 * statuses to TYPE(MPI_Status)), ierror always given */

void mpi_wait_f08_(MPI_Fint *request, MPI_Fint *status, MPI_Fint *ierror)
{
	F08_IERR;
	MPI_Fint *ierr = ierror;
	NEXT(real, f_wait_t, "mpi_wait_f08_");
	drive_all(1, request, true);
	real(request, status, ierr);
}

void mpi_test_f08_(MPI_Fint *request, MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierror)
{
	F08_IERR;
	MPI_Fint *ierr = ierror;
	NEXT(real, f_test_t, "mpi_test_f08_");
	drive_all(1, request, false);
	real(request, flag, status, ierr);
}

void mpi_waitall_f08_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *statuses, MPI_Fint *ierror)
{
	F08_IERR;
	MPI_Fint *ierr = ierror;
	NEXT(real, f_many_t, "mpi_waitall_f08_");
	drive_all(*count, requests, true);
	real(count, requests, statuses, ierr);
}

void mpi_testall_f08_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *flag, MPI_Fint *statuses,
		      MPI_Fint *ierror)
{
	F08_IERR;
	MPI_Fint *ierr = ierror;
	NEXT(real, f_test_many_t, "mpi_testall_f08_");
	drive_all(*count, requests, false);
	real(count, requests, flag, statuses, ierr);
}

void mpi_testany_f08_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *flag,
		      MPI_Fint *status, MPI_Fint *ierror)
{
	F08_IERR;
	MPI_Fint *ierr = ierror;
	NEXT(real, f_test_any_t, "mpi_testany_f08_");
	drive_all(*count, requests, false);
	real(count, requests, index, flag, status, ierr);
}

void mpi_waitany_f08_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *status,
		      MPI_Fint *ierror)
{
	F08_IERR;
	MPI_Fint *ierr = ierror;
	NEXT(real, f_any_t, "mpi_waitany_f08_");
	waitany(real, mpi_testany_f08_, count, requests, index, status, ierr);
}

void mpi_testsome_f08_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *outcount,
		       MPI_Fint *indices, MPI_Fint *statuses, MPI_Fint *ierror)
{
	F08_IERR;
	MPI_Fint *ierr = ierror;
	NEXT(real, f_test_any_t, "mpi_testsome_f08_");
	drive_all(*count, requests, false);
	real(count, requests, outcount, indices, statuses, ierr);
}

void mpi_waitsome_f08_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *outcount,
		       MPI_Fint *indices, MPI_Fint *statuses, MPI_Fint *ierror)
{
	F08_IERR;
	MPI_Fint *ierr = ierror;
	NEXT(real, f_test_any_t, "mpi_waitsome_f08_");
	waitsome(real, mpi_testsome_f08_, count, requests, outcount, indices, statuses, ierr);
}

void mpi_request_free_f08_(MPI_Fint *request, MPI_Fint *ierror)
{
	F08_IERR;
	MPI_Fint *ierr = ierror;
	if (im_request_free(PMPI_Request_f2c(*request))) {
		*request = PMPI_Request_c2f(MPI_REQUEST_NULL);
		*ierr = MPI_SUCCESS;
		return;
	}
	NEXT(real, f_free_t, "mpi_request_free_f08_");
	real(request, ierr);
}
