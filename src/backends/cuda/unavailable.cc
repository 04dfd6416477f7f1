// The CUDA backend of a build without the CUDA toolkit: --device cuda says why it cannot run.
#include "gaf/cuda.h"
#include "gaf/status.h"

namespace gaf::cuda {

namespace {
constexpr const char* kWhy =
    "this build has no CUDA backend: the CUDA toolkit (NVRTC, cuBLASLt, cuDNN) was not found when it was "
    "configured; install it and rebuild";
}

std::string unavailable_reason() { return kWhy; }

struct Session::Impl {};

Session::Session(const Graph&, Options) { throw Error(kWhy); }
Session::~Session() = default;
std::vector<Tensor> Session::run(const std::vector<Tensor>&) { throw Error(kWhy); }
double Session::median_ms(const std::vector<Tensor>&, int, int, bool) { throw Error(kWhy); }
const std::vector<Step>& Session::steps() const { throw Error(kWhy); }
std::vector<double> Session::step_ms(const std::vector<Tensor>&, int) { throw Error(kWhy); }
size_t Session::kernels_per_run() const { return 0; }
size_t Session::generated_kernels() const { return 0; }
std::string Session::device_name() const { return ""; }
size_t Session::arena_bytes() const { return 0; }
const std::string& Session::capture_error() const { throw Error(kWhy); }

}  // namespace gaf::cuda
