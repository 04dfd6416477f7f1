// Built-in targets. Figures are public vendor numbers or measurements; each is cited where it is set.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gaf/cost.h"

namespace gaf {

Target Target::cpu_host() {
  // Defaults for the development machine (2 cores, AVX-512), measured: ~35 GB/s copy bandwidth, ~210 GFLOP/s
  // fp32 GEMM through oneDNN. L2 of 1 MiB per core (Intel Xeon Scalable: 1-2 MiB). `calibrate` replaces these.
  Target t;
  t.name = "cpu-host";
  t.dram_bandwidth = 35e9;
  t.onchip_bytes = 1 << 20;
  t.launch_overhead_s = 2e-6;
  t.vector_flops = 100e9;
  t.matrix_flops = 210e9;
  t.cores = 2;
  // Measured on mobilenet_v2 (ONEDNN_VERBOSE): a 1x1 convolution 16->96 at 112x112 on gemm:jit took 0.32 ms,
  // 2.27 ms with the bounded_relu post-op; the model ran 0.43x as fast with Conv+Clip fused.
  t.conv_clip_epilogue = false;
  // Measured (oneDNN 2.6, 2 threads, reorders from/to NHWC included): 3x3 convolutions 64x56x56 0.47 -> 0.29 ms,
  // 128x28x28 0.44 -> 0.20 ms, 256x14x14 0.43 -> 0.24 ms, 512x7x7 0.39 -> 0.32 ms.
  t.conv_winograd = true;
  // Measured on mobilenet_v2 (2 threads): see expand_depthwise_fusion.cc.
  t.conv_expand_depthwise = true;
  return t;
}

namespace {

Target cuda_h200() {
  // NVIDIA H200 SXM datasheet: 4.8 TB/s HBM3e; FP32 67 TFLOPS (non-tensor); TF32 tensor core 494 TFLOPS dense
  // (989 with sparsity). Hopper SM: up to 228 KB shared memory per SM, 132 SMs. Launch ~4 us (CUDA launch latency).
  Target t;
  t.name = "cuda-h200";
  t.dram_bandwidth = 4.8e12;
  t.onchip_bytes = 228 * 1024;
  t.launch_overhead_s = 4e-6;
  t.vector_flops = 67e12;
  t.matrix_flops = 494e12;
  t.cores = 132;
  t.channels_last = false;
  t.backend = "cuda";
  return t;
}

Target ascend910b() {
  // Huawei Ascend 910B (public figures): HBM2e ~1.6 TB/s; ~313 TFLOPS FP16 on the cube units; vector units ~
  // 1/16 of that; 24 AI cores, each with a 192 KB Unified Buffer (the on-chip budget fused vector kernels use).
  Target t;
  t.name = "ascend910b";
  t.dram_bandwidth = 1.6e12;
  t.onchip_bytes = 192 * 1024;
  t.launch_overhead_s = 10e-6;
  t.vector_flops = 20e12;
  t.matrix_flops = 313e12;
  t.cores = 24;
  return t;
}

}  // namespace

Target Target::builtin_or_file(const std::string& spec) {
  if (spec.empty() || spec == "cpu-host" || spec == "cpu") return cpu_host();
  if (spec == "cuda" || spec == "cuda-h200") return cuda_h200();
  if (spec == "ascend910b") return ascend910b();
  GAF_CHECK(std::filesystem::exists(spec),
            "unknown target '{}': use cpu-host, cuda-h200, ascend910b or a target JSON file", spec);
  std::error_code ec;
  GAF_CHECK(!std::filesystem::is_directory(spec, ec), "target file '{}' is a folder, not a JSON file", spec);
  std::ifstream f(spec);
  GAF_CHECK(f, "cannot read target file '{}'", spec);
  std::stringstream text;
  text << f.rdbuf();
  return parse(text.str(), spec);
}

Target Target::parse(const std::string& json_text, const std::string& spec) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const std::exception& e) {
    fail("target file '{}' is not valid JSON: {}", spec, library_message(e));
  }
  GAF_CHECK(j.is_object(), "target file '{}' must hold a JSON object", spec);
  Target t = cpu_host();
  t.name = spec;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    auto num = [&]() {
      GAF_CHECK(it->is_number() && it->get<double>() > 0, "target file '{}': '{}' must be a positive number", spec, k);
      return it->get<double>();
    };
    if (k == "name") {
      GAF_CHECK(it->is_string(), "target file '{}': 'name' must be a string", spec);
      t.name = it->get<std::string>();
    }
    else if (k == "dram_bandwidth") t.dram_bandwidth = num();
    else if (k == "onchip_bytes") t.onchip_bytes = num();
    else if (k == "launch_overhead_s") t.launch_overhead_s = num();
    else if (k == "vector_flops") t.vector_flops = num();
    else if (k == "matrix_flops") t.matrix_flops = num();
    else if (k == "cores") {
      const double c = num();
      GAF_CHECK(c >= 1 && c <= 65536 && c == double(int64_t(c)), "target file '{}': 'cores' must be a whole number from 1 to 65536",
                spec);
      t.cores = int(c);
    }
    else if (k == "conv_clip_epilogue") {
      GAF_CHECK(it->is_boolean(), "target file '{}': 'conv_clip_epilogue' must be true or false", spec);
      t.conv_clip_epilogue = it->get<bool>();
    } else if (k == "conv_winograd") {
      GAF_CHECK(it->is_boolean(), "target file '{}': 'conv_winograd' must be true or false", spec);
      t.conv_winograd = it->get<bool>();
    } else if (k == "backend") {
      GAF_CHECK(it->is_string() && (it->get<std::string>() == "cpu" || it->get<std::string>() == "cuda"),
                "target file '{}': 'backend' must be \"cpu\" or \"cuda\"", spec);
      t.backend = it->get<std::string>();
    } else if (k == "channels_last") {
      GAF_CHECK(it->is_boolean(), "target file '{}': 'channels_last' must be true or false", spec);
      t.channels_last = it->get<bool>();
    } else if (k == "conv_expand_depthwise") {
      GAF_CHECK(it->is_boolean(), "target file '{}': 'conv_expand_depthwise' must be true or false", spec);
      t.conv_expand_depthwise = it->get<bool>();
    } else if (k == "conv_expand_depthwise_everywhere") {
      GAF_CHECK(it->is_boolean(), "target file '{}': 'conv_expand_depthwise_everywhere' must be true or false", spec);
      t.conv_expand_depthwise_everywhere = it->get<bool>();
    } else fail("target file '{}': unknown key '{}' (known: name, dram_bandwidth, onchip_bytes, launch_overhead_s, "
              "vector_flops, matrix_flops, cores, conv_clip_epilogue, conv_winograd, conv_expand_depthwise, channels_last, backend, "
              "conv_expand_depthwise_everywhere)", spec, k);
  }
  return t;
}

std::string Target::to_json() const {
  nlohmann::json j = {{"name", name},
                      {"dram_bandwidth", dram_bandwidth},
                      {"onchip_bytes", onchip_bytes},
                      {"launch_overhead_s", launch_overhead_s},
                      {"vector_flops", vector_flops},
                      {"matrix_flops", matrix_flops},
                      {"cores", cores},
                      {"conv_clip_epilogue", conv_clip_epilogue},
                      {"conv_winograd", conv_winograd},
                      {"channels_last", channels_last},
                      {"backend", backend},
                      {"conv_expand_depthwise", conv_expand_depthwise},
                      {"conv_expand_depthwise_everywhere", conv_expand_depthwise_everywhere}};
  return j.dump(2);
}

}  // namespace gaf
