// SPDX-License-Identifier: BSD-3-Clause
// ProcessGroupInca: a torch.distributed (c10d, torch 1.13) process group whose
// collectives on CPU tensors go through libinca (inca.h) and everything else
// to a Gloo process group created alongside.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

extern "C" {
#include <inca.h>
}

namespace inca_torch {

// One offloaded collective: started and progressed by the group's progress
// thread, which owns the communicator; wait() and the future complete when
// libinca says the request is done.
class WorkInca : public c10d::Work {
 public:
  using Start = std::function<int(inca_comm_t*, inca_request_t**)>;
  WorkInca(int rank, c10d::OpType type, const char* name,
           std::vector<at::Tensor> outputs, Start start,
           std::function<void()> done = nullptr);
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  // called by the progress thread: err is libinca's result
  void complete(int err, std::string what);

  const char* name_;
  Start start_;
  std::function<void()> done_;
  inca_request_t* req_ = nullptr;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_;  // staging buffers alive until done
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupInca : public c10d::ProcessGroup {
 public:
  // Creates libinca's communicator (attr from INCA_* / the manager); the
  // ranks agree over gloo whether all succeeded, else every op goes to gloo.
  ProcessGroupInca(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                   int size, c10::intrusive_ptr<c10d::ProcessGroup> gloo);
  ~ProcessGroupInca() override;

  const std::string getBackendName() const override { return "inca"; }

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts =
          c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts =
          c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts =
          c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output, at::Tensor& input,
      std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts,
                        bool waitAllRanks = false) override;
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors,
                                      int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors,
                                      int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(
      std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;

  // libinca's counters and this group's: offloaded and delegated calls per
  // collective
  std::map<std::string, double> stats();
  bool offloaded() const { return comm_ != nullptr; }
  const c10::intrusive_ptr<c10d::ProcessGroup>& gloo() const { return gloo_; }

 private:
  c10::intrusive_ptr<c10d::Work> enqueue(c10::intrusive_ptr<WorkInca> work);
  // the op goes to gloo: logs once per kind and reason (rank 0)
  void delegated(const std::string& op, const std::string& why);
  void progress_loop();

  c10::intrusive_ptr<c10d::ProcessGroup> gloo_;
  inca_comm_t* comm_ = nullptr;
  std::string transport_;

  std::mutex mu_;                   // queue_, stop_, counters
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<WorkInca>> queue_;
  bool stop_ = false;
  std::mutex comm_mu_;              // libinca's one-thread-at-a-time rule
  std::thread progress_;
  std::set<std::string> logged_;
  std::map<std::string, uint64_t> offloaded_calls_, delegated_calls_;
};

// The Python-side constructor (torch.distributed.Backend.register_backend)
c10::intrusive_ptr<c10d::ProcessGroup> create_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    const c10::intrusive_ptr<c10d::ProcessGroup>& gloo);

}  // namespace inca_torch
