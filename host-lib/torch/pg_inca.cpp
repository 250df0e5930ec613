// SPDX-License-Identifier: BSD-3-Clause
// ProcessGroupInca: offloadable collectives become libinca requests that a
// progress thread starts and completes (libinca has no progress thread of
// its own, and DDP waits on futures, not on Work::wait); the rest goes to
// the Gloo group.
//
// One file over 500 lines on purpose (about 700): it is one class, whose
// methods torch.distributed defines, and its progress thread.
#include "pg_inca.hpp"

#include <Python.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace inca_torch {

namespace {

// libinca's static group (INCA_CONFIG / INCA_SWITCH) describes one group:
// the first process group that gets it keeps it
std::atomic<bool> static_taken{false};
std::atomic<unsigned> groups_created{0};

// how long the progress thread waits for the network before it looks at
// newly queued collectives again
constexpr unsigned kPollUs = 200;

bool to_inca_dtype(at::ScalarType t, inca_dtype_t* d) {
  switch (t) {
    case at::kFloat: *d = INCA_FLOAT32; return true;
    case at::kHalf: *d = INCA_FLOAT16; return true;
    case at::kBFloat16: *d = INCA_BFLOAT16; return true;
    case at::kDouble: *d = INCA_FLOAT64; return true;
    case at::kInt: *d = INCA_INT32; return true;
    case at::kLong: *d = INCA_INT64; return true;
    default: return false;
  }
}

// false: an op libinca does not have (AVG, PREMUL_SUM): the call goes to gloo
bool to_inca_op(const c10d::ReduceOp& op, inca_op_t* o) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM: *o = INCA_SUM; return true;
    case c10d::ReduceOp::PRODUCT: *o = INCA_PROD; return true;
    case c10d::ReduceOp::MIN: *o = INCA_MIN; return true;
    case c10d::ReduceOp::MAX: *o = INCA_MAX; return true;
    case c10d::ReduceOp::BAND: *o = INCA_BAND; return true;
    case c10d::ReduceOp::BOR: *o = INCA_BOR; return true;
    case c10d::ReduceOp::BXOR: *o = INCA_BXOR; return true;
    default: return false;
  }
}

bool is_bitwise(inca_op_t o) {
  return o == INCA_BAND || o == INCA_BOR || o == INCA_BXOR;
}

// why a collective on tensor t cannot go to libinca ("" when it can),
// giving its dtype and, for a reduction (rop), its op
std::string refusal(const at::Tensor& t, inca_dtype_t* dtype,
                    const c10d::ReduceOp* rop = nullptr,
                    inca_op_t* op = nullptr) {
  if (t.layout() != at::kStrided) return "a sparse tensor";
  if (!to_inca_dtype(t.scalar_type(), dtype))
    return std::string("dtype ") + c10::toString(t.scalar_type());
  if (rop && !to_inca_op(*rop, op))
    return "reduce op " + std::to_string(static_cast<int>(
                              static_cast<c10d::ReduceOp::RedOpType>(*rop)));
  return "";
}

bool is_float(inca_dtype_t d) {
  return d == INCA_FLOAT32 || d == INCA_FLOAT16 || d == INCA_BFLOAT16 ||
         d == INCA_FLOAT64;
}

// bad input is an error whichever group would run the call
void check_tensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "inca: ", op, ": undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "inca: ", op,
              ": tensors must be on the CPU, got one on ", t.device());
  TORCH_CHECK(t.layout() != at::kStrided || t.is_contiguous(), "inca: ", op,
              ": tensors must be contiguous (call .contiguous() first)");
}

std::string comm_error(inca_comm_t* comm, int err) {
  return std::string(inca_strerror(err)) + ": " + inca_comm_errmsg(comm);
}

}  // namespace

WorkInca::WorkInca(int rank, c10d::OpType type, const char* name,
                   std::vector<at::Tensor> outputs, Start start,
                   std::function<void()> done)
    : c10d::Work(rank, type, nullptr),
      name_(name),
      start_(std::move(start)),
      done_(std::move(done)),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

c10::intrusive_ptr<c10::ivalue::Future> WorkInca::getFuture() {
  return future_;
}

void WorkInca::complete(int err, std::string what) {
  if (err == INCA_OK) {
    try {
      if (done_) done_();
    } catch (const std::exception& e) {
      err = INCA_ERR_INVAL;
      what = e.what();
    }
  }
  keep_.clear();
  if (err == INCA_OK) {
    finish();
    future_->markCompleted(c10::IValue(outputs_));
    return;
  }
  auto ex = std::make_exception_ptr(std::runtime_error(
      std::string("inca: ") + name_ + " failed: " + what));
  finish(ex);
  future_->setError(ex);
}

ProcessGroupInca::ProcessGroupInca(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    c10::intrusive_ptr<c10d::ProcessGroup> gloo)
    : c10d::ProcessGroup(rank, size), gloo_(std::move(gloo)) {
  TORCH_CHECK(gloo_, "inca: a gloo process group is required");
  unsigned index = groups_created++;
  struct inca_comm_attr attr = {};
  attr.rank = rank;
  attr.size = size;
  std::string job, why;
  bool manager = getenv("INCA_MANAGER") && *getenv("INCA_MANAGER");
  bool tried = false;
  int err = INCA_OK;
  if (size < 2) {
    why = "a group of one rank";
  } else if (manager) {
    // one manager job per process group: rank 0 names it, the store
    // (this group's prefix) hands the name to the others
    if (rank == 0) {
      char host[64] = "host";
      gethostname(host, sizeof(host) - 1);
      const char* prefix = getenv("INCA_JOB");
      job = std::string(prefix && *prefix ? prefix : "torch") + "." + host +
            "." + std::to_string(getpid()) + "." + std::to_string(index);
      store->set("inca_job", std::vector<uint8_t>(job.begin(), job.end()));
    } else {
      auto v = store->get("inca_job");
      job.assign(v.begin(), v.end());
    }
    attr.job = job.c_str();
    tried = true;
  } else if (!getenv("INCA_CONFIG") && !getenv("INCA_SWITCH")) {
    why = "no INCA_CONFIG, INCA_SWITCH or INCA_MANAGER in the environment";
  } else if (static_taken.load()) {
    why = "the static group (INCA_CONFIG/INCA_SWITCH) serves the first "
          "process group only (use INCA_MANAGER for more)";
  } else {
    // a static group outlives jobs: rank 0 draws this job's epoch (unless
    // INCA_EPOCH names one) so that it never meets an earlier job's
    // collectives on the switch; the store hands it to the others
    if (!getenv("INCA_EPOCH")) {
      uint32_t e = 0;
      // one key per process group this process made: a store that
      // outlives a group never hands out an old epoch
      std::string key = "inca_epoch." + std::to_string(index);
      if (rank == 0) {
        e = inca_epoch_new();
        store->set(key, std::vector<uint8_t>(
                                     reinterpret_cast<uint8_t*>(&e),
                                     reinterpret_cast<uint8_t*>(&e) + sizeof(e)));
      } else {
        auto v = store->get(key);
        TORCH_CHECK(v.size() == sizeof(e), "inca: bad ", key, " in the store");
        memcpy(&e, v.data(), sizeof(e));
      }
      attr.epoch = e;
    }
    tried = true;
  }
  if (tried) {
    err = inca_comm_create(&attr, &comm_);
    if (err != INCA_OK) {
      fprintf(stderr, "inca_torch[%d]: no libinca communicator: %s: %s\n", rank,
              inca_strerror(err), inca_last_errmsg());
      comm_ = nullptr;
    }
  }
  // the ranks decide together: the lowest rank that failed, or size
  std::vector<at::Tensor> verdict{at::full(
      {1}, tried && comm_ ? size : (tried ? rank : -1), at::kInt)};
  c10d::AllreduceOptions min;
  min.reduceOp = c10d::ReduceOp::MIN;
  gloo_->allreduce(verdict, min)->wait();
  int first_failed = verdict[0].item<int>();
  if (first_failed != size) {
    if (comm_) inca_comm_destroy(comm_);
    comm_ = nullptr;
    if (why.empty())
      why = first_failed < 0 ? "not every rank has a libinca group"
                             : "rank " + std::to_string(first_failed) +
                                   " could not create its communicator";
    if (rank == 0)
      fprintf(stderr,
              "inca_torch: process group of %d ranks not offloaded (%s): "
              "every collective goes to gloo\n",
              size, why.c_str());
    return;
  }
  if (!manager) static_taken = true;
  transport_ = inca_comm_transport(comm_);
  if (rank == 0)
    fprintf(stderr,
            "inca_torch: process group of %d ranks on libinca (%s%s%s), "
            "the rest on gloo\n",
            size, transport_.c_str(), manager ? ", manager job " : "",
            manager ? job.c_str() : "");
  progress_ = std::thread([this] { progress_loop(); });
}

ProcessGroupInca::~ProcessGroupInca() {
  // torch 1.13 drops a process group's last reference holding the GIL. A
  // thread joined here (the progress thread, or a gloo worker when gloo_
  // goes) may be freeing a tensor whose Python object needs the GIL to go:
  // joining it with the GIL held waits forever. Let the GIL go meanwhile.
  PyThreadState* saved = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) saved = PyEval_SaveThread();
  if (progress_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    progress_.join();
  }
  if (comm_) inca_comm_destroy(comm_);
  comm_ = nullptr;
  gloo_.reset();
  if (saved) PyEval_RestoreThread(saved);
}

void ProcessGroupInca::progress_loop() {
  std::vector<c10::intrusive_ptr<WorkInca>> inflight, started;
  for (;;) {
    started.clear();
    {
      std::unique_lock<std::mutex> lk(mu_);
      if (inflight.empty())
        cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
      if (stop_ && queue_.empty() && inflight.empty()) return;
      while (!queue_.empty() && inflight.size() + started.size() <
                                    static_cast<size_t>(INCA_MAX_INFLIGHT)) {
        started.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    for (auto& w : started) {
      int err;
      std::string what;
      {
        std::lock_guard<std::mutex> lk(comm_mu_);
        err = w->start_(comm_, &w->req_);
        if (err != INCA_OK) what = comm_error(comm_, err);
      }
      if (err != INCA_OK)
        w->complete(err, what);
      else
        inflight.push_back(w);
    }
    // the oldest waits for the network a little, the others are tested
    std::vector<std::pair<c10::intrusive_ptr<WorkInca>, int>> finished;
    {
      std::lock_guard<std::mutex> lk(comm_mu_);
      for (size_t i = 0; i < inflight.size();) {
        int done = 0;
        int err = inca_test_timeout(inflight[i]->req_, i == 0 ? kPollUs : 0,
                                    &done);
        if (!done && err != INCA_OK) done = 1;  // bad request: never retried
        if (done) {
          inflight[i]->req_ = nullptr;
          finished.emplace_back(inflight[i], err);
          inflight.erase(inflight.begin() + static_cast<long>(i));
        } else {
          i++;
        }
      }
    }
    // outside the locks: completing runs the future's callbacks (DDP's)
    for (auto& f : finished) {
      std::string what;
      if (f.second != INCA_OK) {
        std::lock_guard<std::mutex> lk(comm_mu_);
        what = comm_error(comm_, f.second);
      }
      f.first->complete(f.second, what);
    }
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::enqueue(
    c10::intrusive_ptr<WorkInca> work) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    offloaded_calls_[work->name_]++;
    queue_.push_back(work);
  }
  cv_.notify_one();
  return work;
}

void ProcessGroupInca::delegated(const std::string& op,
                                 const std::string& why) {
  std::lock_guard<std::mutex> lk(mu_);
  delegated_calls_[op]++;
  if (rank_ == 0 && logged_.insert(op + why).second)
    fprintf(stderr, "inca_torch: %s goes to gloo (%s)\n", op.c_str(),
            why.c_str());
}

// ---- offloaded collectives ----

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  for (auto& t : tensors) check_tensor(t, "allreduce");
  inca_dtype_t dtype;
  inca_op_t op;
  std::string why = !comm_ ? "not offloaded"
                  : tensors.size() != 1 ? "a list of " + std::to_string(tensors.size()) + " tensors"
                  : refusal(tensors[0], &dtype, &opts.reduceOp, &op);
  if (!why.empty()) {
    delegated("allreduce", why);
    return gloo_->allreduce(tensors, opts);
  }
  TORCH_CHECK(!(is_float(dtype) && is_bitwise(op)),
              "inca: allreduce: bitwise ops apply to integer tensors only");
  at::Tensor t = tensors[0];
  auto w = c10::make_intrusive<WorkInca>(
      rank_, c10d::OpType::ALLREDUCE, "allreduce", tensors,
      [t, dtype, op](inca_comm_t* c, inca_request_t** r) {
        return inca_iallreduce(c, INCA_IN_PLACE, t.data_ptr(),
                               static_cast<size_t>(t.numel()), dtype, op, r);
      });
  if (t.numel() == 0) {
    w->complete(INCA_OK, "");
    return w;
  }
  return enqueue(w);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::reduce(
    std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  for (auto& t : tensors) check_tensor(t, "reduce");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "inca: reduce: root ",
              opts.rootRank, " is not a rank of this group of ", size_);
  inca_dtype_t dtype;
  inca_op_t op;
  std::string why = !comm_ ? "not offloaded"
                  : tensors.size() != 1 || opts.rootTensor != 0 ? "a list of tensors"
                  : refusal(tensors[0], &dtype, &opts.reduceOp, &op);
  if (!why.empty()) {
    delegated("reduce", why);
    return gloo_->reduce(tensors, opts);
  }
  TORCH_CHECK(!(is_float(dtype) && is_bitwise(op)),
              "inca: reduce: bitwise ops apply to integer tensors only");
  at::Tensor t = tensors[0];
  int root = static_cast<int>(opts.rootRank);
  bool at_root = root == rank_;
  auto w = c10::make_intrusive<WorkInca>(
      rank_, c10d::OpType::REDUCE, "reduce", tensors,
      [t, dtype, op, root, at_root](inca_comm_t* c, inca_request_t** r) {
        return inca_ireduce(c, at_root ? INCA_IN_PLACE : t.data_ptr(),
                            at_root ? t.data_ptr() : nullptr,
                            static_cast<size_t>(t.numel()), dtype, op, root, r);
      });
  if (t.numel() == 0) {
    w->complete(INCA_OK, "");
    return w;
  }
  return enqueue(w);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  for (auto& t : tensors) check_tensor(t, "broadcast");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_,
              "inca: broadcast: root ", opts.rootRank,
              " is not a rank of this group of ", size_);
  inca_dtype_t dtype;
  std::string why = !comm_ ? "not offloaded"
                  : tensors.size() != 1 || opts.rootTensor != 0 ? "a list of tensors"
                  : refusal(tensors[0], &dtype);
  if (!why.empty()) {
    delegated("broadcast", why);
    return gloo_->broadcast(tensors, opts);
  }
  at::Tensor t = tensors[0];
  int root = static_cast<int>(opts.rootRank);
  auto w = c10::make_intrusive<WorkInca>(
      rank_, c10d::OpType::BROADCAST, "broadcast", tensors,
      [t, dtype, root](inca_comm_t* c, inca_request_t** r) {
        return inca_ibcast(c, t.data_ptr(), static_cast<size_t>(t.numel()),
                           dtype, root, r);
      });
  if (t.numel() == 0) {
    w->complete(INCA_OK, "");
    return w;
  }
  return enqueue(w);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  check_tensor(output, "allgather");
  check_tensor(input, "allgather");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "inca: allgather: output and input dtypes differ");
  TORCH_CHECK(output.numel() == input.numel() * size_, "inca: allgather: ",
              "the output must hold ", size_, " x ", input.numel(),
              " elements, it holds ", output.numel());
  inca_dtype_t dtype;
  std::string why = !comm_ ? "not offloaded"
                  : refusal(input, &dtype);
  if (!why.empty()) {
    delegated("_allgather_base", why);
    return gloo_->_allgather_base(output, input, opts);
  }
  at::Tensor in = input, out = output;
  auto w = c10::make_intrusive<WorkInca>(
      rank_, c10d::OpType::_ALLGATHER_BASE, "allgather",
      std::vector<at::Tensor>{output},
      [in, out, dtype](inca_comm_t* c, inca_request_t** r) {
        return inca_iallgather(c, in.data_ptr(), out.data_ptr(),
                               static_cast<size_t>(in.numel()), dtype, r);
      });
  if (in.numel() == 0) {
    w->complete(INCA_OK, "");
    return w;
  }
  return enqueue(w);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::allgather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  for (auto& t : inputs) check_tensor(t, "allgather");
  for (auto& l : outputs)
    for (auto& t : l) check_tensor(t, "allgather");
  inca_dtype_t dtype;
  std::string why = !comm_ ? "not offloaded"
                  : inputs.size() != 1 || outputs.size() != 1 ? "lists of tensors"
                  : refusal(inputs[0], &dtype);
  if (!why.empty()) {
    delegated("allgather", why);
    return gloo_->allgather(outputs, inputs, opts);
  }
  at::Tensor in = inputs[0];
  std::vector<at::Tensor> outs = outputs[0];
  TORCH_CHECK(static_cast<int>(outs.size()) == size_, "inca: allgather: ",
              "the output list must hold ", size_, " tensors, it holds ",
              outs.size());
  for (auto& o : outs)
    TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                "inca: allgather: every output tensor must have the input's "
                "dtype and number of elements");
  at::Tensor flat = at::empty({in.numel() * size_}, in.options());
  int64_t n = in.numel();
  auto w = c10::make_intrusive<WorkInca>(
      rank_, c10d::OpType::ALLGATHER, "allgather", outs,
      [in, flat, dtype](inca_comm_t* c, inca_request_t** r) {
        return inca_iallgather(c, in.data_ptr(), flat.data_ptr(),
                               static_cast<size_t>(in.numel()), dtype, r);
      },
      [outs, flat, n]() {
        for (size_t r = 0; r < outs.size(); r++)
          outs[r].copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n)
                            .view(outs[r].sizes()));
      });
  w->keep_.push_back(flat);
  if (n == 0) {
    w->complete(INCA_OK, "");
    return w;
  }
  return enqueue(w);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input,
    const c10d::ReduceScatterOptions& opts) {
  check_tensor(output, "reduce_scatter");
  check_tensor(input, "reduce_scatter");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "inca: reduce_scatter: output and input dtypes differ");
  TORCH_CHECK(input.numel() == output.numel() * size_, "inca: reduce_scatter: ",
              "the input must hold ", size_, " x ", output.numel(),
              " elements, it holds ", input.numel());
  inca_dtype_t dtype;
  inca_op_t op;
  std::string why = !comm_ ? "not offloaded"
                  : refusal(input, &dtype, &opts.reduceOp, &op);
  if (!why.empty()) {
    delegated("_reduce_scatter_base", why);
    return gloo_->_reduce_scatter_base(output, input, opts);
  }
  TORCH_CHECK(!(is_float(dtype) && is_bitwise(op)),
              "inca: reduce_scatter: bitwise ops apply to integer tensors only");
  at::Tensor in = input, out = output;
  auto w = c10::make_intrusive<WorkInca>(
      rank_, c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter",
      std::vector<at::Tensor>{output},
      [in, out, dtype, op](inca_comm_t* c, inca_request_t** r) {
        return inca_ireduce_scatter(c, in.data_ptr(), out.data_ptr(),
                                    static_cast<size_t>(out.numel()), dtype, op,
                                    r);
      });
  if (out.numel() == 0) {
    w->complete(INCA_OK, "");
    return w;
  }
  return enqueue(w);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::reduce_scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  for (auto& t : outputs) check_tensor(t, "reduce_scatter");
  for (auto& l : inputs)
    for (auto& t : l) check_tensor(t, "reduce_scatter");
  inca_dtype_t dtype;
  inca_op_t op;
  std::string why = !comm_ ? "not offloaded"
                  : inputs.size() != 1 || outputs.size() != 1 ? "lists of tensors"
                  : refusal(outputs[0], &dtype, &opts.reduceOp, &op);
  if (!why.empty()) {
    delegated("reduce_scatter", why);
    return gloo_->reduce_scatter(outputs, inputs, opts);
  }
  TORCH_CHECK(!(is_float(dtype) && is_bitwise(op)),
              "inca: reduce_scatter: bitwise ops apply to integer tensors only");
  at::Tensor out = outputs[0];
  auto& ins = inputs[0];
  TORCH_CHECK(static_cast<int>(ins.size()) == size_, "inca: reduce_scatter: ",
              "the input list must hold ", size_, " tensors, it holds ",
              ins.size());
  std::vector<at::Tensor> flat_ins;
  for (auto& i : ins) {
    TORCH_CHECK(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
                "inca: reduce_scatter: every input tensor must have the "
                "output's dtype and number of elements");
    flat_ins.push_back(i.reshape({-1}));
  }
  at::Tensor flat = at::cat(flat_ins);
  auto w = c10::make_intrusive<WorkInca>(
      rank_, c10d::OpType::REDUCE_SCATTER, "reduce_scatter", outputs,
      [flat, out, dtype, op](inca_comm_t* c, inca_request_t** r) {
        return inca_ireduce_scatter(c, flat.data_ptr(), out.data_ptr(),
                                    static_cast<size_t>(out.numel()), dtype, op,
                                    r);
      });
  w->keep_.push_back(flat);
  if (out.numel() == 0) {
    w->complete(INCA_OK, "");
    return w;
  }
  return enqueue(w);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::barrier(
    const c10d::BarrierOptions& opts) {
  if (!comm_) {
    delegated("barrier", "not offloaded");
    return gloo_->barrier(opts);
  }
  // inca_barrier is an all-reduce of one int32; this is its nonblocking form
  at::Tensor one = at::zeros({1}, at::kInt);
  auto w = c10::make_intrusive<WorkInca>(
      rank_, c10d::OpType::BARRIER, "barrier", std::vector<at::Tensor>{},
      [one](inca_comm_t* c, inca_request_t** r) {
        return inca_iallreduce(c, INCA_IN_PLACE, one.data_ptr(), 1, INCA_INT32,
                               INCA_SUM, r);
      });
  w->keep_.push_back(one);
  return enqueue(w);
}

// ---- delegated to gloo ----

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::allreduce_coalesced(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceCoalescedOptions& opts) {
  delegated("allreduce_coalesced", "not in libinca");
  return gloo_->allreduce_coalesced(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  delegated("allgather_coalesced", "not in libinca");
  return gloo_->allgather_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::gather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  delegated("gather", "not in libinca");
  return gloo_->gather(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  delegated("scatter", "not in libinca");
  return gloo_->scatter(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
    std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts) {
  delegated("alltoall_base", "not in libinca");
  return gloo_->alltoall_base(output, input, outputSplits, inputSplits, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& opts) {
  delegated("alltoall", "not in libinca");
  return gloo_->alltoall(outputs, inputs, opts);
}

void ProcessGroupInca::monitoredBarrier(const c10d::BarrierOptions& opts,
                                        bool waitAllRanks) {
  delegated("monitoredBarrier", "not in libinca");
  gloo_->monitoredBarrier(opts, waitAllRanks);
}

void ProcessGroupInca::setSequenceNumberForGroup() {
  gloo_->setSequenceNumberForGroup();
}

uint64_t ProcessGroupInca::getSequenceNumberForGroup() {
  return gloo_->getSequenceNumberForGroup();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::send(
    std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  delegated("send", "point-to-point");
  return gloo_->send(tensors, dstRank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::recv(
    std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  delegated("recv", "point-to-point");
  return gloo_->recv(tensors, srcRank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInca::recvAnysource(
    std::vector<at::Tensor>& tensors, int tag) {
  delegated("recvAnysource", "point-to-point");
  return gloo_->recvAnysource(tensors, tag);
}

std::map<std::string, double> ProcessGroupInca::stats() {
  std::map<std::string, double> s;
  s["offloaded"] = comm_ ? 1 : 0;
  if (comm_) {
    struct inca_stats st = {};
    {
      std::lock_guard<std::mutex> lk(comm_mu_);
      inca_comm_stats(comm_, &st);
    }
    s["collectives"] = static_cast<double>(st.collectives);
    s["packets_sent"] = static_cast<double>(st.packets_sent);
    s["retransmissions"] = static_cast<double>(st.retransmissions);
    s["results"] = static_cast<double>(st.results);
    s["bytes_sent"] = static_cast<double>(st.bytes_sent);
    s["bytes_received"] = static_cast<double>(st.bytes_received);
    s["fallbacks"] = static_cast<double>(st.fallbacks);
    s["ring_bytes_sent"] = static_cast<double>(st.ring_bytes_sent);
    s["replays"] = static_cast<double>(st.replays);
    s["host_first"] = static_cast<double>(st.hier_calls);
    s["rails"] = static_cast<double>(st.rail_calls);
    s["spin_polls"] = static_cast<double>(st.spin_polls);
    s["spin_cpu_us"] = st.spin_cpu_us;
  }
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& kv : offloaded_calls_)
    s["inca." + kv.first] = static_cast<double>(kv.second);
  for (auto& kv : delegated_calls_)
    s["gloo." + kv.first] = static_cast<double>(kv.second);
  return s;
}

c10::intrusive_ptr<c10d::ProcessGroup> create_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    const c10::intrusive_ptr<c10d::ProcessGroup>& gloo) {
  return c10::make_intrusive<ProcessGroupInca>(store, rank, size, gloo);
}

}  // namespace inca_torch
