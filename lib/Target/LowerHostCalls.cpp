//===- LowerHostCalls.cpp - memref-form attn ops to runtime calls ---------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// `attn-lower-host-calls`: the host side of a compiled program. Each
// gpu.binary attn-serialize-kernels left (image + `attn.manifest`) becomes
// an attnRtEmbeddedModule global; each memref-form attn op becomes one call
// of its attnRtHost* entry (attn-c/Runtime.h) with that module, its kernel
// names and its buffers as (aligned base pointer, element count). What the
// runtime needs beyond the op (an attention's merge kernels, its band) is
// read from the manifest, the kernels' ABI, not decided again here.
//
// Buffers the function allocates itself are host memory, which the kernels
// cannot read or write: an alloc that reaches an attn op becomes managed
// memory (gpu.alloc host_shared), so that a result without caller-given
// `outs` lands where both the kernels and the host reach it. The calls take
// the stream of the function's `attn.stream` argument (stream 0 without).
//
//===----------------------------------------------------------------------===//

#include "attn/Target/Passes.h"

#include "attn/Dialect/Attn/IR/Attn.h"
#include "attn/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/JSON.h"

#include <cmath>

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNLOWERHOSTCALLSPASS
#include "attn/Target/Passes.h.inc"
} // namespace mlir::attn

using namespace mlir;
using namespace mlir::attn;

namespace {

/// One embedded image: its attnRtEmbeddedModule global and its manifest.
struct Embedded {
  LLVM::GlobalOp module;
  llvm::json::Object manifest;

  const llvm::json::Object *findKernel(StringRef name) const {
    if (const llvm::json::Array *kernels = manifest.getArray("kernels"))
      for (const llvm::json::Value &k : *kernels)
        if (const llvm::json::Object *o = k.getAsObject())
          if (o->getString("name") == name)
            return o;
    return nullptr;
  }
};

/// Builds the calls of one host function; `b` is at the op being lowered.
class HostCallBuilder {
public:
  HostCallBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value i32(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  }
  Value i64(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value address(LLVM::GlobalOp global) {
    return LLVM::AddressOfOp::create(b, loc, global);
  }

  /// The aligned base pointer of `memref` as an i64 (the C ABI's uint64_t).
  Value pointer(Value memref) {
    Value index =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
    return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), index);
  }
  /// The element count of `memref`, an i64.
  Value numel(Value memref) {
    auto type = cast<MemRefType>(memref.getType());
    Value n = arith::ConstantIndexOp::create(b, loc, 1);
    for (int64_t d = 0; d < type.getRank(); ++d)
      n = arith::MulIOp::create(b, loc, n, dim(memref, d));
    return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), n);
  }
  /// Dimension `d` of `memref`, an index.
  Value dim(Value memref, int64_t d) {
    auto type = cast<MemRefType>(memref.getType());
    if (!type.isDynamicDim(d))
      return arith::ConstantIndexOp::create(b, loc, type.getDimSize(d));
    return memref::DimOp::create(b, loc, memref, d);
  }
  Value dimI64(Value memref, int64_t d) {
    return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), dim(memref, d));
  }
  Value null() {
    return LLVM::ZeroOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext()));
  }
  /// A scalar or table parameter in a 64-bit slot: an f32's bits or an
  /// integer zero-extended, a memref's aligned pointer.
  Value slot(Value v) {
    Type t = v.getType();
    if (isa<MemRefType>(t))
      return pointer(v);
    if (t.isF32())
      v = arith::BitcastOp::create(b, loc, b.getI32Type(), v);
    return arith::ExtUIOp::create(b, loc, b.getI64Type(), v);
  }
  /// A stack array of the i64 `values`, as the pointer the C ABI takes.
  Value array(ValueRange values) {
    auto type = MemRefType::get({int64_t(values.size())}, b.getI64Type());
    Value buffer = memref::AllocaOp::create(b, loc, type);
    for (auto [i, v] : llvm::enumerate(values))
      memref::StoreOp::create(
          b, loc, v, buffer,
          ValueRange{arith::ConstantIndexOp::create(b, loc, int64_t(i))});
    return LLVM::IntToPtrOp::create(
        b, loc, LLVM::LLVMPointerType::get(b.getContext()), pointer(buffer));
  }

private:
  OpBuilder &b;
  Location loc;
};

struct AttnLowerHostCallsPass
    : attn::impl::AttnLowerHostCallsPassBase<AttnLowerHostCallsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::BinaryOp> binaries;
    for (auto binary : module.getOps<gpu::BinaryOp>())
      if (binary->hasAttr(kManifestAttrName))
        binaries.push_back(binary);
    for (gpu::BinaryOp binary : binaries)
      if (failed(embed(binary)))
        return signalPassFailure();

    SmallVector<Operation *> ops;
    WalkResult refused = module.walk([&](Operation *op) {
      if (!isa<CopyIndicesOp, CopyByTableOp>(op) ||
          op->getParentOfType<gpu::GPUModuleOp>())
        return WalkResult::advance();
      // Their kernels exist for the runtime's plan() and graph-mode run(),
      // which launch them; no runtime entry point takes them from host code.
      op->emitOpError() << "has no host call: copy the arrays with "
                           "memref.copy or gpu.memcpy in host code ("
                        << op->getName()
                        << " is a kernel the runtime launches itself)";
      return WalkResult::interrupt();
    });
    if (refused.wasInterrupted())
      return signalPassFailure();
    module.walk([&](Operation *op) {
      if (isa<AttentionOp, MergeStatesOp, AppendKVOp>(op) &&
          !op->getParentOfType<gpu::GPUModuleOp>())
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      if (failed(moveAllocsToDevice(op)))
        return signalPassFailure();
      LogicalResult lowered =
          TypeSwitch<Operation *, LogicalResult>(op)
              .Case([&](AttentionOp a) { return lowerAttention(a); })
              .Case([&](MergeStatesOp m) { return lowerMergeStates(m); })
              .Case([&](AppendKVOp a) { return lowerAppendKV(a); });
      if (failed(lowered))
        return signalPassFailure();
      op->erase();
    }
    for (gpu::BinaryOp binary : binaries)
      binary.erase();
    // The calls have their streams; LLVM IR translation has no use for the
    // mark.
    module.walk([](FunctionOpInterface func) {
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        func.removeArgAttr(i, kStreamArgAttrName);
    });
    // The variants' hooks live on in the kernels; the host has no use for
    // them, and LLVM IR translation none for attn ops.
    for (auto variant : llvm::make_early_inc_range(module.getOps<VariantOp>()))
      variant.erase();
  }

  //===--------------------------------------------------------------------===//
  // Globals
  //===--------------------------------------------------------------------===//

  /// A unique symbol name starting with `base`.
  std::string uniqueName(StringRef base) {
    std::string name = base.str();
    for (int i = 0; SymbolTable::lookupSymbolIn(getOperation(), name); ++i)
      name = (base + "_" + Twine(i)).str();
    return name;
  }

  /// An internal constant i8 array holding `bytes` (and a NUL if `cString`).
  LLVM::GlobalOp bytesGlobal(StringRef base, StringRef bytes, bool cString,
                             uint64_t alignment = 1) {
    ModuleOp module = getOperation();
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    std::string value = bytes.str();
    if (cString)
      value.push_back('\0');
    auto type = LLVM::LLVMArrayType::get(b.getI8Type(), value.size());
    return LLVM::GlobalOp::create(b, module.getLoc(), type, /*isConstant=*/true,
                                  LLVM::Linkage::Internal, uniqueName(base),
                                  b.getStringAttr(value), alignment);
  }

  /// The C string global of `text`, shared by every call that names it.
  LLVM::GlobalOp stringGlobal(StringRef text) {
    auto it = strings.find(text);
    if (it != strings.end())
      return it->second;
    LLVM::GlobalOp g = bytesGlobal("attn_kernel_names", text, /*cString=*/true);
    strings[text] = g;
    return g;
  }

  /// The image, manifest and attnRtEmbeddedModule globals of `binary`.
  LogicalResult embed(gpu::BinaryOp binary) {
    auto objects = binary.getObjects();
    if (objects.size() != 1)
      return binary.emitOpError()
             << "attn-lower-host-calls: expected one object, got "
             << objects.size();
    auto object = cast<gpu::ObjectAttr>(objects[0]);
    StringRef manifestText =
        binary->getAttrOfType<StringAttr>(kManifestAttrName).getValue();
    llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(manifestText);
    if (!parsed || !parsed->getAsObject())
      return binary.emitOpError()
             << "attn-lower-host-calls: the manifest is not a JSON object"
             << (parsed ? "" : ": " + llvm::toString(parsed.takeError()));
    StringRef name = binary.getName();
    // cuModuleLoadData reads the image in place: align it as an ELF wants.
    LLVM::GlobalOp image =
        bytesGlobal((name + "_image").str(), object.getObject().getValue(),
                    /*cString=*/false, /*alignment=*/64);
    LLVM::GlobalOp manifest =
        bytesGlobal((name + "_manifest").str(), manifestText, /*cString=*/true);

    // attnRtEmbeddedModule: {image, image_bytes, manifest_json, state}; the
    // runtime writes `state`, so the global is not constant.
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    Location loc = binary.getLoc();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto type =
        LLVM::LLVMStructType::getLiteral(ctx, {ptr, b.getI64Type(), ptr, ptr});
    auto global = LLVM::GlobalOp::create(
        b, loc, type, /*isConstant=*/false, LLVM::Linkage::Internal,
        uniqueName((name + "_module").str()), Attribute(), /*alignment=*/8);
    b.createBlock(&global.getInitializerRegion());
    auto field = [&](Value into, Value value, int64_t position) -> Value {
      return LLVM::InsertValueOp::create(b, loc, into, value,
                                         ArrayRef<int64_t>{position});
    };
    auto bytes =
        cast<LLVM::LLVMArrayType>(image.getGlobalType()).getNumElements();
    Value v = LLVM::UndefOp::create(b, loc, type);
    v = field(v, LLVM::AddressOfOp::create(b, loc, image), 0);
    v = field(v,
              LLVM::ConstantOp::create(b, loc, b.getI64Type(),
                                       b.getI64IntegerAttr(bytes)),
              1);
    v = field(v, LLVM::AddressOfOp::create(b, loc, manifest), 2);
    v = field(v, LLVM::ZeroOp::create(b, loc, ptr), 3);
    LLVM::ReturnOp::create(b, loc, v);
    embedded[name] = {global, std::move(*parsed->getAsObject())};
    return success();
  }

  /// The external declaration of `name` (created once).
  func::FuncOp declare(StringRef name, TypeRange inputs) {
    ModuleOp module = getOperation();
    if (auto f = module.lookupSymbol<func::FuncOp>(name))
      return f;
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    auto f = func::FuncOp::create(
        b, module.getLoc(), name,
        b.getFunctionType(inputs, {b.getI32Type()})); // attnRtStatus
    f.setPrivate();
    return f;
  }

  //===--------------------------------------------------------------------===//
  // The ops
  //===--------------------------------------------------------------------===//

  /// The op's embedded image and kernel names (its `attn.kernels`).
  FailureOr<const Embedded *> getKernels(Operation *op,
                                         SmallVectorImpl<StringRef> &names) {
    auto kernels = op->getAttrOfType<ArrayAttr>(kKernelsAttrName);
    if (!kernels || kernels.empty())
      return op->emitOpError() << "has no " << kKernelsAttrName
                               << ": run attn-outline-kernels first";
    const Embedded *image = nullptr;
    for (auto ref : kernels.getAsRange<SymbolRefAttr>()) {
      auto it = embedded.find(ref.getRootReference().getValue());
      if (it == embedded.end())
        return op->emitOpError()
               << "names kernels of @" << ref.getRootReference().getValue()
               << ", which is no gpu.binary with an " << kManifestAttrName
               << ": run attn-serialize-kernels first";
      if (image && image != &it->second)
        return op->emitOpError() << "names kernels of two images";
      image = &it->second;
      names.push_back(ref.getLeafReference().getValue());
    }
    return image;
  }

  /// Every data operand is a memref of the identity layout (the runtime
  /// takes base pointers of dense buffers).
  LogicalResult checkMemRefs(Operation *op) {
    for (Value v : op->getOperands()) {
      if (isa<RankedTensorType>(v.getType()))
        return op->emitOpError()
               << "is in the tensor form: bufferize it before "
                  "attn-lower-host-calls";
      if (auto m = dyn_cast<MemRefType>(v.getType());
          m && !m.getLayout().isIdentity())
        return op->emitOpError()
               << "needs dense memrefs (identity layout), got " << m;
    }
    return success();
  }

  /// What every op's lowering checks first: dense memref operands and
  /// kernels in a serialized image (returned, with their names).
  FailureOr<const Embedded *> prepare(Operation *op,
                                      SmallVectorImpl<StringRef> &kernels) {
    if (failed(checkMemRefs(op)))
      return failure();
    return getKernels(op, kernels);
  }

  /// Each buffer of `op` that its function allocates (through casts) as
  /// host memory becomes managed memory: `memref.alloc` -> `gpu.alloc
  /// host_shared`, its `memref.dealloc` -> attnRtDeviceFree.
  LogicalResult moveAllocsToDevice(Operation *op) {
    for (Value v : op->getOperands()) {
      while (auto cast = v.getDefiningOp<memref::CastOp>())
        v = cast.getSource();
      auto alloc = v.getDefiningOp<memref::AllocOp>();
      if (!alloc)
        continue;
      if (!alloc.getSymbolOperands().empty())
        return alloc.emitOpError()
               << "feeds an attn op but has symbol operands; "
                  "attn-lower-host-calls moves plain allocs to device memory";
      OpBuilder b(alloc);
      auto shared = gpu::AllocOp::create(
          b, alloc.getLoc(), alloc.getType(), /*asyncToken=*/Type(),
          /*asyncDependencies=*/ValueRange(), alloc.getDynamicSizes(),
          /*symbolOperands=*/ValueRange(), /*hostShared=*/true);
      for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
        if (auto dealloc = dyn_cast<memref::DeallocOp>(user)) {
          OpBuilder db(dealloc);
          HostCallBuilder c(db, dealloc.getLoc());
          callRuntime(db, dealloc.getLoc(), "attnRtDeviceFree",
                      {c.pointer(shared.getMemref())});
          dealloc.erase();
        }
      alloc.replaceAllUsesWith(shared.getMemref());
      alloc.erase();
    }
    return success();
  }

  /// The stream the calls of `op`'s function run on: its argument marked
  /// `attn.stream` as an i64, or 0.
  FailureOr<Value> getStream(Operation *op, HostCallBuilder &c, OpBuilder &b) {
    auto func = op->getParentOfType<FunctionOpInterface>();
    Value stream;
    for (unsigned i = 0, e = func ? func.getNumArguments() : 0; i < e; ++i) {
      if (!func.getArgAttr(i, kStreamArgAttrName))
        continue;
      if (stream)
        return func->emitOpError() << "has two " << kStreamArgAttrName
                                   << " arguments; mark one";
      stream = func.getArgument(i);
    }
    if (!stream)
      return c.i64(0);
    Type t = stream.getType();
    if (isa<LLVM::LLVMPointerType>(t))
      return LLVM::PtrToIntOp::create(b, op->getLoc(), b.getI64Type(), stream)
          .getResult();
    if (t.isInteger(64))
      return stream;
    return func->emitOpError()
           << "marks an argument of type " << t << " " << kStreamArgAttrName
           << "; a stream is an i64 or !llvm.ptr (a CUstream)";
  }

  /// The call of runtime entry `callee` with `args` (declared on first use).
  void callRuntime(OpBuilder &b, Location loc, StringRef callee,
                   ValueRange args) {
    func::CallOp::create(b, loc, declare(callee, args.getTypes()), args);
  }

  LogicalResult lowerAttention(AttentionOp op) {
    if (isa<ComposedAttr>(op.getFormat()))
      return op.emitOpError() << "has a composed format: run "
                                 "attn-decompose-composed first";
    SmallVector<StringRef> kernels;
    FailureOr<const Embedded *> image = prepare(op, kernels);
    if (failed(image))
      return failure();
    if (Value mask = op.getMask();
        mask && !cast<MemRefType>(mask.getType()).getElementType().isInteger(8))
      return op.emitOpError()
             << "has an i1 custom mask; attnRtHostAttention takes it "
                "bit-packed (i8, little-endian, each request from a new byte)";
    // The variants' parameters, named as the first kernel's manifest lists
    // them (variant after variant, each in its declared order: the order of
    // the op's params).
    const llvm::json::Object *first = (*image)->findKernel(kernels[0]);
    if (!first)
      return op.emitOpError() << "names kernel '" << kernels[0]
                              << "', which its image's manifest lacks";
    SmallVector<std::string> paramNames;
    if (const llvm::json::Array *params = first->getArray("variant_params"))
      for (const llvm::json::Value &p : *params)
        if (const llvm::json::Object *o = p.getAsObject())
          if (std::optional<StringRef> name = o->getString("name"))
            paramNames.push_back(name->str());
    if (paramNames.size() != op.getParams().size())
      return op.emitOpError()
             << "has " << op.getParams().size() << " variant parameters but "
             << "kernel '" << kernels[0] << "' takes " << paramNames.size();
    auto paramNamed = [&](StringRef name) -> Value {
      for (auto [n, v] : llvm::zip(paramNames, op.getParams()))
        if (n == name)
          return v;
      return Value();
    };

    // Merge kernels and the band, per kernel, from the manifest.
    std::string kernelList, mergeList;
    int32_t causal = 0, windowLeft = -1;
    std::string windowParam;
    for (auto [i, name] : llvm::enumerate(kernels)) {
      const llvm::json::Object *k = (*image)->findKernel(name);
      if (!k)
        return op.emitOpError() << "names kernel '" << name
                                << "', which its image's manifest lacks";
      std::optional<StringRef> merge = k->getString("merge_kernel");
      if (!merge)
        return op.emitOpError()
               << "kernel '" << name << "' has no merge_kernel in the manifest";
      int32_t kernelCausal = 0, kernelWindow = -1;
      std::string kernelWindowParam;
      if (const llvm::json::Object *band = k->getObject("band")) {
        if (band->get("upper_param"))
          return op.emitOpError()
                 << "kernel '" << name
                 << "' has an upper band bound by a variant parameter; the "
                    "planner knows causal (0) only";
        if (std::optional<StringRef> lower = band->getString("lower_param")) {
          kernelWindowParam = lower->str();
          if (!paramNamed(*lower) ||
              !paramNamed(*lower).getType().isInteger(32))
            return op.emitOpError()
                   << "kernel '" << name << "' bounds its band by '" << *lower
                   << "', which is no i32 parameter of the op";
        }
        if (std::optional<int64_t> upper = band->getInteger("upper")) {
          if (*upper != 0)
            return op.emitOpError() << "kernel '" << name << "' has a band "
                                    << "upper bound of " << *upper
                                    << "; the planner knows causal (0) only";
          kernelCausal = 1;
        }
        if (std::optional<int64_t> lower = band->getInteger("lower"))
          kernelWindow = int32_t(*lower);
      }
      if (i > 0 && (kernelCausal != causal || kernelWindow != windowLeft ||
                    kernelWindowParam != windowParam))
        return op.emitOpError() << "tile candidates with different bands";
      causal = kernelCausal;
      windowLeft = kernelWindow;
      windowParam = kernelWindowParam;
      kernelList += (i ? "," : "") + name.str();
      mergeList += (i ? "," : "") + merge->str();
    }

    OpBuilder b(op);
    HostCallBuilder c(b, op.getLoc());
    // A window bound by a parameter: the planner gets its value.
    Value window =
        windowParam.empty() ? c.i32(windowLeft) : paramNamed(windowParam);
    SmallVector<Value> args = {
        c.address((*image)->module), c.address(stringGlobal(kernelList)),
        c.address(stringGlobal(mergeList)), c.i32(causal), window};
    auto buffer = [&](Value memref) {
      if (!memref) {
        args.append({c.i64(0), c.i64(0)});
        return;
      }
      args.push_back(c.pointer(memref));
      args.push_back(c.numel(memref));
    };
    buffer(op.getQuery());
    buffer(op.getKeyCache());
    buffer(op.getValueCache());
    buffer(op.getOuts()[0]);
    buffer(op.getOuts()[1]);
    ValueRange indices = op.getIndices(); // qo, kv_indptr[, kv_indices, last]
    for (int i = 0; i < 4; ++i)
      buffer(i < int(indices.size()) ? indices[i] : Value());
    buffer(op.getMask()); // bytes
    args.push_back(op.getSmScale()
                       ? op.getSmScale()
                       : c.f32(1.0 / std::sqrt(double(op.getHeadDim()))));
    // Parameters: their names and one 64-bit slot each (f32 bits or an i32
    // in the low half, a table's pointer), typed again by the manifest.
    args.push_back(c.i32(int64_t(paramNames.size())));
    if (paramNames.empty()) {
      Value none = c.null();
      args.append({none, none});
    } else {
      SmallVector<Value> slots;
      for (Value v : op.getParams())
        slots.push_back(c.slot(v));
      args.push_back(c.address(stringGlobal(llvm::join(paramNames, ","))));
      args.push_back(c.array(slots));
    }
    FailureOr<Value> stream = getStream(op, c, b);
    if (failed(stream))
      return failure();
    args.append({c.i64(0), c.i64(0), *stream}); // its own workspace
    callRuntime(b, op.getLoc(), "attnRtHostAttention", args);
    return success();
  }

  LogicalResult lowerMergeStates(MergeStatesOp op) {
    SmallVector<StringRef> kernels;
    FailureOr<const Embedded *> image = prepare(op, kernels);
    if (failed(image))
      return failure();
    Value out = op.getOuts()[0];
    if (cast<MemRefType>(out.getType()).getRank() != 3)
      return op.emitOpError() << "needs [tokens, heads, head_dim] states";
    OpBuilder b(op);
    HostCallBuilder c(b, op.getLoc());
    FailureOr<Value> stream = getStream(op, c, b);
    if (failed(stream))
      return failure();
    SmallVector<Value> states, lses;
    for (Value v : op.getOutputs())
      states.push_back(c.pointer(v));
    for (Value v : op.getLses())
      lses.push_back(c.pointer(v));
    SmallVector<Value> args = {c.address((*image)->module),
                               c.address(stringGlobal(kernels[0])),
                               c.i32(int64_t(states.size())),
                               c.array(states),
                               c.array(lses),
                               c.dimI64(out, 0),
                               c.dimI64(out, 1),
                               c.dimI64(out, 2),
                               c.pointer(out),
                               c.pointer(op.getOuts()[1]),
                               op.getMask() ? c.pointer(op.getMask())
                                            : c.i64(0),
                               *stream};
    callRuntime(b, op.getLoc(), "attnRtHostMergeStates", args);
    return success();
  }

  LogicalResult lowerAppendKV(AppendKVOp op) {
    SmallVector<StringRef> kernels;
    FailureOr<const Embedded *> image = prepare(op, kernels);
    if (failed(image))
      return failure();
    ValueRange indices = op.getIndices(); // batch, positions, indptr, indices
    if (indices.size() != 4)
      return op.emitOpError() << "needs a paged cache's four index arrays";
    OpBuilder b(op);
    HostCallBuilder c(b, op.getLoc());
    FailureOr<Value> stream = getStream(op, c, b);
    if (failed(stream))
      return failure();
    Value key = op.getKey();
    bool hnd = op.getFormat().getLayout() == KVLayout::HND;
    SmallVector<Value> args = {c.address((*image)->module),
                               c.address(stringGlobal(kernels[0])),
                               c.pointer(key),
                               c.pointer(op.getValue()),
                               c.dimI64(key, 0),
                               c.dimI64(key, 1),
                               c.dimI64(key, 2),
                               c.pointer(op.getKeyCache()),
                               c.pointer(op.getValueCache()),
                               c.dimI64(op.getKeyCache(), 0),
                               c.i32(hnd),
                               c.pointer(indices[0]),
                               c.pointer(indices[1]),
                               c.pointer(indices[2]),
                               c.numel(indices[2]),
                               c.pointer(indices[3]),
                               c.numel(indices[3]),
                               *stream};
    callRuntime(b, op.getLoc(), "attnRtHostAppendKV", args);
    return success();
  }

  llvm::StringMap<Embedded> embedded;
  llvm::StringMap<LLVM::GlobalOp> strings;
};

} // namespace
