// SPDX-License-Identifier: BSD-3-Clause
// inca_torch._C: the Python binding of ProcessGroupInca (pybind11, as torch's
// own c10d bindings).
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "pg_inca.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "INCA process group for torch.distributed (libinca)";
  // the base class's Python type lives in torch._C._distributed_c10d
  py::module::import("torch.distributed");
  py::class_<inca_torch::ProcessGroupInca, c10d::ProcessGroup,
             c10::intrusive_ptr<inca_torch::ProcessGroupInca>>(
      m, "ProcessGroupInca")
      .def("stats", &inca_torch::ProcessGroupInca::stats,
           py::call_guard<py::gil_scoped_release>(),
           "libinca's counters and the calls offloaded / sent to gloo")
      .def_property_readonly("offloaded",
                             &inca_torch::ProcessGroupInca::offloaded)
      .def_property_readonly("gloo", &inca_torch::ProcessGroupInca::gloo);
  m.def("create", &inca_torch::create_process_group, py::arg("store"),
        py::arg("rank"), py::arg("size"), py::arg("gloo"),
        py::call_guard<py::gil_scoped_release>(),
        "a ProcessGroupInca over libinca with gloo for the rest");
  m.attr("INCA_MAX_INFLIGHT") = INCA_MAX_INFLIGHT;
}
