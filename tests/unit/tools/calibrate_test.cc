// graph-autofusion calibrate: measured numbers in plausible ranges, written as a target file the planner
// reads.
#include <gtest/gtest.h>

#include <cstdio>

#include "gaf/onnx_io.h"
#include "gaf/tools.h"

namespace gaf {
namespace {

TEST(Calibrate, QuickMeasuresAndWritesATargetThePlannerReads) {
  std::string report;
  const Target t = tools::calibrate(true, &report);
  EXPECT_EQ(t.name, "calibrated");
  // Wide bounds: any machine this runs on, loaded or not, lands inside; a unit slip (bytes vs GB) does not.
  EXPECT_GT(t.dram_bandwidth, 1e8);
  EXPECT_LT(t.dram_bandwidth, 1e13);
  EXPECT_GT(t.matrix_flops, 1e8);
  EXPECT_LT(t.matrix_flops, 1e14);
  EXPECT_GT(t.vector_flops, 1e7);
  EXPECT_GT(t.launch_overhead_s, 1e-9);
  EXPECT_LT(t.launch_overhead_s, 1e-2);
  EXPECT_GE(t.cores, 1);
  EXPECT_GT(t.onchip_bytes, 1024);
  EXPECT_NE(report.find("GB/s"), std::string::npos) << report;

  const std::string path = ::testing::TempDir() + "/calibrated.json";
  onnx_io::write_file_atomic(path, t.to_json());
  const Target back = Target::builtin_or_file(path);
  EXPECT_DOUBLE_EQ(back.dram_bandwidth, t.dram_bandwidth);
  EXPECT_DOUBLE_EQ(back.matrix_flops, t.matrix_flops);
  EXPECT_DOUBLE_EQ(back.launch_overhead_s, t.launch_overhead_s);
  EXPECT_EQ(back.channels_last, t.channels_last);
  Model m = tools::demo_transformer_block(16, 32, 2, 64);
  tools::FuseOptions opts;
  opts.target = back;
  EXPECT_GT(tools::fuse_model(m, opts).groups.size(), 0u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gaf
