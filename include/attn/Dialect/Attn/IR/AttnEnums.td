//===- AttnEnums.td - enums of the attn dialect ------------*- tablegen -*-===//
//
// Small closed sets: KV layout, how a format indexes its blocks, hook kinds
// and the shape constants a hook may read.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_IR_ATTNENUMS_TD
#define ATTN_DIALECT_ATTN_IR_ATTNENUMS_TD

include "attn/Dialect/Attn/IR/AttnDialect.td"
include "mlir/IR/EnumAttr.td"

def Attn_KVLayout : I32EnumAttr<"KVLayout", "order of the axes inside a KV block", [
    I32EnumAttrCase<"NHD", 0>,
    I32EnumAttrCase<"HND", 1>
  ]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}
def Attn_KVLayoutAttr : EnumAttr<Attn_Dialect, Attn_KVLayout, "kv_layout">;

def Attn_KVIndexing : I32EnumAttr<"KVIndexing", "how a format finds its KV blocks", [
    I32EnumAttrCase<"paged", 0>,
    I32EnumAttrCase<"ragged", 1>
  ]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}
def Attn_KVIndexingAttr : EnumAttr<Attn_Dialect, Attn_KVIndexing, "kv_indexing">;

def Attn_HookKind : I32EnumAttr<"HookKind", "the place in the kernel a hook is inlined", [
    I32EnumAttrCase<"query_transform", 0>,
    I32EnumAttrCase<"key_transform", 1>,
    I32EnumAttrCase<"logits_transform", 2>,
    I32EnumAttrCase<"logits_mask", 3>,
    I32EnumAttrCase<"output_transform", 4>,
    I32EnumAttrCase<"sink", 5>
  ]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}
def Attn_HookKindAttr : EnumAttr<Attn_Dialect, Attn_HookKind, "hook_kind">;

def Attn_ConfigKey : I32EnumAttr<"ConfigKey", "a shape constant a hook may read", [
    I32EnumAttrCase<"head_dim", 0>,
    I32EnumAttrCase<"num_qo_heads", 1>,
    I32EnumAttrCase<"num_kv_heads", 2>
  ]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}
def Attn_ConfigKeyAttr : EnumAttr<Attn_Dialect, Attn_ConfigKey, "config_key">;

def Attn_KernelRole : I32EnumAttr<"KernelRole", "what a generated kernel runs", [
    I32EnumAttrCase<"attention", 0>,
    I32EnumAttrCase<"merge", 1>,
    I32EnumAttrCase<"merge_states", 2>,
    I32EnumAttrCase<"append_kv", 3>,
    I32EnumAttrCase<"copy_indices", 4>
  ]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}

#endif // ATTN_DIALECT_ATTN_IR_ATTNENUMS_TD
