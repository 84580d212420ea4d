//===- KernelManifestTest.cpp - Manifest entries from launch contracts ----===//
//
// getKernelManifest writes a kernel's manifest entry from its gpu.func alone:
// the `attn.launch` contract and the arguments' `attn.name`s. A gpu.func that
// lacks either is an error that names the kernel, never an entry the
// runtime would launch wrongly.
//
//===----------------------------------------------------------------------===//

#include "attn/Target/KernelManifest.h"
#include "attn/Dialect/Attn/IR/Attn.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::attn;

namespace {
class KernelManifestTest : public ::testing::Test {
protected:
  KernelManifestTest() { ctx.loadDialect<AttnDialect, gpu::GPUDialect>(); }

  /// The gpu.func @name of `source` (a module with one gpu.module).
  gpu::GPUFuncOp parseKernel(llvm::StringRef source, llvm::StringRef name) {
    module = parseSourceString<ModuleOp>(source, &ctx);
    if (!module)
      return nullptr;
    gpu::GPUFuncOp kernel;
    module->walk([&](gpu::GPUFuncOp func) {
      if (func.getName() == name)
        kernel = func;
    });
    return kernel;
  }

  /// The error getKernelManifest returns for `kernel`, or "" if none.
  static std::string manifestError(gpu::GPUFuncOp kernel) {
    llvm::Expected<llvm::json::Object> entry =
        getKernelManifest(kernel, /*usage=*/nullptr);
    if (entry)
      return "";
    return llvm::toString(entry.takeError());
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
};
} // namespace

TEST_F(KernelManifestTest, MissingLaunchContractNamesTheKernel) {
  gpu::GPUFuncOp kernel = parseKernel(R"mlir(
    module attributes {gpu.container_module} {
      gpu.module @attn_kernels {
        gpu.func @hand_written(%x: i32 {attn.name = "slot_rows"}) kernel {
          gpu.return
        }
      }
    }
  )mlir",
                                      "hand_written");
  ASSERT_TRUE(kernel);
  std::string message = manifestError(kernel);
  EXPECT_NE(message.find("kernel @hand_written has no attn.launch contract"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("attn-outline-kernels"), std::string::npos)
      << message;
}

TEST_F(KernelManifestTest, UnnamedArgumentIsAnError) {
  gpu::GPUFuncOp kernel = parseKernel(R"mlir(
    module attributes {gpu.container_module} {
      gpu.module @attn_kernels {
        gpu.func @attn_merge_bf16_d128(%x: i32) kernel attributes {attn.launch = #attn.launch<role = merge, chip = "sm_90", threads = 256, shared_bytes = 10240, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, pdl = true>} {
          gpu.return
        }
      }
    }
  )mlir",
                                      "attn_merge_bf16_d128");
  ASSERT_TRUE(kernel);
  std::string message = manifestError(kernel);
  EXPECT_NE(message.find("kernel @attn_merge_bf16_d128: argument #0 has no "
                         "attn.name"),
            std::string::npos)
      << message;
}

TEST_F(KernelManifestTest, EntryComesFromTheContract) {
  gpu::GPUFuncOp kernel = parseKernel(R"mlir(
    module attributes {gpu.container_module} {
      gpu.module @attn_kernels {
        gpu.func @attn_merge_bf16_d128(%rows: i32 {attn.name = "slot_rows"}) kernel attributes {attn.launch = #attn.launch<role = merge, chip = "sm_90", threads = 256, shared_bytes = 10240, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, pdl = true>} {
          gpu.return
        }
      }
    }
  )mlir",
                                      "attn_merge_bf16_d128");
  ASSERT_TRUE(kernel);
  llvm::Expected<llvm::json::Object> entry = getKernelManifest(kernel, nullptr);
  ASSERT_TRUE(bool(entry)) << llvm::toString(entry.takeError());
  EXPECT_EQ(entry->getString("name"), "attn_merge_bf16_d128");
  EXPECT_EQ(entry->getString("role"), "merge");
  EXPECT_EQ(entry->getInteger("threads"), 256);
  EXPECT_EQ(entry->getInteger("shared_bytes"), 10240);
  EXPECT_EQ(entry->getInteger("pdl"), 1);
  const llvm::json::Array *args = entry->getArray("args");
  ASSERT_TRUE(args);
  ASSERT_EQ(args->size(), 1u);
  EXPECT_EQ((*args)[0].getAsObject()->getString("name"), "slot_rows");
  EXPECT_EQ((*args)[0].getAsObject()->getString("kind"), "i32");
}
