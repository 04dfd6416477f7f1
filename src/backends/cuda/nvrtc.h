// NVRTC: CUDA C++ source -> machine code for one compute capability, cached on disk.
#pragma once

#include <string>

namespace gaf::cuda {

// The CUBIN of `source` for sm_<major><minor>, from the kernel cache (codegen::cache_dir()/cuda, keyed by the
// SHA-256 of source, options and NVRTC version; verified before use, see nvrtc.cc) or compiled by NVRTC and
// stored there. Needs no device. Throws gaf::Error
// with NVRTC's log (and the path of the kept source) when the source does not compile.
std::string compile_cubin(const std::string& source, int major, int minor);

}  // namespace gaf::cuda
