// The CUDA vendor libraries the backend calls (NVRTC, cuBLASLt, cuDNN), opened with dlopen the first time the
// backend needs each one instead of being linked. A CPU-only process never maps them: linked, the loader mapped
// and relocated them at every start (about 245 MB of resident memory, mostly libcublasLt's, for `--help`), and a
// machine without them could not start the tool at all. Here, a missing library is one error naming it when a
// CUDA session or a compile asks for it.
//
// Each table holds a pointer per function the backend uses, typed from the library's own header, so a call is
// checked against the declaration: nvrtc_api().nvrtcCompileProgram(prog, n, opts).
#pragma once

#include <cublasLt.h>
#include <cudnn.h>
#include <nvrtc.h>

namespace gaf::cuda {

#define GAF_NVRTC_FUNCTIONS(X)                                                                          \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcCompileProgram)                  \
  X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)                \
  X(nvrtcDestroyProgram)

#define GAF_CUBLASLT_FUNCTIONS(X)                                                                       \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmul) X(cublasLtMatmulDescCreate)                    \
  X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate)          \
  X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulPreferenceCreate)  \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                            \
  X(cublasLtMatmulAlgoGetHeuristic)

#define GAF_CUDNN_FUNCTIONS(X)                                                                          \
  X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream) X(cudnnGetErrorString) X(cudnnCreateTensorDescriptor) \
  X(cudnnDestroyTensorDescriptor) X(cudnnSetTensor4dDescriptor) X(cudnnCreateFilterDescriptor)          \
  X(cudnnDestroyFilterDescriptor) X(cudnnSetFilter4dDescriptor) X(cudnnCreateConvolutionDescriptor)     \
  X(cudnnDestroyConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor)                               \
  X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType) X(cudnnCreateActivationDescriptor)    \
  X(cudnnDestroyActivationDescriptor) X(cudnnSetActivationDescriptor)                                   \
  X(cudnnGetConvolutionForwardWorkspaceSize) X(cudnnGetConvolutionForwardAlgorithm_v7)                 \
  X(cudnnConvolutionBiasActivationForward) X(cudnnConvolutionForward)

#define GAF_VENDOR_MEMBER(f) decltype(&::f) f = nullptr;
struct Nvrtc {
  GAF_NVRTC_FUNCTIONS(GAF_VENDOR_MEMBER)
};
struct CublasLt {
  GAF_CUBLASLT_FUNCTIONS(GAF_VENDOR_MEMBER)
};
struct Cudnn {
  GAF_CUDNN_FUNCTIONS(GAF_VENDOR_MEMBER)
};
#undef GAF_VENDOR_MEMBER

// Each opens its library on first use (its versioned soname from the headers this was built with, then the
// unversioned name) and throws gaf::Error naming the library and the loader's message when it cannot; a later
// call tries again.
const Nvrtc& nvrtc_api();
const CublasLt& cublaslt_api();
const Cudnn& cudnn_api();

}  // namespace gaf::cuda
