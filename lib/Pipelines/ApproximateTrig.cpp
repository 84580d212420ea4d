//===- ApproximateTrig.cpp - math.sin/cos on the hardware's approximation -===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// convert-gpu-to-nvvm lowers an f32 math.sin/math.cos to libdevice's
// __nv_sinf/__nv_cosf, whose slow path (Payne-Hanek reduction for large
// arguments) keeps a 28-byte local array: inlined once per element of an
// unrolled RoPE loop it costs the decode kernel kilobytes of stack and
// spills. RoPE's angles are pos * inv_freq, i.e. at most a few 1e5 radians,
// so a three-term Cody-Waite reduction into [-pi, pi] followed by the
// hardware's sin.approx/cos.approx (libdevice's __nv_fast_* forms, chosen by
// the `afn` flag) is accurate and cheap:
//
//   k  = roundeven(x / 2pi)
//   r  = fma(-k, C3, fma(-k, C2, fma(-k, C1, x)))      C1 + C2 + C3 = 2pi
//   sin x ~= sin.approx(r)
//
// C1 = 201/32 has 8 significant bits, so x - k C1 is exact (both are
// multiples of min(ulp(x), 1/32)); C2 and C3 carry the rest of 2pi. In a
// float32 emulation of these steps, sin(r) is within 2.4e-7 of sin(x) for
// |x| up to 1e7, with |r| < 4 (k from a rounded x / 2pi can be off by one
// near half turns); sin.approx adds about 2^-20.9 on that range.
//
// f32 math.tanh (the soft-cap variant's cap * tanh(s / cap)) becomes LLVM's
// tanh intrinsic marked `afn`, which NVPTX emits as one tanh.approx.f32
// (relative error about 2^-11, FlashInfer's soft-cap uses the same
// instruction) instead of libdevice's tanhf, a polynomial with a range test
// inlined for every logit of the unrolled softmax: the soft-capped prefill
// kernel's PTX 7330 -> 5026 lines.
//
//===----------------------------------------------------------------------===//

#include "attn/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

using namespace mlir;

namespace {

/// 2pi = kTwoPi1 + kTwoPi2 + kTwoPi3 (kTwoPi1 = 201/32 exactly).
constexpr float kTwoPi1 = 6.28125f;
constexpr float kTwoPi2 = 1.93530717e-3f;
constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr float kInvTwoPi = static_cast<float>(1.0 / kTwoPi);

template <typename TrigOp>
struct ReduceThenApproximate : OpRewritePattern<TrigOp> {
  using OpRewritePattern<TrigOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(TrigOp op,
                                PatternRewriter &rewriter) const override {
    Type f32 = rewriter.getF32Type();
    if (op.getType() != f32 ||
        bitEnumContainsAll(op.getFastmath(), arith::FastMathFlags::afn))
      return failure(); // Other widths, and ops already rewritten.
    Location loc = op.getLoc();
    auto constant = [&](double v) -> Value {
      return arith::ConstantOp::create(rewriter, loc, f32,
                                       rewriter.getF32FloatAttr(v));
    };
    // The third term: what float(kTwoPi1) + float(kTwoPi2) leaves of 2pi.
    const double third =
        kTwoPi - double(kTwoPi1) - double(static_cast<float>(kTwoPi2));
    Value x = op.getOperand();
    Value turns = arith::MulFOp::create(rewriter, loc, x, constant(kInvTwoPi));
    Value k = math::RoundEvenOp::create(rewriter, loc, turns);
    Value minusK = arith::NegFOp::create(rewriter, loc, k);
    Value r = x;
    for (double part : {double(kTwoPi1), double(kTwoPi2), third})
      r = math::FmaOp::create(rewriter, loc, minusK, constant(part), r);
    rewriter.replaceOpWithNewOp<TrigOp>(op, r, arith::FastMathFlags::afn);
    return success();
  }
};

/// f32 math.tanh -> llvm.intr.tanh {afn}: tanh.approx.f32.
struct ApproximateTanh : OpRewritePattern<math::TanhOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(math::TanhOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getType() != rewriter.getF32Type())
      return failure();
    rewriter.replaceOpWithNewOp<LLVM::TanhOp>(
        op, op.getType(), op.getOperand(),
        LLVM::FastmathFlagsAttr::get(getContext(), LLVM::FastmathFlags::afn));
    return success();
  }
};

struct ApproximateTrigPass
    : public PassWrapper<ApproximateTrigPass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ApproximateTrigPass)

  StringRef getArgument() const final { return "attn-approximate-trig"; }
  StringRef getDescription() const final {
    return "Reduce f32 math.sin/math.cos into [-pi, pi] (Cody-Waite) and mark "
           "them for the hardware approximation; f32 math.tanh on tanh.approx";
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<LLVM::LLVMDialect>();
  }

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ReduceThenApproximate<math::SinOp>,
                 ReduceThenApproximate<math::CosOp>, ApproximateTanh>(
        &getContext());
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace

std::unique_ptr<Pass> mlir::attn::createApproximateTrigPass() {
  return std::make_unique<ApproximateTrigPass>();
}
