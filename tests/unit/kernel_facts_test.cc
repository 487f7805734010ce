// DescribeKernelLaunch (inject/metrics/kernel_facts.h): what kp's own kernel records take from a
// launch's arguments, for each launch form. With no function handle nothing reaches the driver.
#include "inject/metrics/kernel_facts.h"

#include <cupti_activity.h>
#include <gtest/gtest.h>

namespace kp {
namespace {

TEST(KernelFacts, APlainLaunchGivesItsGridBlockSharedMemoryAndStream) {
  KernelLaunch l;
  l.form = KernelLaunch::Form::kKernel;
  l.grid[0] = 64, l.grid[1] = 2, l.grid[2] = 1;
  l.block[0] = 256, l.block[1] = 1, l.block[2] = 1;
  l.shared_bytes = 4096;
  l.stream = reinterpret_cast<CUstream>(0x10);
  const KernelFacts k = DescribeKernelLaunch(l);
  EXPECT_EQ(k.grid[0], 64u);
  EXPECT_EQ(k.grid[1], 2u);
  EXPECT_EQ(k.block[0], 256u);
  EXPECT_EQ(k.dynamic_shared, 4096u);
  EXPECT_EQ(k.stream, l.stream);
  EXPECT_FALSE(k.per_thread_stream);
  EXPECT_EQ(k.launch_type, static_cast<uint32_t>(CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR));
  EXPECT_EQ(k.cluster[0], 0u);  // no cluster: 0, as in CUPTI's records
  EXPECT_TRUE(k.name.empty());  // no function: the driver is not asked
  EXPECT_EQ(k.registers_per_thread, 0u);
}

TEST(KernelFacts, AnExLaunchGivesItsConfigClusterAndCooperativeAttribute) {
  CUlaunchAttribute attrs[2] = {};
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attrs[0].value.clusterDim.x = 2;
  attrs[0].value.clusterDim.y = 1;
  attrs[0].value.clusterDim.z = 1;
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attrs[1].value.cooperative = 1;
  CUlaunchConfig config = {};
  config.gridDimX = 16, config.gridDimY = 32, config.gridDimZ = 1;
  config.blockDimX = 128, config.blockDimY = 2, config.blockDimZ = 1;
  config.sharedMemBytes = 67584;
  config.hStream = reinterpret_cast<CUstream>(0x20);
  config.attrs = attrs;
  config.numAttrs = 2;
  KernelLaunch l;
  l.form = KernelLaunch::Form::kKernelExPtsz;
  l.config = &config;
  const KernelFacts k = DescribeKernelLaunch(l);
  EXPECT_EQ(k.grid[0], 16u);
  EXPECT_EQ(k.grid[1], 32u);
  EXPECT_EQ(k.block[0], 128u);
  EXPECT_EQ(k.block[1], 2u);
  EXPECT_EQ(k.dynamic_shared, 67584u);
  EXPECT_EQ(k.stream, config.hStream);
  EXPECT_TRUE(k.per_thread_stream);
  EXPECT_EQ(k.cluster[0], 2u);
  EXPECT_EQ(k.cluster[1], 1u);
  EXPECT_EQ(k.cluster[2], 1u);
  EXPECT_EQ(k.launch_type,
            static_cast<uint32_t>(CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE));
}

TEST(KernelFacts, ACooperativeLaunchIsOfThatType) {
  KernelLaunch l;
  l.form = KernelLaunch::Form::kCooperativePtsz;
  const KernelFacts k = DescribeKernelLaunch(l);
  EXPECT_EQ(k.launch_type,
            static_cast<uint32_t>(CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE));
  EXPECT_TRUE(k.per_thread_stream);
}

}  // namespace
}  // namespace kp
